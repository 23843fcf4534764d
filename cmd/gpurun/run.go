package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpurun/gpurun"
	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/constrain"
	"github.com/gpurun/gpurun/shaders"
	"github.com/gpurun/gpurun/tensors/model"
)

// modelFlags are the model-loading flags shared by run, chat and bench.
type modelFlags struct {
	model       string
	tokenizer   string
	backend     string
	device      string
	maxCache    int
	activations string
	noFusion    bool
	hostSample  bool
	steps       int
	cpuMath     string
	prefixMB    int // --prefix-cache-mb (chat and serve)
	lora        loraFlags
	mmproj      string   // --mmproj
	cacheK      string   // --cache-type-k (--ctk)
	cacheV      string   // --cache-type-v (--ctv)
	memLimit    sizeFlag // --memory-limit
}

// registerPrefixCache adds --prefix-cache-mb (chat and serve).
func (r *modelFlags) registerPrefixCache(cmd *cobra.Command) {
	r.prefixMB = pipeline.DefaultPrefixCacheBytes >> 20
	cmd.Flags().Var(&intFlag{&r.prefixMB, 0, 1 << 20, "an integer in 0..1048576"}, "prefix-cache-mb",
		"MiB of memory (device memory on a GPU) that keep the KV caches of earlier requests or turns, least recently used dropped first, "+
			"so that a prompt starting with kept tokens prefills only the rest; 0 keeps none")
}

func (r *modelFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	r.backend = "auto"
	f.StringVarP(&r.model, "model", "m", "", "model: a .tflite model file or .task bundle, a GGUF file, a llama2.c .bin, or a Hugging Face directory (or give it as the argument)")
	f.StringVar(&r.tokenizer, "tokenizer", "", "tokenizer (SentencePiece .model, tokenizer.json or llama2.c tokenizer.bin) for a checkpoint that carries none")
	f.Var(&choiceFlag{&r.backend, gpurun.BackendNames}, "backend", "backend: "+strings.Join(gpurun.BackendNames, "|"))
	f.StringVar(&r.device, "device", "", "device within --backend cpu|webgpu|vulkan: `DEVICE` is its index as gpurun devices lists them, or part of its name (default: the best)")
	f.Var(&intFlag{&r.maxCache, 1, pipeline.MaxCacheLimit, fmt.Sprintf("an integer in 1..%d (and at most the model's context length)", pipeline.MaxCacheLimit)},
		"max-cache", fmt.Sprintf("KV cache length in tokens, 1 up to the model's context length (default %d, or the model's context length if shorter)", pipeline.DefaultMaxCache))
	f.Var(&choiceFlag{&r.activations, []string{model.PolicyAuto, model.PolicyF32, model.PolicyF16}}, "activations",
		"activation precision policy, auto|f32|f16 (default: the model file's): f16 gives an f16 KV cache and f16 activations between kernels "+
			"(rounded to binary16 where stored; the residual stream and the logits stay f32; on any backend); auto gives an f16 cache on GPU backends "+
			"and f16 activations where the device reports f16 support (gpurun devices) for models other than Falcon and Phi-2, f32 on the CPU")
	kvNames := strings.Join(fusion.KVTypeNames, "|")
	for _, c := range []struct {
		p            *string
		name, short  string
		what, rotate string
	}{{&r.cacheK, "cache-type-k", "ctk", "keys", "queries and keys"}, {&r.cacheV, "cache-type-v", "ctv", "values", "values"}} {
		usage := fmt.Sprintf("KV cache type of the %s as llama.cpp's -%s: %s (default: the float cache --activations decides, f16 on GPU backends, f32 on the CPU; "+
			"f16 and f32 must agree with it); the q types are llama.cpp's blocks of 32, %s rotated by a Walsh-Hadamard transform where the head dim is a multiple of 64 "+
			"as llama.cpp does", c.what, c.short, kvNames, c.rotate)
		f.Var(&choiceFlag{c.p, fusion.KVTypeNames}, c.name, usage)
		f.Var(&choiceFlag{c.p, fusion.KVTypeNames}, c.short, "same as --"+c.name)
	}
	f.BoolVar(&r.noFusion, "no-fusion", false, "run the graphs unfused, one op per kernel (for comparison)")
	f.BoolVar(&r.hostSample, "host-sampling", false, "decoding on a GPU (greedy or sampled) reads back every logit and picks on the host, "+
		"rather than only the token id picked on the device (for comparison)")
	r.steps = pipeline.DefaultStepsPerSubmit
	f.Var(&intFlag{&r.steps, 1, shaders.MaxSteps, fmt.Sprintf("an integer in 1..%d", shaders.MaxSteps)}, "steps-per-submit",
		"decode steps per GPU submission when the device picks the tokens (the ids are still streamed one by one)")
	r.cpuMath = gpurun.DefaultCPUMath.String()
	f.Var(&choiceFlag{&r.cpuMath, cpu.MathNames}, "cpu-math", "CPU backend arithmetic for quantized weights (int8/int4, K-quants): "+strings.Join(cpu.MathNames, "|")+
		" (dynamic quantizes activations to int8 blocks as llama.cpp does; exact is the reference)")
	r.lora.register(f)
	r.lora.registerUnmerged(f)
	f.Var(&r.memLimit, "memory-limit", "refuse to load when the weights, KV caches (--max-cache, one per --parallel slot) and activations need more than this memory "+
		"(2GiB, 512MiB, bytes), saying what they need: the memory a deployment gives the model, below the device's own (which is always checked); gpurun inspect gives the largest context per cache type")
	f.StringVar(&r.mmproj, "mmproj", "", "vision or audio projector (llama.cpp's mmproj GGUF, projector type gemma3, lfm2 or qwen2a) that lets prompts carry images (--image) or audio (--audio)")
}

