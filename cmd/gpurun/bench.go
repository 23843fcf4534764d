package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/gpurun/gpurun"
	"github.com/gpurun/gpurun/cmd/gpurun/internal/benchreport"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/gpu/backend/cpu"
	"github.com/gpurun/gpurun/gpu/vulkan"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/shaders"
	"github.com/gpurun/gpurun/tensors/model"
	"github.com/gpurun/gpurun/tensors/modelfile"
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

// MediaPipe's published LLM Inference protocol: a 1024-token prompt in a
// 1280-token cache, the remaining 256 positions generated.
const (
	mediaPipePrompt = 1024
	mediaPipeCache  = 1280
)

var syntheticQuants = []string{synthetic.QuantInt4, synthetic.QuantInt8, synthetic.QuantF16, synthetic.QuantF32}

// benchFlags are bench's own flags; the model and backend flags are
// benchModelFlags, their values read as comma-separated lists.
// benchModelFlags are the model flags of run and chat (modelFlags), taking
// comma-separated lists where bench sweeps.
type benchModelFlags struct {
	model                     string // models, comma-separated (positional arguments too)
	tokenizer                 string
	backend                   string // backends, comma-separated
	maxCache                  int
	activations               string // policies, comma-separated
	noFusion, hostSample      bool
	steps                     int
	synthetic, syntheticQuant string // comma-separated
	cpuMath                   string
	lora                      loraFlags
}

type benchFlags struct {
	tests                   string
	promptLen, genLen, reps int
	warmup, prefillChunk    int
	asJSON, profile         bool
	coldLoad                bool
	reportDir               string
	cpuProfile              string
	compare                 string
	from                    string
	// Speculative decoding (--lookup, --draft, --draft-tokens) and the
	// repetition of the prompts (--prompt-repeat) that gives lookup
	// something to find.
	spec         specFlags
	promptRepeat int
}

// benchSource is one model with one weight type.
type benchSource struct {
	name   string // shown as the model
	file   string // model file, or "" for synthetic
	spec   string // synthetic spec name
	quant  string // synthetic weights
	weight string // weights label
}

