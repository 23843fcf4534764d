package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpurun/gpurun/gpu/backends"
	"github.com/gpurun/gpurun/gpu/cpu"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/tensors/model"
)

// runFlags are the model and generation flags shared by run and bench.
type runFlags struct {
	model       string
	backend     string
	maxCache    int
	activations string
	noFusion    bool
	hostSample  bool
	cpuMath     string

	synthetic, syntheticQuant string // bench only
}

func (r *runFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVarP(&r.model, "model", "m", "", "model file (.tflite) or .task bundle")
	f.StringVar(&r.backend, "backend", "auto", "backend: "+strings.Join(backends.Names, "|"))
	f.IntVar(&r.maxCache, "max-cache", 0, fmt.Sprintf("KV cache length in tokens (default %d, or the model's context length if shorter)", pipeline.DefaultMaxCache))
	f.StringVar(&r.activations, "activations", "", "activation precision policy, auto|f32|f16 (default: the model file's); "+
		"it sets the KV cache type, auto meaning f16 on GPU backends and f32 on the CPU")
	f.BoolVar(&r.noFusion, "no-fusion", false, "run the graphs unfused, one op per kernel (for comparison)")
	f.BoolVar(&r.hostSample, "host-sampling", false, "greedy decoding on a GPU reads back every logit and picks on the host, "+
		"rather than only the token id picked on the device (for comparison)")
	f.StringVar(&r.cpuMath, "cpu-math", pipeline.DefaultCPUMath.String(), "CPU backend arithmetic for int8/int4 weights: "+strings.Join(cpu.MathNames, "|")+
		" (dynamic quantizes activations to int8 blocks as llama.cpp does; exact is the reference)")
}

// load opens the backend and loads the model on it; close releases both.
// With synthetic set (bench --synthetic), the model is a random-weight
// checkpoint at the real shapes of that name instead of a file.
func (r *runFlags) load(cmd *cobra.Command) (m *pipeline.Model, backendName string, close func(), err error) {
	if r.model == "" && r.synthetic == "" {
		return nil, "", nil, fmt.Errorf("-m MODEL is required")
	}
	ctx := cmd.Context()
	var ck *model.Checkpoint
	if r.synthetic != "" {
		if ck, err = syntheticCheckpoint(r.synthetic, r.syntheticQuant); err != nil {
			return nil, "", nil, err
		}
	}
	math, err := cpu.ParseMath(r.cpuMath)
	if err != nil {
		return nil, "", nil, err
	}
	b, err := backends.OpenWith(ctx, r.backend, backends.Options{CPU: cpu.Options{Math: math}})
	if err != nil {
		return nil, "", nil, err
	}
	opts := pipeline.Options{Backend: b, CPUMath: math, MaxCache: r.maxCache, Activations: r.activations, NoFusion: r.noFusion, HostSampling: r.hostSample}
	start := time.Now()
	if ck != nil {
		m, err = pipeline.FromCheckpoint(ctx, ck, opts)
	} else {
		m, err = pipeline.Load(ctx, r.model, opts)
	}
	if err != nil {
		b.Close()
		return nil, "", nil, err
	}
	// Loading a large model (weight upload, kernel compilation) takes a
	// while on a GPU; say what was loaded and how long it took.
	info, cfg := b.Info(), m.Config()
	fmt.Fprintf(cmd.ErrOrStderr(), "loaded %s (%d layers, dim %d) on %s: %s, %s KV cache of %d positions, in %.2fs\n",
		cfg.Arch, cfg.Layers, cfg.Dim, info.Backend, info.Name, m.KVDType(), m.MaxCache(), time.Since(start).Seconds())
	return m, info.Backend, func() { m.Close(); b.Close() }, nil
}