// takeModelArg accepts the model as the optional positional argument; a
// hub reference (hf.co/ORG/REPO[:QUANT]) is pulled and becomes its file.
func (r *modelFlags) takeModelArg(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) == 0 && r.model == "":
		return errors.New("a model is required (gpurun COMMAND MODEL or -m MODEL)")
	case len(args) == 1 && r.model != "" && r.model != args[0]:
		return fmt.Errorf("two models given: %s and -m %s", args[0], r.model)
	case len(args) == 1:
		r.model = args[0]
	}
	path, err := resolveModel(cmd.Context(), cmd, r.model)
	if err != nil {
		return err
	}
	r.model = path
	if _, err := os.Stat(r.model); err != nil {
		return fmt.Errorf("model %w", err)
	}
	if r.device != "" && r.backend == "auto" {
		return fmt.Errorf("--device %s: name the backend too (--backend cpu, webgpu or vulkan)", r.device)
	}
	return nil
}

func (r *modelFlags) options(cmd *cobra.Command) []gpurun.Option {
	opts := []gpurun.Option{gpurun.WithBackend(r.backend), gpurun.WithDevice(r.device), gpurun.WithMaxCache(r.maxCache), gpurun.WithActivations(r.activations),
		gpurun.WithCPUMath(r.cpuMath), gpurun.WithStepsPerSubmit(r.steps)}
	if r.cacheK != "" || r.cacheV != "" {
		opts = append(opts, gpurun.WithCacheTypes(r.cacheK, r.cacheV))
	}
	if r.tokenizer != "" {
		opts = append(opts, gpurun.WithTokenizer(r.tokenizer))
	}
	if r.noFusion {
		opts = append(opts, gpurun.WithoutFusion())
	}
	if r.hostSample {
		opts = append(opts, gpurun.WithHostSampling())
	}
	if r.prefixMB > 0 {
		opts = append(opts, gpurun.WithPrefixCache(int64(r.prefixMB)<<20))
	}
	if r.mmproj != "" {
		opts = append(opts, gpurun.WithMMProj(r.mmproj))
	}
	if r.memLimit.n > 0 {
		opts = append(opts, gpurun.WithMemoryLimit(r.memLimit.n))
	}
	opts = append(opts, r.lora.options()...)
	return append(opts, gpurun.WithProgress(stageSpinner(cmd.ErrOrStderr())))
}

