package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpurun/gpurun"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/tensors/synthetic"
)

type benchReport struct {
	Model     string        `json:"model"`
	Arch      string        `json:"arch"`
	Backend   string        `json:"backend"`
	KVCache   string        `json:"kv_cache"` // f32 or f16
	PromptLen int           `json:"prompt_len"`
	Generate  int           `json:"generate"`
	Runs      []metricsJSON `json:"runs"`
	Median    benchMedian   `json:"median"`
}

// benchMedian holds the medians of the runs' rates (counts and stop
// reasons are the same in every run, so they have none).
type benchMedian struct {
	TimeToFirstTokenMS  float64 `json:"time_to_first_token_ms"`
	PrefillTokensPerSec float64 `json:"prefill_tokens_per_sec"`
	DecodeTokensPerSec  float64 `json:"decode_tokens_per_sec"`
}

func newBench() *cobra.Command {
	var (
		rf                      modelFlags
		synth, synthQuant       string
		promptLen, genLen, reps int
		asJSON                  bool
	)
	cmd := &cobra.Command{
		Use:   "bench (MODEL | -m MODEL | --synthetic NAME) [--backend B] [--prompt-len N] [--generate N] [--reps R]",
		Short: "Measure time to first token, prefill and decode tokens/s end to end",
		Long: `Bench runs R greedy generations of a synthetic prompt of --prompt-len tokens
(different in each run, so no run reuses another's KV cache) and reports each
run's time to first token, prefill tokens/s and decode tokens/s, and their
medians. One warm-up run is not reported. --synthetic NAME benchmarks a
random-weight model at the real shapes of NAME (no download needed).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			errOut := cmd.ErrOrStderr()
			var m *gpurun.Model
			var name string
			if synth != "" {
				if rf.model != "" || len(args) > 0 {
					return fmt.Errorf("give a model or --synthetic %s, not both", synth)
				}
				cfg, ok := synthetic.ByName(synth)
				if !ok {
					return fmt.Errorf("--synthetic %s: want one of %s", synth, strings.Join(synthetic.Names(), ", "))
				}
				fmt.Fprintf(errOut, "making random %s weights at the shapes of %s...\n", synthQuant, synth)
				ck, err := synthetic.Checkpoint(cfg, synthetic.Options{Quant: synthQuant, Seed: 1})
				if err != nil {
					return fmt.Errorf("--synthetic %s: %w", synth, err)
				}
				start := time.Now()
				if m, err = gpurun.OpenCheckpoint(cmd.Context(), ck, rf.options(cmd)...); err != nil {
					return fmt.Errorf("load synthetic %s: %w", synth, err)
				}
				printLoaded(errOut, m.Model, "", time.Since(start))
				name = "synthetic " + synth + " (" + synthQuant + ")"
			} else {
				if err := rf.takeModelArg(args); err != nil {
					return err
				}
				var err error
				if m, err = rf.open(cmd); err != nil {
					return err
				}
				name = rf.model
			}
			defer m.Close()
			backendName := m.Backend().Backend
			if promptLen+genLen > m.MaxCache() {
				return fmt.Errorf("--prompt-len %d + --generate %d exceed the KV cache of %d (raise --max-cache)", promptLen, genLen, m.MaxCache())
			}
			cfg := m.Config()
			rep := benchReport{Model: name, Arch: cfg.Arch, Backend: backendName, KVCache: m.KVDType().String(), PromptLen: promptLen, Generate: genLen}
			for r := -1; r < reps; r++ {
				if r < 0 {
					fmt.Fprintf(errOut, "warm-up run...\n")
				} else {
					fmt.Fprintf(errOut, "run %d of %d...\n", r+1, reps)
				}
				s := m.Model.NewSession()
				p := pipeline.Prompt{IDs: benchPrompt(promptLen, cfg.VocabSize, r+1)}
				for _, err := range s.Generate(cmd.Context(), p, pipeline.GenerateOptions{MaxTokens: genLen, IgnoreStopTokens: true}) {
					if err != nil {
						return fmt.Errorf("generate: %w", err)
					}
				}
				if r >= 0 {
					rep.Runs = append(rep.Runs, jsonMetrics(s.Metrics()))
				}
			}
			rep.Median = medianMetrics(rep.Runs)
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
			return nil
		},
	}
	rf.register(cmd)
	f := cmd.Flags()
	f.StringVar(&synth, "synthetic", "", "instead of a model, a random-weight model at real shapes: "+strings.Join(synthetic.Names(), "|"))
	synthQuant, promptLen, genLen, reps = synthetic.QuantInt4, 128, 64, 3
	f.Var(&choiceFlag{&synthQuant, []string{synthetic.QuantInt4, synthetic.QuantInt8, synthetic.QuantF16}}, "synthetic-quant", "weights of the --synthetic model: int4|int8|f16")
	f.Var(&intFlag{&promptLen, 1, pipeline.MaxCacheLimit, "an integer >= 1"}, "prompt-len", "prompt length in tokens")
	f.Var(&intFlag{&genLen, 1, pipeline.MaxCacheLimit, "an integer >= 1"}, "generate", "tokens to generate per run")
	f.Var(&intFlag{&reps, 1, 1000, "an integer in 1..1000"}, "reps", "measured runs")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
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

func medianMetrics(runs []metricsJSON) benchMedian {
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
	return benchMedian{
		TimeToFirstTokenMS:  med(func(m metricsJSON) float64 { return m.TimeToFirstTokenMS }),
		PrefillTokensPerSec: med(func(m metricsJSON) float64 { return m.PrefillTokensPerSec }),
		DecodeTokensPerSec:  med(func(m metricsJSON) float64 { return m.DecodeTokensPerSec }),
	}
}