func newBench() *cobra.Command {
	var (
		rf benchModelFlags
		bf benchFlags
	)
	cmd := &cobra.Command{
		Use:   "bench (-m MODEL[,MODEL] | --synthetic NAME[,NAME]) [--backend B[,B]] [--activations P[,P]] [--tests T[,T]] [--reps R] [--report DIR] [--compare OLD.json]",
		Short: "Measure time to first token, prefill and decode tokens/s end to end, across models, backends and precisions",
		Long: `Bench measures every combination of the models (-m files and --synthetic
shapes, each synthetic shape with every --synthetic-quant weight type), the
backends and the activation policies, under every test:

  ppN        prompt processing: an N-token prompt, one token sampled
             (time to first token, prefill tokens/s)
  tgN        generation: a one-token prompt, then N decode steps (decode tokens/s)
  ppN+tgM    an N-token prompt, then M generated tokens (all three figures)
  mediapipe  MediaPipe's protocol: a 1024-token prompt in a 1280-token
             KV cache, 256 generated tokens (all three figures)

Lists are comma-separated. Without --tests the test is pp<prompt-len>+tg<generate>.
Every test runs --warmup unreported and --reps measured generations, each a
fresh greedy generation on a prompt of random ids whose first token differs
from every other run's, so no run reuses another's KV cache; stop tokens are
ignored. The report gives the median and the range of each figure, with what
was measured on: devices, driver, CPU, Go version, gpurun revision, model
bytes, peak resident memory per configuration.

Output: Markdown tables on stdout (--json: the JSON report instead);
--from REPORT.json measures nothing and renders that report instead;
--report DIR also writes DIR/report.json, report.md and report.html (one
self-contained page with SVG charts); --compare OLD.json adds the ratio of
each figure to an earlier JSON report, flagged when beyond both runs' spread.
A configuration that fails (for example, weights that do not fit in memory)
is listed as not measured; bench fails only when nothing could be measured.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				rf.model = strings.Join(append(splitList(rf.model), args...), ",")
			}
			return runBench(cmd, &rf, &bf)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&rf.model, "model", "m", "", "models, comma-separated (or as arguments): model files, .task bundles, GGUF, llama2.c .bin, Hugging Face directories")
	f.StringVar(&rf.tokenizer, "tokenizer", "", "tokenizer for checkpoints that carry none")
	f.StringVar(&rf.backend, "backend", "auto", "backends, comma-separated: "+strings.Join(gpurun.BackendNames, "|")+"|browser (gpurun-web's page in headless Chromium, on its WebGPU adapter; run from the repository)")
	f.Var(&intFlag{&rf.maxCache, 1, pipeline.MaxCacheLimit, fmt.Sprintf("an integer in 1..%d (and at most the model's context length)", pipeline.MaxCacheLimit)},
		"max-cache", fmt.Sprintf("KV cache length in tokens (default %d, or the model's context length if shorter)", pipeline.DefaultMaxCache))
	f.StringVar(&rf.activations, "activations", "", "activation precision policies, comma-separated: auto|f32|f16 (default: the model's own); it sets the KV cache type and the activations' (see run -h)")
	rf.cpuMath = gpurun.DefaultCPUMath.String()
	f.Var(&choiceFlag{&rf.cpuMath, cpu.MathNames}, "cpu-math", "CPU backend arithmetic for quantized weights (int8/int4, K-quants): "+strings.Join(cpu.MathNames, "|")+" (as gpurun run)")
	rf.lora.register(f)
	rf.lora.registerUnmerged(f)
	f.BoolVar(&rf.noFusion, "no-fusion", false, "run the graphs unfused, one op per kernel (for comparison)")
	f.BoolVar(&rf.hostSample, "host-sampling", false, "decoding on a GPU (greedy or sampled) reads back every logit and picks on the host (for comparison)")
	rf.steps = pipeline.DefaultStepsPerSubmit
	f.Var(&intFlag{&rf.steps, 1, shaders.MaxSteps, fmt.Sprintf("an integer in 1..%d", shaders.MaxSteps)}, "steps-per-submit",
		"decode steps per GPU submission when the device picks the tokens (as gpurun run)")
	f.StringVar(&rf.synthetic, "synthetic", "", "random-weight models at real shapes, comma-separated: "+strings.Join(synthetic.Names(), "|"))
	f.StringVar(&rf.syntheticQuant, "synthetic-quant", synthetic.QuantInt4, "weights of the --synthetic models, comma-separated: "+strings.Join(syntheticQuants, "|"))
	f.StringVar(&bf.tests, "tests", "", "tests, comma-separated: ppN, tgN, ppN+tgM, mediapipe (default pp<prompt-len>+tg<generate>)")
	bf.promptLen, bf.genLen, bf.reps, bf.warmup = 128, 64, 3, 1
	f.Var(&intFlag{&bf.promptLen, 1, pipeline.MaxCacheLimit, "an integer >= 1"}, "prompt-len", "prompt length of the default test")
	f.Var(&intFlag{&bf.genLen, 1, pipeline.MaxCacheLimit, "an integer >= 1"}, "generate", "tokens generated by the default test")
	f.Var(&intFlag{&bf.reps, 1, 1000, "an integer in 1..1000"}, "reps", "measured runs per test")
	f.Var(&intFlag{&bf.warmup, 0, 1000, "an integer in 0..1000"}, "warmup", "unreported runs before them")
	f.BoolVar(&bf.asJSON, "json", false, "print the JSON report instead of the Markdown tables")
	f.Var(&intFlag{&bf.prefillChunk, 1, pipeline.MaxCacheLimit, "an integer >= 1"}, "prefill-chunk",
		"largest prefill chunk (one submission each; default the largest of the prefill programs, 512): long prompts on a slow device in shorter submissions")
	f.BoolVar(&bf.profile, "profile", false, "after each test's runs, profile its prefill and/or decode step: device time, bytes, FLOPs per kernel (GPU backends with timestamps)")
	f.BoolVar(&bf.coldLoad, "cold-load", true, "GPU backends: load each configuration first on a fresh device with an empty pipeline cache (load_cold_seconds), then again on another fresh device with the cache that load left, which the tests run on (load_seconds); false: one load on the shared device")
	f.StringVar(&bf.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the whole run to this file (go tool pprof reads it): where the CPU backend's time goes")
	f.StringVar(&bf.reportDir, "report", "", "write report.json, report.md and report.html to this directory")
	f.StringVar(&bf.compare, "compare", "", "an earlier JSON report (bench --json or report.json) to compare with")
	f.StringVar(&bf.from, "from", "", "measure nothing: render this JSON report (with --compare, --report, --json)")
	bf.spec.register(cmd)
	f.Var(&intFlag{&bf.promptRepeat, 0, pipeline.MaxCacheLimit, "an integer >= 0"}, "prompt-repeat",
		"each prompt repeats its first N ids (a repetitive prompt, for --lookup); 0: random ids throughout")
	return cmd
}

// parseTests reads the --tests list.
func parseTests(list string) ([]benchreport.Test, error) {
	var out []benchreport.Test
	for _, name := range splitList(list) {
		t, err := parseTest(name)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(out, func(o benchreport.Test) bool { return o.Name == t.Name }) {
			return nil, fmt.Errorf("bench: test %s given twice", t.Name)
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bench: no tests")
	}
	return out, nil
}

func parseTest(name string) (benchreport.Test, error) {
	count := func(s, prefix string) (int, bool) {
		v, ok := strings.CutPrefix(s, prefix)
		if !ok {
			return 0, false
		}
		n, err := strconv.Atoi(v)
		return n, err == nil && n > 0 && n <= 1<<20
	}
	if name == benchreport.KindMediaPipe {
		return benchreport.Test{Name: name, Kind: benchreport.KindMediaPipe, PromptTokens: mediaPipePrompt,
			GenerateTokens: mediaPipeCache - mediaPipePrompt, MaxCache: mediaPipeCache}, nil
	}
	if p, g, ok := strings.Cut(name, "+"); ok {
		np, ok1 := count(p, "pp")
		ng, ok2 := count(g, "tg")
		if ok1 && ok2 {
			return benchreport.Test{Name: name, Kind: benchreport.KindCombined, PromptTokens: np, GenerateTokens: ng}, nil
		}
	} else if n, ok := count(name, "pp"); ok {
		return benchreport.Test{Name: name, Kind: benchreport.KindPrompt, PromptTokens: n, GenerateTokens: 1}, nil
	} else if n, ok := count(name, "tg"); ok {
		return benchreport.Test{Name: name, Kind: benchreport.KindGenerate, PromptTokens: 1, GenerateTokens: n + 1}, nil
	}
	return benchreport.Test{}, fmt.Errorf("bench: unknown test %q (want ppN, tgN, ppN+tgM or mediapipe, N and M positive)", name)
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// benchSources lists the model files, then every synthetic shape with every
// weight type, checking names before anything is loaded.
func benchSources(rf *benchModelFlags) ([]benchSource, error) {
	var out []benchSource
	for _, path := range splitList(rf.model) {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("bench: model %w", err)
		}
		weights := "as stored" // a checkpoint converted on loading
		if f, err := modelfile.Open(path); err == nil {
			most := int64(-1)
			for dt, n := range f.Summary().BytesByDType {
				if dt != "scales" && (n > most || n == most && dt < weights) {
					weights, most = dt, n
				}
			}
			f.Close()
		}
		name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
		out = append(out, benchSource{name: name, file: path, weight: weights})
	}
	quants := splitList(rf.syntheticQuant)
	for _, q := range quants {
		if !slices.Contains(syntheticQuants, q) {
			return nil, fmt.Errorf("--synthetic-quant %s: want one of %s", q, strings.Join(syntheticQuants, ", "))
		}
	}
	for _, name := range splitList(rf.synthetic) {
		if _, ok := synthetic.ByName(name); !ok {
			return nil, fmt.Errorf("--synthetic %s: want one of %s", name, strings.Join(synthetic.Names(), ", "))
		}
		if len(quants) == 0 {
			return nil, fmt.Errorf("bench: --synthetic-quant is empty")
		}
		for _, q := range quants {
			out = append(out, benchSource{name: name, spec: name, quant: q, weight: q})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bench: a model is required (-m MODEL or --synthetic NAME)")
	}
	return out, nil
}

func runBench(cmd *cobra.Command, rf *benchModelFlags, bf *benchFlags) error {
	ctx := cmd.Context()
	flags := cmd.Flags()
	if bf.from != "" {
		return renderBench(cmd, bf)
	}
	if bf.reps < 1 || bf.warmup < 0 {
		return fmt.Errorf("bench: --reps must be positive and --warmup not negative")
	}
	testList := bf.tests
	if testList == "" {
		if bf.promptLen < 1 || bf.genLen < 1 {
			return fmt.Errorf("bench: --prompt-len and --generate must be positive")
		}
		testList = fmt.Sprintf("pp%d+tg%d", bf.promptLen, bf.genLen)
	} else if flags.Changed("prompt-len") || flags.Changed("generate") {
		return fmt.Errorf("bench: give --tests or --prompt-len/--generate, not both")
	}
	tests, err := parseTests(testList)
	if err != nil {
		return err
	}
	if bf.cpuProfile != "" {
		stop, err := startCPUProfile(bf.cpuProfile)
		if err != nil {
			return fmt.Errorf("bench: --cpuprofile: %w", err)
		}
		defer func() {
			if err := stop(); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "bench: --cpuprofile: %v\n", err)
			}
		}()
	}
	sources, err := benchSources(rf)
	if err != nil {
		return err
	}
	backendNames := splitList(rf.backend)
	if len(backendNames) == 0 {
		return fmt.Errorf("bench: --backend is empty")
	}
	inBrowser := slices.Contains(backendNames, browserBackend)
	backendNames = slices.DeleteFunc(backendNames, func(b string) bool { return b == browserBackend })
	for _, b := range backendNames {
		if !slices.Contains(gpurun.BackendNames, b) {
			return fmt.Errorf("--backend %s: want one of %s", b, strings.Join(append(slices.Clone(gpurun.BackendNames), browserBackend), ", "))
		}
	}
	policies := splitList(rf.activations)
	for _, p := range policies {
		if !slices.Contains([]string{model.PolicyAuto, model.PolicyF32, model.PolicyF16}, p) {
			return fmt.Errorf("--activations %s: want one of auto, f32, f16 (activation policy)", p)
		}
	}
	if len(policies) == 0 {
		policies = []string{""} // the model's own
	}
	var old *benchreport.Report
	if bf.compare != "" {
		if old, err = readReport("--compare", bf.compare); err != nil {
			return err
		}
	}
	if bf.reportDir != "" {
		if err := os.MkdirAll(bf.reportDir, 0o755); err != nil {
			return fmt.Errorf("bench: --report: %w", err)
		}
	}

	rep := &benchreport.Report{
		SchemaVersion: benchreport.SchemaVersion,
		Command:       commandLine(cmd),
		Environment:   benchreport.HostEnvironment(),
		Protocol: benchreport.Protocol{Reps: bf.reps, Warmup: bf.warmup, Description: "each run is a fresh greedy generation " +
			"on a prompt of random token ids whose first token differs from every other run's (no KV cache reuse), stop tokens ignored; " +
			"tgN: a one-token prompt, then N decode steps; mediapipe: a 1024-token prompt in a 1280-token KV cache, 256 generated tokens"},
	}
	// Open every backend once, in the order given.
	opened := map[string]gpu.Backend{}
	defer func() {
		for _, b := range opened {
			b.Close()
		}
	}()
	math, err := cpu.ParseMath(rf.cpuMath)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	openBackend := func(name string) (gpu.Backend, error) {
		return gpurun.OpenBackend(ctx, name, gpurun.BackendOptions{CPU: cpu.Options{Math: math}})
	}
	for _, name := range backendNames {
		if _, ok := opened[name]; ok {
			continue
		}
		b, err := openBackend(name)
		if err != nil {
			return fmt.Errorf("bench: backend %s: %w", name, err)
		}
		opened[name] = b
		info := b.Info()
		if !slices.ContainsFunc(rep.Environment.Devices, func(d benchreport.Device) bool { return d.Backend == info.Backend }) {
			rep.Environment.Devices = append(rep.Environment.Devices, benchreport.Device{Backend: info.Backend, Name: info.Name, Type: string(info.Type), Driver: info.Driver})
		}
	}

	if l, ok := benchreport.LoadAverage(); ok {
		rep.Environment.LoadAverage = []float64{l}
	}
	total := int64(len(sources) * len(backendNames) * len(policies) * len(tests) * (bf.warmup + bf.reps))
	if inBrowser {
		total += int64(len(sources) * len(tests) * (bf.warmup + bf.reps))
	}
	bar := benchBar(cmd.ErrOrStderr(), total)
	processPeak := benchreport.PeakRSS()
	// Sweep order: model, backend, weights, activations, so that a
	// model's configurations on one backend stand together in the tables
	// and charts. A synthetic checkpoint is built again for each backend
	// rather than kept: only one set of weights is in memory at a time.
	for g := 0; g < len(sources); {
		group := sources[g:]
		for i, src := range group {
			if src.name != sources[g].name || src.file != sources[g].file {
				group = group[:i]
				break
			}
		}
		g += len(group)
		for _, bname := range backendNames {
			for _, src := range group {
				var ck *model.Checkpoint
				var modelBytes int64
				var ckErr error
				if src.file != "" {
					if st, err := os.Stat(src.file); err == nil {
						modelBytes = st.Size()
					}
				} else {
					bar.Describe(fmt.Sprintf("building %s %s", src.name, src.quant))
					ck, ckErr = syntheticCheckpoint(src.spec, src.quant)
					if ck != nil {
						for _, t := range ck.Tensors {
							modelBytes += int64(len(t.Data))
							if t.Scales != nil {
								modelBytes += int64(len(t.Scales.Data))
							}
						}
					}
				}
				for _, policy := range policies {
					var fresh func() (gpu.Backend, error)
					if bf.coldLoad && opened[bname].Info().Backend != "cpu" {
						fresh = func() (gpu.Backend, error) { return openBackend(bname) }
					}
					results := benchConfig(ctx, cmd.ErrOrStderr(), bar, rf, bf, tests, src, ck, ckErr, opened[bname], fresh, policy, modelBytes, &processPeak)
					rep.Results = append(rep.Results, results...)
					if bf.reportDir != "" {
						// An interrupted sweep leaves the report of what it measured.
						rep.Environment.PeakRSSBytes = max(processPeak, benchreport.PeakRSS())
						rep.Created = time.Now().UTC().Truncate(time.Second)
						rep.Incomplete = true
						if err := writeReport(bf.reportDir, rep); err != nil {
							return err
						}
					}
					if err := ctx.Err(); err != nil {
						return err
					}
				}
				debug.FreeOSMemory()
			}
		}
	}
	if inBrowser {
		results, dev := benchBrowser(ctx, cmd.ErrOrStderr(), bar, rf, bf, tests, sources)
		rep.Results = append(rep.Results, results...)
		if dev != nil {
			rep.Environment.Devices = append(rep.Environment.Devices, *dev)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	bar.Finish()
	rep.Incomplete = false
	if l, ok := benchreport.LoadAverage(); ok && len(rep.Environment.LoadAverage) == 1 {
		rep.Environment.LoadAverage = append(rep.Environment.LoadAverage, l)
	}
	rep.Environment.PeakRSSBytes = max(processPeak, benchreport.PeakRSS())
	rep.Created = time.Now().UTC().Truncate(time.Second)
	if old != nil {
		rep.Baseline = benchreport.Compare(old, rep, bf.compare)
	}

	return emitReport(cmd, bf, rep)
}

// emitReport writes the report's files (--report) and prints it, failing
// when it holds no measured result.
func emitReport(cmd *cobra.Command, bf *benchFlags, rep *benchreport.Report) error {
	measured := 0
	var firstErr string
	for _, r := range rep.Results {
		if r.Error == "" {
			measured++
		} else if firstErr == "" {
			firstErr = r.Error
		}
	}
	if bf.reportDir != "" {
		if err := writeReport(bf.reportDir, rep); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", filepath.Join(bf.reportDir, "report.html"))
	}
	out := cmd.OutOrStdout()
	if bf.asJSON {
		if err := rep.WriteJSON(out); err != nil {
			return err
		}
	} else if err := rep.WriteMarkdown(out); err != nil {
		return err
	}
	if measured == 0 {
		return fmt.Errorf("bench: nothing could be measured: %s", firstErr)
	}
	return nil
}

// readReport reads a JSON report file.
func readReport(flag, path string) (*benchreport.Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", flag, err)
	}
	defer f.Close()
	r, err := benchreport.ReadJSON(f)
	if err != nil {
		return nil, fmt.Errorf("bench: %s %s: %w", flag, path, err)
	}
	return r, nil
}

// renderBench is bench --from: an existing report rendered again (after a
// change of the renderers, or to compare two reports without measuring).
func renderBench(cmd *cobra.Command, bf *benchFlags) error {
	var measuring []string
	cmd.Flags().Visit(func(f *pflag.Flag) {
		switch f.Name {
		case "from", "compare", "report", "json":
		default:
			measuring = append(measuring, "--"+f.Name)
		}
	})
	if len(measuring) > 0 {
		return fmt.Errorf("bench: --from renders a report and measures nothing; %s do not apply", strings.Join(measuring, ", "))
	}
	rep, err := readReport("--from", bf.from)
	if err != nil {
		return err
	}
	rep.Baseline = nil
	if bf.compare != "" {
		old, err := readReport("--compare", bf.compare)
		if err != nil {
			return err
		}
		rep.Baseline = benchreport.Compare(old, rep, bf.compare)
	}
	if bf.reportDir != "" {
		if err := os.MkdirAll(bf.reportDir, 0o755); err != nil {
			return fmt.Errorf("bench: --report: %w", err)
		}
	}
	return emitReport(cmd, bf, rep)
}

// benchConfig loads one configuration and runs every test on it. A failure
// becomes the Error of the configuration's results, so the sweep goes on.
// With fresh (GPU backends, --cold-load), the configuration is loaded on a
// backend fresh opens with an empty pipeline cache directory (the cold
// load), which is closed, then on another with the cache it left (the warm
// load): the tests run on that one; otherwise on b.
func benchConfig(ctx context.Context, log io.Writer, bar *progressbar.ProgressBar, rf *benchModelFlags, bf *benchFlags, tests []benchreport.Test,
	src benchSource, ck *model.Checkpoint, ckErr error, b gpu.Backend, fresh func() (gpu.Backend, error), policy string, modelBytes int64, processPeak *int64) []benchreport.Result {
	info := b.Info()
	base := benchreport.Result{Model: src.name, Source: "synthetic", Weights: src.weight, Activations: policy,
		Backend: info.Backend, Device: info.Name, ModelBytes: modelBytes, Runs: []benchreport.Run{}}
	if src.file != "" {
		base.Source = src.file
	}
	if policy == "" {
		base.Activations = benchreport.PolicyModel
	}
	if ck != nil {
		base.Arch = ck.Config.Arch
	}
	runsPer := int64(bf.warmup + bf.reps)
	fail := func(err error) []benchreport.Result {
		fmt.Fprintf(log, "bench: %s on %s, activations: %s: %v\n", src.name+" "+src.weight, info.Backend, base.ActivationsText(), err)
		out := make([]benchreport.Result, len(tests))
		for i, t := range tests {
			out[i] = base
			out[i].Test = t
			out[i].Error = err.Error()
		}
		bar.Add64(runsPer * int64(len(tests)))
		return out
	}
	if ckErr != nil {
		return fail(ckErr)
	}
	*processPeak = max(*processPeak, benchreport.PeakRSS())
	benchreport.ResetPeakRSS()
	var coldSeconds float64
	if fresh != nil {
		dir, err := os.MkdirTemp("", "gpurun-bench-pcache-")
		if err != nil {
			return fail(err)
		}
		defer os.RemoveAll(dir)
		// The devices read the variable when they open: both see dir.
		prev, had := os.LookupEnv(vulkan.PipelineCacheEnv)
		os.Setenv(vulkan.PipelineCacheEnv, dir)
		defer func() {
			if had {
				os.Setenv(vulkan.PipelineCacheEnv, prev)
			} else {
				os.Unsetenv(vulkan.PipelineCacheEnv)
			}
		}()
		bar.Describe(fmt.Sprintf("cold load of %s %s on %s", src.name, src.weight, info.Backend))
		cold, err := fresh()
		if err != nil {
			return fail(err)
		}
		gm, secs, err := benchLoad(ctx, rf, bf, src, ck, cold, policy)
		if err == nil {
			coldSeconds = secs
			gm.Close()
		}
		if cerr := cold.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fail(err)
		}
		if b, err = fresh(); err != nil {
			return fail(err)
		}
		defer b.Close()
	}
	b.ResetPeakMemory()
	bar.Describe(fmt.Sprintf("loading %s %s on %s", src.name, src.weight, info.Backend))
	gm, loadSeconds, err := benchLoad(ctx, rf, bf, src, ck, b, policy)
	if err != nil {
		return fail(err)
	}
	m := gm.Pipeline()
	defer gm.Close()
	spec, err := benchSpeculation(ctx, rf, bf, b, policy, &base)
	if err != nil {
		return fail(err)
	}
	if spec != nil && spec.Draft != nil {
		defer spec.Draft.Close()
	}
	cfg := m.Config()
	base.Arch = cfg.Arch
	base.KVCache = m.KVDType().String()
	base.ActivationDType = m.ActivationDType().String()
	base.MaxCache = m.MaxCache()
	base.DecodeWeightBytes, base.KVBytesPerPosition = m.DecodeBytes()
	base.KVCacheBytes = m.KVCacheBytes()
	base.LoadSeconds = loadSeconds
	if fresh != nil {
		base.LoadColdSeconds = coldSeconds
		if st, ok := gpurun.PipelineCacheStats(b); ok {
			base.PipelineCacheBytes = int64(st.LoadedBytes)
			base.PipelineCacheHits = st.WarmPipelines
		}
	}
	var out []benchreport.Result
	run := 0 // every run's prompt starts with a different token
	for _, t := range tests {
		res := base
		res.Test = t
		bar.Describe(fmt.Sprintf("%s, %s", base.Label(), t.Name))
		done := 0 // runs finished, warm-up included
		err := func() error {
			if t.MaxCache != 0 && m.MaxCache() != t.MaxCache {
				return fmt.Errorf("%s needs a %d-token KV cache, the model was loaded with %d (--max-cache; the model's context may be shorter)", t.Name, t.MaxCache, m.MaxCache())
			}
			if t.PromptTokens+t.GenerateTokens > m.MaxCache() {
				return fmt.Errorf("%s: %d prompt + %d generated tokens exceed the KV cache of %d (raise --max-cache)", t.Name, t.PromptTokens, t.GenerateTokens, m.MaxCache())
			}
			for r := -bf.warmup; r < bf.reps; r++ {
				run++
				s := m.NewSession()
				p := pipeline.Prompt{IDs: repeatPrompt(benchPrompt(t.PromptTokens, cfg.VocabSize, run), bf.promptRepeat)}
				for _, err := range s.Generate(ctx, p, pipeline.GenerateOptions{MaxTokens: t.GenerateTokens, IgnoreStopTokens: true, Speculation: spec}) {
					if err != nil {
						return err
					}
				}
				bar.Add(1)
				done++
				met := s.Metrics()
				if met.PrefillTokens != t.PromptTokens || met.GeneratedTokens != t.GenerateTokens {
					return fmt.Errorf("run %d prefilled %d of %d prompt tokens and generated %d of %d", run, met.PrefillTokens, t.PromptTokens, met.GeneratedTokens, t.GenerateTokens)
				}
				if r >= 0 {
					res.Runs = append(res.Runs, benchreport.Run{
						PromptTokens: met.PromptTokens, GeneratedTokens: met.GeneratedTokens,
						TimeToFirstTokenMS:  float64(met.TimeToFirstToken.Microseconds()) / 1000,
						PrefillTokensPerSec: met.PrefillTokensPerSec, DecodeTokensPerSec: met.DecodeTokensPerSec,
						DraftTokens: met.DraftTokens, AcceptedTokens: met.AcceptedTokens, TargetSteps: met.TargetSteps,
					})
				}
			}
			if bf.profile {
				run++
				k, err := profileKernels(ctx, m, t, benchPrompt(t.PromptTokens, cfg.VocabSize, run))
				if err != nil {
					return err
				}
				res.Kernels = k
			}
			return nil
		}()
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return out
			}
			fmt.Fprintf(log, "bench: %s, %s: %v\n", base.Label(), t.Name, err)
			bar.Add64(runsPer - int64(done)) // the runs the failure skipped
			res.Runs = []benchreport.Run{}
			res.Error = err.Error()
		} else {
			res.Summarize()
		}
		out = append(out, res)
	}
	peak := benchreport.PeakRSS()
	devPeak := b.MemoryUse().Peak // zero on the CPU backend
	for i := range out {
		out[i].PeakRSSBytes = peak
		out[i].DeviceMemoryBytes = devPeak
	}
	*processPeak = max(*processPeak, peak)
	return out
}

// benchLoad loads src onto b with the model flags and returns it with the
// seconds the load took.
func benchLoad(ctx context.Context, rf *benchModelFlags, bf *benchFlags, src benchSource, ck *model.Checkpoint, b gpu.Backend, policy string) (*gpurun.Model, float64, error) {
	opts := []gpurun.Option{gpurun.WithGPUBackend(b), gpurun.WithMaxCache(rf.maxCache), gpurun.WithActivations(policy), gpurun.WithStepsPerSubmit(rf.steps)}
	if bf.prefillChunk > 0 {
		var sizes []int
		for _, s := range pipeline.DefaultPrefillSizes {
			if s < bf.prefillChunk {
				sizes = append(sizes, s)
			}
		}
		opts = append(opts, gpurun.WithPrefillSizes(append(sizes, bf.prefillChunk)...))
	}
	if rf.noFusion {
		opts = append(opts, gpurun.WithoutFusion())
	}
	if rf.hostSample {
		opts = append(opts, gpurun.WithHostSampling())
	}
	opts = append(opts, rf.lora.options()...)
	start := time.Now()
	var gm *gpurun.Model
	var err error
	if ck != nil {
		gm, err = gpurun.OpenCheckpoint(ctx, ck, opts...)
	} else {
		if rf.tokenizer != "" {
			opts = append(opts, gpurun.WithTokenizer(rf.tokenizer))
		}
		gm, err = gpurun.Open(ctx, src.file, opts...)
	}
	if err != nil {
		return nil, 0, err
	}
	return gm, time.Since(start).Seconds(), nil
}

// writeReport writes report.json, report.md and report.html into dir.
func writeReport(dir string, rep *benchreport.Report) error {
	for _, f := range []struct {
		name  string
		write func(io.Writer) error
	}{
		{"report.json", rep.WriteJSON},
		{"report.md", rep.WriteMarkdown},
		{"report.html", rep.WriteHTML},
	} {
		path := filepath.Join(dir, f.name)
		out, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		err = f.write(out)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("bench: writing %s: %w", path, err)
		}
	}
	return nil
}

// commandLine is the command as given: gpurun bench and every flag set.
func commandLine(cmd *cobra.Command) []string {
	out := []string{"gpurun", "bench"}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		out = append(out, "--"+f.Name+"="+f.Value.String())
	})
	return out
}

// benchBar is a progress bar over every run on w when w is a terminal,
// and silent otherwise.
func benchBar(w io.Writer, total int64) *progressbar.ProgressBar {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		w = io.Discard
	}
	return progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("bench"),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(24),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionOnCompletion(func() { _, _ = io.WriteString(w, "\n") }),
	)
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

// profileKernels profiles the steps test t measures (ppN: one prefill
// step of the prompt; tgN: one decode step; both for the combined tests)
// and sums each step's ops per kernel, named "<step> <kernel>" (with the
// variant; an op without kernels by its kind).
func profileKernels(ctx context.Context, m *pipeline.Model, t benchreport.Test, prompt []int) ([]benchreport.Kernel, error) {
	steps, err := m.Profile(ctx, prompt)
	if err != nil {
		return nil, err
	}
	var out []benchreport.Kernel
	for _, st := range steps {
		if st.Step == "prefill" && t.Kind == benchreport.KindGenerate || st.Step == "decode" && t.Kind == benchreport.KindPrompt {
			continue
		}
		at := map[string]int{}
		for _, op := range st.Ops {
			name := strings.Join(op.Kernels, "+")
			if name == "" {
				name = string(op.Kind)
			}
			name = st.Step + " " + name
			i, ok := at[name]
			if !ok {
				i = len(out)
				at[name] = i
				out = append(out, benchreport.Kernel{Name: name})
			}
			k := &out[i]
			k.Calls++
			k.TimeMS += float64(op.Nanos) / 1e6
			k.Bytes += op.Bytes
			k.Flops += op.FLOPs
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("profile: no step of %s profiled", t.Name)
	}
	return out, nil
}

// startCPUProfile starts a Go CPU profile written to path; stop ends it
// and closes the file.
func startCPUProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