// open loads the model and says on stderr what was loaded, where, and how
// long it took (a large model's weight upload and kernel compilation take
// a while on a GPU).
func (r *modelFlags) open(cmd *cobra.Command) (*gpurun.Model, error) {
	start := time.Now()
	m, err := loadModel(func() (*gpurun.Model, error) { return gpurun.Open(cmd.Context(), r.model, r.options(cmd)...) })
	if err != nil {
		return nil, pathError("load", r.model, err)
	}
	printLoaded(cmd.ErrOrStderr(), m.Pipeline(), m.Format(), time.Since(start))
	return m, nil
}

// pathError is err from loading the file at path, prefixed with what
// (such as "load") and the path, unless err names the path already (the
// readers' errors do: "load X: X: gguf: ..." would say it twice).
func pathError(what, path string, err error) error {
	if strings.Contains(err.Error(), path) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s %s: %w", what, path, err)
}

func printLoaded(w io.Writer, m *pipeline.Model, format string, took time.Duration) {
	info, cfg := m.BackendInfo(), m.Config()
	from := ""
	if format != "" {
		from = " from " + format
	}
	fmt.Fprintf(w, "loaded %s (%d layers, dim %d)%s on %s: %s, %s KV cache of %d positions (%.1f MiB), %s activations, in %.2fs (compiling %.2fs)\n",
		cfg.Arch, cfg.Layers, cfg.Dim, from, info.Backend, info.Name, m.KVCacheTypes(), m.MaxCache(), float64(m.KVCacheBytes())/(1<<20), m.ActivationDType(), took.Seconds(), m.CompileTime().Seconds())
}

// genFlags are the sampling flags of run and chat, in the command line's
// conventions: --max-tokens -1 for no limit, --temperature 0 for greedy,
// --top-k 0 for no limit.
type genFlags struct {
	maxTokens   int
	temperature float32
	topK        int
	topP        float32
	seed        uint64
	stops       []string
	jsonSchema  string // --json-schema FILE
}

func (g *genFlags) register(cmd *cobra.Command, maxTokensHelp string) {
	f := cmd.Flags()
	g.maxTokens, g.temperature, g.topK, g.topP = gpurun.DefaultMaxTokens, gpurun.DefaultTemperature, gpurun.DefaultTopK, gpurun.DefaultTopP
	f.Var(&intFlag{&g.maxTokens, -1, math.MaxInt32, "an integer >= 0, or -1 for no limit"}, "max-tokens", maxTokensHelp)
	f.Var(&floatFlag{&g.temperature, func(v float64) bool { return v >= 0 }, "a number >= 0 (0 is greedy)"}, "temperature", "sampling temperature; 0 is greedy (--temp, llama.cpp's spelling, is the same flag)")
	f.SetNormalizeFunc(flagAliases)
	f.Var(&intFlag{&g.topK, 0, math.MaxInt32, "an integer >= 0 (0 for no limit)"}, "top-k", "sample from the k most likely tokens; 0 for no limit")
	f.Var(&floatFlag{&g.topP, func(v float64) bool { return v > 0 && v <= 1 }, "a number in (0, 1] (1 for no limit)"}, "top-p", "nucleus sampling threshold in (0, 1]; 1 for no limit")
	f.Var(&seedFlag{&g.seed}, "seed", "random seed (same seed, same text); 0 or -1 picks one, which is reported on stderr")
	f.StringArrayVar(&g.stops, "stop", nil, "stop when the text contains this string (repeatable)")
	f.StringVar(&g.jsonSchema, "json-schema", "", `constrain the output to JSON valid against the JSON schema in FILE (a subset: see package pipeline/constrain), or "object" for any JSON object`)
}

// flagAliases maps llama.cpp's spellings of the sampling flags to ours:
// --temp is --temperature.
func flagAliases(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	if name == "temp" {
		name = "temperature"
	}
	return pflag.NormalizedName(name)
}

