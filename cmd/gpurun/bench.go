package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/tensors/model"
	"github.com/gpurun/gpurun/tensors/synthetic"
)

// syntheticCheckpoint builds the named real-shape model with random weights.
func syntheticCheckpoint(name, quant string) (*model.Checkpoint, error) {
	cfg, ok := synthetic.ByName(name)
	if !ok {
		return nil, fmt.Errorf("bench: unknown synthetic model %q (want one of %s)", name, strings.Join(synthetic.Names(), ", "))
	}
	return synthetic.Checkpoint(cfg, synthetic.Options{Quant: quant, Seed: 1})
}

type benchReport struct {
	Model     string        `json:"model"`
	Arch      string        `json:"arch"`
	Backend   string        `json:"backend"`
	KVCache   string        `json:"kv_cache"` // f32 or f16
	PromptLen int           `json:"prompt_len"`
	Generate  int           `json:"generate"`
	Runs      []metricsJSON `json:"runs"`
	Median    metricsJSON   `json:"median"`
	Profile   []profileStep `json:"profile,omitempty"`
}

func newBench() *cobra.Command {
	var (
		rf                      runFlags
		promptLen, genLen, reps int
		asJSON, profile         bool
	)
	cmd := &cobra.Command{
		Use:   "bench (-m MODEL | --synthetic NAME) [--backend B] [--prompt-len N] [--generate N] [--reps R]",
		Short: "Measure time to first token, prefill and decode tokens/s end to end",
		Long: `Bench runs R greedy generations of a synthetic prompt of --prompt-len tokens
(different in each run, so no run reuses another's KV cache) and reports each
run's time to first token, prefill tokens/s and decode tokens/s, and their
medians. One warm-up run is not reported. --synthetic NAME benchmarks a
random-weight model at the real shapes of NAME (no download needed).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if promptLen < 1 || genLen < 1 || reps < 1 {
				return fmt.Errorf("bench: --prompt-len, --generate and --reps must be positive")
			}
			m, backendName, closeAll, err := rf.load(cmd)
			if err != nil {
				return err
			}
			defer closeAll()
			if promptLen+genLen > m.MaxCache() {
				return fmt.Errorf("bench: %d prompt + %d generated tokens exceed the cache of %d (raise --max-cache)", promptLen, genLen, m.MaxCache())
			}
			cfg := m.Config()
			name := rf.model
			if rf.synthetic != "" {
				name = "synthetic " + rf.synthetic + " (" + rf.syntheticQuant + ")"
			}
			rep := benchReport{Model: name, Arch: cfg.Arch, Backend: backendName, KVCache: m.KVDType().String(), PromptLen: promptLen, Generate: genLen}
			for r := -1; r < reps; r++ {
				s := m.NewSession()
				p := pipeline.Prompt{IDs: benchPrompt(promptLen, cfg.VocabSize, r+1)}
				for _, err := range s.Generate(cmd.Context(), p, pipeline.GenerateOptions{MaxTokens: genLen, IgnoreStopTokens: true}) {
					if err != nil {
						return err
					}
				}
				if r >= 0 {
					rep.Runs = append(rep.Runs, jsonMetrics(s.Metrics()))
				}
			}
			rep.Median = medianMetrics(rep.Runs)
			if profile {
				steps, err := m.Profile(cmd.Context(), benchPrompt(promptLen, cfg.VocabSize, 0))
				if err != nil {
					return err
				}
				rep.Profile = profileSteps(steps)
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%s (%s) on %s, %s KV cache: prompt %d tokens, generate %d\n", rep.Model, rep.Arch, rep.Backend, rep.KVCache, promptLen, genLen)
			fmt.Fprintf(w, "%-8s %12s %16s %16s %10s\n", "run", "TTFT ms", "prefill tok/s", "decode tok/s", "generated")
			for i, r := range rep.Runs {
				fmt.Fprintf(w, "%-8d %12.2f %16.1f %16.1f %10d\n", i+1, r.TimeToFirstTokenMS, r.PrefillTokensPerSec, r.DecodeTokensPerSec, r.GeneratedTokens)
			}
			md := rep.Median
			fmt.Fprintf(w, "%-8s %12.2f %16.1f %16.1f\n", "median", md.TimeToFirstTokenMS, md.PrefillTokensPerSec, md.DecodeTokensPerSec)
			writeProfile(w, rep.Profile)
			return nil
		},
	}
	rf.register(cmd)
	f := cmd.Flags()
	f.StringVar(&rf.synthetic, "synthetic", "", "instead of -m, a random-weight model at real shapes: "+strings.Join(synthetic.Names(), "|"))
	f.StringVar(&rf.syntheticQuant, "synthetic-quant", synthetic.QuantInt4, "weights of the --synthetic model: int4|int8|f16")
	f.IntVar(&promptLen, "prompt-len", 128, "prompt length in tokens")
	f.IntVar(&genLen, "generate", 64, "tokens to generate per run")
	f.IntVar(&reps, "reps", 3, "measured runs")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.BoolVar(&profile, "profile", false, "after the runs, profile one prefill and one decode step: device time, GB/s and GFLOP/s per kernel (GPU backends)")
	return cmd
}

// benchPrompt makes a deterministic prompt that differs from run to run in
// its first token, so no run reuses another's cached context. Ids 0-2 (the
// usual unk/bos/eos) are avoided.
func benchPrompt(n, vocab, run int) []int {
	ids := make([]int, n)
	span := max(vocab-3, 1)
	for i := range ids {
		ids[i] = 3 + (i*7919+run*104729)%span
	}
	return ids
}

func medianMetrics(runs []metricsJSON) metricsJSON {
	med := func(get func(metricsJSON) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = get(r)
		}
		slices.Sort(v)
		if len(v) == 0 {
			return 0
		}
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return metricsJSON{
		TimeToFirstTokenMS:  med(func(m metricsJSON) float64 { return m.TimeToFirstTokenMS }),
		PrefillTokensPerSec: med(func(m metricsJSON) float64 { return m.PrefillTokensPerSec }),
		DecodeTokensPerSec:  med(func(m metricsJSON) float64 { return m.DecodeTokensPerSec }),
		GeneratedTokens:     int(med(func(m metricsJSON) float64 { return float64(m.GeneratedTokens) })),
	}
}

// profileStep is one profiled step of the report, its ops summed per
// kernel.
type profileStep struct {
	Step    string          `json:"step"`
	Tokens  int             `json:"tokens"`
	Pos     int             `json:"pos"`
	TotalMS float64         `json:"total_ms"`
	Kernels []profileKernel `json:"kernels"`
}

// profileKernel is the device time and work of every dispatch of one
// kernel (variant) in a step; GB/s and GFLOP/s are 0 where the backend
// does not count the work.
type profileKernel struct {
	Kernel  string  `json:"kernel"`
	Ops     int     `json:"ops"`
	MS      float64 `json:"ms"`
	Bytes   int64   `json:"bytes"`
	FLOPs   int64   `json:"flops"`
	GBps    float64 `json:"gb_per_s"`
	GFLOPps float64 `json:"gflop_per_s"`
}

func profileSteps(steps []pipeline.StepProfile) []profileStep {
	var out []profileStep
	for _, st := range steps {
		ps := profileStep{Step: st.Step, Tokens: st.Tokens, Pos: st.Pos}
		by := map[string]*profileKernel{}
		for _, op := range st.Ops {
			name := strings.Join(op.Kernels, "+")
			if name == "" {
				name = string(op.Kind)
			}
			k := by[name]
			if k == nil {
				k = &profileKernel{Kernel: name}
				by[name] = k
			}
			k.Ops++
			k.MS += float64(op.Nanos) / 1e6
			k.Bytes += op.Bytes
			k.FLOPs += op.FLOPs
			ps.TotalMS += float64(op.Nanos) / 1e6
		}
		for _, k := range by {
			if k.MS > 0 {
				k.GBps = float64(k.Bytes) / k.MS / 1e6
				k.GFLOPps = float64(k.FLOPs) / k.MS / 1e6
			}
			ps.Kernels = append(ps.Kernels, *k)
		}
		slices.SortFunc(ps.Kernels, func(a, b profileKernel) int { return cmp.Compare(b.MS, a.MS) })
		out = append(out, ps)
	}
	return out
}

func writeProfile(w io.Writer, steps []profileStep) {
	for _, st := range steps {
		fmt.Fprintf(w, "\nprofile: %s, %d tokens at position %d: %.2f ms device time\n", st.Step, st.Tokens, st.Pos, st.TotalMS)
		fmt.Fprintf(w, "%-32s %5s %10s %7s %9s %9s\n", "kernel", "ops", "ms", "share", "GB/s", "GFLOP/s")
		for _, k := range st.Kernels {
			share := 0.0
			if st.TotalMS > 0 {
				share = 100 * k.MS / st.TotalMS
			}
			fmt.Fprintf(w, "%-32s %5d %10.3f %6.1f%% %9.2f %9.2f\n", k.Kernel, k.Ops, k.MS, share, k.GBps, k.GFLOPps)
		}
	}
}