func newRun() *cobra.Command {
	var (
		rf        runFlags
		prompt    string
		promptIDs string
		gen       pipeline.GenerateOptions
		asJSON    bool
		template  bool
	)
	cmd := &cobra.Command{
		Use:   "run -m MODEL [-p PROMPT | --prompt-ids 1,2,3]",
		Short: "Generate text from a prompt, streaming it to stdout; metrics go to stderr",
		Long: `Run loads a model and generates from a prompt. Text is streamed to stdout as it
is generated; time to first token and prefill/decode speeds go to stderr.
A text prompt gets BOS when the model's metadata says so; --prompt-ids are
used exactly as given. --temperature 0 means greedy decoding.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var p pipeline.Prompt
			switch {
			case promptIDs != "" && prompt != "":
				return fmt.Errorf("run: give -p or --prompt-ids, not both")
			case promptIDs != "":
				ids, err := parseIDList(promptIDs)
				if err != nil {
					return fmt.Errorf("run: --prompt-ids: %w", err)
				}
				p.IDs = ids
			case prompt != "":
				p.Text = prompt
			default:
				return fmt.Errorf("run: a prompt is required (-p TEXT or --prompt-ids IDS)")
			}
			gen.Template = template
			m, backendName, closeAll, err := rf.load(cmd)
			if err != nil {
				return err
			}
			defer closeAll()
			s := m.NewSession()
			out := cmd.OutOrStdout()
			var ids []int
			var text strings.Builder
			for tok, err := range s.Generate(cmd.Context(), p, gen) {
				if err != nil {
					return err
				}
				if tok.ID >= 0 {
					ids = append(ids, tok.ID)
				}
				text.WriteString(tok.Piece)
				io.WriteString(out, tok.Piece)
			}
			io.WriteString(out, "\n")
			met := s.Metrics()
			kvCache := m.KVDType().String()
			printMetrics(cmd.ErrOrStderr(), backendName+", kv "+kvCache, met)
			if asJSON {
				hist := s.History()
				res := runResult{
					PromptIDs:    hist[:len(hist)-len(ids)],
					GeneratedIDs: ids,
					Text:         text.String(),
					Backend:      backendName,
					KVCache:      kvCache,
					Seed:         gen.Seed,
					Metrics:      jsonMetrics(met),
				}
				if res.GeneratedIDs == nil {
					res.GeneratedIDs = []int{}
				}
				return json.NewEncoder(out).Encode(res)
			}
			return nil
		},
	}
	rf.register(cmd)
	f := cmd.Flags()
	f.StringVarP(&prompt, "prompt", "p", "", "prompt text")
	f.StringVar(&promptIDs, "prompt-ids", "", "prompt as comma-separated token ids, used as given (no BOS added)")
	f.IntVar(&gen.MaxTokens, "max-tokens", 256, "maximum tokens to generate")
	f.Float32Var(&gen.Temperature, "temperature", 0.8, "sampling temperature; 0 is greedy")
	f.IntVar(&gen.TopK, "top-k", 40, "sample from the k most likely tokens; 0 for no limit")
	f.Float32Var(&gen.TopP, "top-p", 1, "nucleus sampling threshold; 1 for no limit")
	f.Uint64Var(&gen.Seed, "seed", 0, "random seed (same seed, same text); 0 picks one and reports it")
	f.StringArrayVar(&gen.StopStrings, "stop", nil, "stop when the text contains this string (repeatable)")
	f.BoolVar(&template, "template", false, "wrap the prompt in the model's prompt prefix and suffix")
	f.BoolVar(&asJSON, "json", false, "print a JSON result object as the last line of stdout")
	cmd.PreRun = func(*cobra.Command, []string) {
		if gen.Seed == 0 {
			gen.Seed = uint64(time.Now().UnixNano())
		}
	}
	return cmd
}

type runResult struct {
	PromptIDs    []int       `json:"prompt_ids"`
	GeneratedIDs []int       `json:"generated_ids"`
	Text         string      `json:"text"`
	Backend      string      `json:"backend"`
	KVCache      string      `json:"kv_cache"` // the KV cache's storage type: f32 or f16
	Seed         uint64      `json:"seed"`
	Metrics      metricsJSON `json:"metrics"`
}

type metricsJSON struct {
	PromptTokens        int     `json:"prompt_tokens"`
	PrefillTokens       int     `json:"prefill_tokens"`
	GeneratedTokens     int     `json:"generated_tokens"`
	TimeToFirstTokenMS  float64 `json:"time_to_first_token_ms"`
	PrefillTokensPerSec float64 `json:"prefill_tokens_per_sec"`
	DecodeTokensPerSec  float64 `json:"decode_tokens_per_sec"`
	StopReason          string  `json:"stop_reason"`
}

func jsonMetrics(m pipeline.Metrics) metricsJSON {
	return metricsJSON{
		PromptTokens:        m.PromptTokens,
		PrefillTokens:       m.PrefillTokens,
		GeneratedTokens:     m.GeneratedTokens,
		TimeToFirstTokenMS:  float64(m.TimeToFirstToken.Microseconds()) / 1000,
		PrefillTokensPerSec: m.PrefillTokensPerSec,
		DecodeTokensPerSec:  m.DecodeTokensPerSec,
		StopReason:          m.StopReason,
	}
}

func printMetrics(w io.Writer, backend string, m pipeline.Metrics) {
	fmt.Fprintf(w, "[%s] prompt %d tokens, time to first token %.1f ms, prefill %.1f tok/s, decode %d tokens at %.1f tok/s (stop: %s)\n",
		backend, m.PromptTokens, float64(m.TimeToFirstToken.Microseconds())/1000, m.PrefillTokensPerSec,
		m.GeneratedTokens, m.DecodeTokensPerSec, m.StopReason)
}

func parseIDList(s string) ([]int, error) {
	var ids []int
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		id, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("bad id %q", f)
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("no ids")
	}
	return ids, nil
}