// resolve is options() with the grammar of --json-schema.
func (g *genFlags) resolve() (pipeline.GenerateOptions, error) {
	o := g.options()
	switch g.jsonSchema {
	case "":
	case "object":
		o.Grammar = constrain.JSONObject()
	default:
		data, err := os.ReadFile(g.jsonSchema)
		if err != nil {
			return pipeline.GenerateOptions{}, fmt.Errorf("--json-schema: %w", err)
		}
		if o.Grammar, err = constrain.Compile(data); err != nil {
			return pipeline.GenerateOptions{}, fmt.Errorf("--json-schema %s: %w", g.jsonSchema, err)
		}
	}
	return o, nil
}

// options turns the flags into the library's options: --max-tokens -1
// (no limit) is MaxTokens 0, --top-k 0 (no limit) is TopK 0, --temperature
// 0 is greedy, and a --seed of 0 or -1 becomes a random seed (reported
// with the run's metrics). MaxTokens 0 from --max-tokens 0 (generate
// nothing) is the caller's to handle.
func (g *genFlags) options() gpurun.GenerateOptions {
	o := gpurun.GenerateOptions{MaxTokens: max(g.maxTokens, 0), Temperature: g.temperature, TopK: g.topK, TopP: g.topP, Seed: g.seed, StopStrings: g.stops}
	for o.Seed == 0 {
		o.Seed = rand.Uint64()
	}
	return o
}

// promptFlags are run's prompt sources: -p TEXT (- for stdin), -f FILE,
// --prompt-ids.
type promptFlags struct {
	text, file, ids string
	images          []string // --image, in order
	audio           []string // --audio, in order
}

func (p *promptFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVarP(&p.text, "prompt", "p", "", `prompt text ("-" reads it from standard input; "" is allowed)`)
	f.StringVarP(&p.file, "file", "f", "", "read the prompt text from FILE (one trailing newline is dropped)")
	f.StringVar(&p.ids, "prompt-ids", "", "prompt as comma-separated token ids, used as given (no BOS added)")
	f.StringArrayVar(&p.images, "image", nil, "image file (PNG, JPEG, GIF, WebP) for the next "+pipeline.MediaMarker+" marker of the prompt text (repeatable; needs --mmproj)")
	f.StringArrayVar(&p.audio, "audio", nil, "WAV file (8/16/24/32-bit PCM or float, mono or stereo, resampled to 16 kHz) for the next "+pipeline.MediaMarker+" marker of the prompt text (repeatable; needs an audio --mmproj)")
}

// read returns the prompt the flags give, with its --image files.
func (p *promptFlags) read(cmd *cobra.Command) (pipeline.Prompt, error) {
	pr, err := p.readText(cmd)
	if err != nil || len(p.images)+len(p.audio) == 0 {
		return pr, err
	}
	for _, path := range p.audio {
		data, err := os.ReadFile(path)
		if err != nil {
			return pipeline.Prompt{}, fmt.Errorf("--audio: %w", err)
		}
		pr.Audio = append(pr.Audio, data)
	}
	for _, path := range p.images {
		data, err := os.ReadFile(path)
		if err != nil {
			return pipeline.Prompt{}, fmt.Errorf("--image: %w", err)
		}
		pr.Images = append(pr.Images, data)
	}
	return pr, nil
}

func (p *promptFlags) readText(cmd *cobra.Command) (pipeline.Prompt, error) {
	fs := cmd.Flags()
	var given []string
	for _, name := range []string{"prompt", "file", "prompt-ids"} {
		if fs.Changed(name) {
			given = append(given, "--"+name)
		}
	}
	switch {
	case len(given) == 0:
		return pipeline.Prompt{}, errors.New("a prompt is required (-p TEXT, -p - for standard input, -f FILE, or --prompt-ids IDS)")
	case len(given) > 1:
		return pipeline.Prompt{}, fmt.Errorf("give one prompt, not %s", strings.Join(given, " and "))
	case fs.Changed("prompt-ids"):
		ids, err := parseIDList(p.ids)
		if err != nil {
			return pipeline.Prompt{}, fmt.Errorf("--prompt-ids: %w", err)
		}
		return pipeline.Prompt{IDs: ids}, nil
	case fs.Changed("file"):
		data, err := os.ReadFile(p.file)
		if err != nil {
			return pipeline.Prompt{}, fmt.Errorf("prompt file: %w", err)
		}
		return pipeline.Prompt{Text: strings.TrimSuffix(string(data), "\n")}, nil
	case p.text == "-":
		data, err := io.ReadAll(cmd.InOrStdin())
		if err != nil {
			return pipeline.Prompt{}, fmt.Errorf("prompt from standard input: %w", err)
		}
		return pipeline.Prompt{Text: strings.TrimSuffix(string(data), "\n")}, nil
	}
	return pipeline.Prompt{Text: p.text}, nil
}

func newRun() *cobra.Command {
	var (
		mf     modelFlags
		gf     genFlags
		pf     promptFlags
		sf     specFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "run [MODEL] [-p PROMPT | -f FILE | --prompt-ids 1,2,3]",
		Short: "Generate text from a prompt, streaming it to stdout; metrics go to stderr",
		Long: `Run loads a model and generates from a prompt. Text is streamed to stdout as it
is generated, ending with a newline; the seed, time to first token and
prefill/decode speeds go to stderr. MODEL is a model file or .task bundle, or
a checkpoint (GGUF, llama2.c .bin with --tokenizer, Hugging Face directory),
imported in memory on the way (converting first only saves that time).

A text prompt gets BOS when the model's metadata says so; --prompt-ids are
used exactly as given. --temperature 0 means greedy decoding. --max-tokens 0
generates nothing, -1 generates until a stop token or a full cache. On an
interrupt (Ctrl-C) the text so far, the metrics and the --json result (with
stop_reason "cancelled") are still printed.`,
		Args: nArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := mf.takeModelArg(cmd, args); err != nil {
				return err
			}
			if err := sf.check(); err != nil {
				return err
			}
			prompt, err := pf.read(cmd)
			if err != nil {
				return err
			}
			gen, err := gf.resolve()
			if err != nil {
				return err
			}
			m, err := mf.open(cmd)
			if err != nil {
				return err
			}
			defer closeModel(m.Close)
			if prompt.IDs == nil && !m.HasTokenizer() {
				return noTokenizer(m)
			}
			spec, closeDraft, err := sf.open(cmd, &mf, m, 1)
			if err != nil {
				return err
			}
			defer closeModel(func() error { closeDraft(); return nil })
			gen.Speculation = spec
			out := &checkedWriter{w: cmd.OutOrStdout()}
			res, runErr := runGeneration(func() (*runResult, error) {
				return generate(cmd.Context(), m, prompt, gen, gf.maxTokens == 0, out, cmd.ErrOrStderr())
			})
			if asJSON && res != nil {
				if err := json.NewEncoder(out).Encode(res); err != nil && out.err == nil {
					return fmt.Errorf("JSON result: %w", err)
				}
			}
			if out.err != nil {
				return fmt.Errorf("writing the output: %w", out.err)
			}
			return runErr
		},
	}
	mf.register(cmd)
	gf.register(cmd, "maximum tokens to generate; 0 generates nothing, -1 until a stop token or a full cache")
	pf.register(cmd)
	sf.register(cmd)
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print a JSON result object as the last line of stdout")
	return cmd
}

// noTokenizer is the error for a text prompt to a model without a usable
// tokenizer, saying why when that is known.
func noTokenizer(m *gpurun.Model) error {
	why := m.TokenizerProblem()
	if why == "" {
		why = "the model file carries no tokenizer (convert or bundle it with --tokenizer)"
	}
	return fmt.Errorf("text prompt: %s has no tokenizer: %s; --prompt-ids takes token ids", m.Path(), why)
}

// generate streams one generation to out and reports it on errOut; the
// result is nil when nothing was run because of an error before the
// generation started. With none, nothing is generated (--max-tokens 0).
func generate(ctx context.Context, m *gpurun.Model, prompt pipeline.Prompt, gen pipeline.GenerateOptions, none bool, out io.Writer, errOut io.Writer) (*runResult, error) {
	info := m.Backend()
	res := &runResult{Backend: info.Backend, KVCache: m.KVCacheTypes(), GeneratedIDs: []int{}}
	if gen.Temperature > 0 {
		res.Seed = gen.Seed
	}
	if none && len(prompt.Images)+len(prompt.Audio) > 0 {
		return nil, errors.New("--max-tokens 0 with --image or --audio: the prompt's media positions are known only once it runs")
	}
	if none {
		ids, err := promptIDs(m, prompt)
		if err != nil {
			return nil, err
		}
		res.PromptIDs = ids
		res.Metrics = metricsJSON{PromptTokens: len(ids), StopReason: string(pipeline.StopMaxTokens)}
		fmt.Fprintf(errOut, "[%s] prompt %d tokens, nothing generated (--max-tokens 0)\n", info.Backend, len(ids))
		return res, nil
	}
	s := m.Pipeline().NewSession()
	var text strings.Builder
	var genErr error
	delay := testDelay("GPURUN_TEST_STEP_DELAY")
	waitOrDone(ctx, testDelay("GPURUN_TEST_START_DELAY"))
	for tok, err := range s.Generate(ctx, prompt, gen) {
		if err != nil {
			genErr = err
			break
		}
		if tok.ID >= 0 {
			res.GeneratedIDs = append(res.GeneratedIDs, tok.ID)
		}
		text.WriteString(tok.Piece)
		io.WriteString(out, tok.Piece)
		if delay > 0 {
			waitOrDone(ctx, delay)
		}
	}
	met := s.Metrics()
	cancelled := errors.Is(genErr, context.Canceled)
	if genErr != nil && met.PromptTokens == 0 && !cancelled {
		return nil, fmt.Errorf("generate: %w", genErr) // nothing ran: a bad prompt or options
	}
	io.WriteString(out, "\n")
	res.PromptIDs = s.LastPrompt()
	if res.PromptIDs == nil {
		res.PromptIDs = []int{}
	}
	for i, id := range res.PromptIDs {
		if id < 0 {
			res.PromptIDs[i] = pipeline.MediaID // an image's position
		}
	}
	res.Text = text.String()
	res.Metrics = jsonMetrics(met)
	label := info.Backend + ", kv " + res.KVCache
	if gen.Temperature > 0 {
		label += fmt.Sprintf(", seed %d", gen.Seed)
	}
	printMetrics(errOut, label, met)
	printSpeculation(errOut, met)
	if cancelled {
		return res, fmt.Errorf("generation interrupted: %w", context.Canceled)
	}
	if genErr != nil {
		return res, fmt.Errorf("generate: %w", genErr)
	}
	return res, nil
}

// promptIDs tokenizes a prompt as a session would at the start of a
// conversation.
func promptIDs(m *gpurun.Model, p pipeline.Prompt) ([]int, error) {
	if p.IDs != nil {
		return p.IDs, nil
	}
	ids, err := m.Encode(p.Text)
	if err != nil {
		return nil, err
	}
	if cfg := m.Config(); cfg.AddBOS && cfg.BOS >= 0 {
		ids = append([]int{cfg.BOS}, ids...)
	}
	return ids, nil
}

// testDelay is a pause the tests that interrupt a generation set in the
// environment variable env (a Go duration), zero otherwise:
// GPURUN_TEST_STEP_DELAY after each streamed token, GPURUN_TEST_START_DELAY
// before the generation starts.
func testDelay(env string) time.Duration {
	d, _ := time.ParseDuration(os.Getenv(env))
	return d
}

// waitOrDone sleeps for d or until ctx is done.
func waitOrDone(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

// checkedWriter remembers the first write error (a full disk, a closed
// pipe) so the command can fail with it; later writes are dropped.
type checkedWriter struct {
	w   io.Writer
	err error
}

func (c *checkedWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	if err != nil {
		c.err = err
	}
	return n, err
}

type runResult struct {
	PromptIDs    []int       `json:"prompt_ids"` // an image's positions are -1 (pipeline.MediaID)
	GeneratedIDs []int       `json:"generated_ids"`
	Text         string      `json:"text"`
	Backend      string      `json:"backend"`
	KVCache      string      `json:"kv_cache"`       // the KV cache's storage type: f32 or f16
	Seed         uint64      `json:"seed,omitempty"` // the sampler's seed; absent for greedy decoding
	Metrics      metricsJSON `json:"metrics"`
}

type metricsJSON struct {
	PromptTokens    int `json:"prompt_tokens"`
	PrefillTokens   int `json:"prefill_tokens"`
	GeneratedTokens int `json:"generated_tokens"`
	// TimeToFirstTokenMS and PrefillTokensPerSec are absent when no token
	// was sampled (an interrupt during the prefill).
	TimeToFirstTokenMS  float64 `json:"time_to_first_token_ms,omitempty"`
	PrefillTokensPerSec float64 `json:"prefill_tokens_per_sec,omitempty"`
	// DecodeTokensPerSec is absent when no token was decoded after the
	// first (the first comes from the prefill).
	DecodeTokensPerSec float64 `json:"decode_tokens_per_sec,omitempty"`
	StopReason         string  `json:"stop_reason"`
	// Speculative decoding (--draft, --lookup): the tokens drafted, those
	// accepted, and the model's decode steps.
	DraftTokens    int `json:"draft_tokens,omitempty"`
	AcceptedTokens int `json:"accepted_tokens,omitempty"`
	TargetSteps    int `json:"target_steps,omitempty"`
}

func jsonMetrics(m pipeline.Metrics) metricsJSON {
	j := metricsJSON{
		PromptTokens:    m.PromptTokens,
		PrefillTokens:   m.PrefillTokens,
		GeneratedTokens: m.GeneratedTokens,
		StopReason:      string(m.StopReason),
		DraftTokens:     m.DraftTokens,
		AcceptedTokens:  m.AcceptedTokens,
		TargetSteps:     m.TargetSteps,
	}
	if m.TimeToFirstToken > 0 {
		j.TimeToFirstTokenMS = float64(m.TimeToFirstToken.Microseconds()) / 1000
		j.PrefillTokensPerSec = m.PrefillTokensPerSec
	}
	if m.DecodeSteps > 0 {
		j.DecodeTokensPerSec = m.DecodeTokensPerSec
	}
	return j
}

func printMetrics(w io.Writer, label string, m pipeline.Metrics) {
	if m.TimeToFirstToken == 0 {
		fmt.Fprintf(w, "[%s] prompt %d tokens, %d prefilled, no token generated (stop: %s)\n", label, m.PromptTokens, m.PrefillTokens, m.StopReason)
		return
	}
	decode := fmt.Sprintf("decode %d tokens at %.1f tok/s", m.GeneratedTokens, m.DecodeTokensPerSec)
	if m.DecodeSteps == 0 {
		decode = fmt.Sprintf("%d tokens generated, no decode step", m.GeneratedTokens)
	}
	fmt.Fprintf(w, "[%s] prompt %d tokens, time to first token %.1f ms, prefill %.1f tok/s, %s (stop: %s)\n",
		label, m.PromptTokens, float64(m.TimeToFirstToken.Microseconds())/1000, m.PrefillTokensPerSec, decode, m.StopReason)
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

// llamaCacheFlags rewrites llama.cpp's single-dash -ctk and -ctv (as in
// "-ctk q8_0" or "-ctk=q8_0") to --ctk and --ctv, which pflag would read
// as the shorthands -c -t -k; every other argument is left as it is,
// and nothing after "--".
func llamaCacheFlags(args []string) []string {
	out := make([]string, len(args))
	done := false
	for i, a := range args {
		out[i] = a
		if done || a == "--" {
			done = true
			continue
		}
		for _, f := range []string{"-ctk", "-ctv"} {
			if a == f || strings.HasPrefix(a, f+"=") {
				out[i] = "-" + a
			}
		}
	}
	return out
}
