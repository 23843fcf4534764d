package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/gpurun/gpurun"
	"github.com/gpurun/gpurun/cmd/gpurun/internal/benchreport"
	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/synthetic"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/shaders"
	"github.com/gpurun/gpurun/tensors/model"
)

// gpurun bench, by job: bench.go has the command, its flags and the
// sweep over models and backends; benchplan.go checks the flags into a
// plan (tests, sources, backends, policies) before anything loads;
// benchconfig.go loads one configuration and runs its tests;
// benchbrowser.go runs them in gpurun-web's page; benchoutput.go writes,
// reads, compares and renders the reports.

// benchModelFlags are the model flags of run and chat (modelFlags), taking
// comma-separated lists where bench sweeps.
type benchModelFlags struct {
	model                     string   // models, comma-separated (positional arguments too)
	args                      []string // the positional arguments, for the report's command
	tokenizer                 string
	backend                   string // backends, comma-separated
	maxCache                  int
	activations               string // policies, comma-separated
	noFusion, hostSample      bool
	steps                     int
	synthetic, syntheticQuant string // comma-separated
	cpuMath                   string
	lora                      loraFlags
	cacheK, cacheV            string // --cache-type-k, --cache-type-v (as run's)
}

// benchFlags are bench's own flags; the model and backend flags are
// benchModelFlags, their values read as comma-separated lists.
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
	// depthFill is how tests at a depth (@dD) get their context:
	// benchreport.DepthPrefill or DepthRandom.
	depthFill string
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
  T@dD       test T (ppN, tgN, ppN+tgM) at depth D, as llama-bench's -d:
             each run first holds a context of D positions (untimed), and
             its prompt and decode steps run after them, attending to
             them (tg32@d4096: 32 decode steps at positions 4097..);
             --depth-fill prefill (the default) runs the D tokens as a
             prompt, random writes random keys and values in the cache's
             own format instead (decode cost does not depend on them;
             the report's depth_fill says which). The KV cache
             (--max-cache) must hold D + N + M positions.

Lists are comma-separated. Without --tests the test is pp<prompt-len>+tg<generate>.
Every test runs --warmup unreported and --reps measured generations, each a
fresh greedy generation on a prompt of random ids whose first token differs
from every other run's, so no run reuses another's KV cache; stop tokens are
ignored. The report gives the median and the range of each figure, with what
was measured on: devices, driver, CPU, Go version, gpurun revision, and per
configuration its memory: model bytes, KV cache type, bytes per position
and at the cache length, peak resident memory and device memory.

Output: Markdown tables on stdout (--json: the JSON report instead);
--from REPORT.json measures nothing and renders that report instead;
--report DIR also writes DIR/report.json, report.md and report.html (one
self-contained page with SVG charts); --compare OLD.json adds the ratio of
each figure to an earlier JSON report, flagged when beyond both runs' spread.
A configuration that fails (for example, weights that do not fit in memory)
is listed as not measured; bench fails only when nothing could be measured.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			rf.args = args
			if len(args) > 0 {
				rf.model = strings.Join(append(splitList(rf.model), args...), ",")
			}
			if err := resolveBenchModels(cmd, &rf); err != nil {
				return err
			}
			return runBench(cmd, &rf, &bf)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&rf.model, "model", "m", "", "models, comma-separated (or as arguments): model files, .task bundles, GGUF, llama2.c .bin, Hugging Face directories")
	f.StringVar(&rf.tokenizer, "tokenizer", "", "tokenizer for checkpoints that carry none")
	f.StringVar(&rf.backend, "backend", "auto", "backends, comma-separated: "+strings.Join(gpurun.BackendNames, "|")+"|browser (gpurun-web's page in headless Chromium, on its WebGPU adapter; run from the repository)")
	f.Var(&intFlag{&rf.maxCache, 1, pipeline.MaxCacheLimit, fmt.Sprintf("an integer in 1..%d", pipeline.MaxCacheLimit)},
		"max-cache", fmt.Sprintf("KV cache length in tokens (default %d, or the model's context length if shorter); it may exceed the model's context length, as llama-bench's does: bench measures speed", pipeline.DefaultMaxCache))
	f.StringVar(&rf.activations, "activations", "", "activation precision policies, comma-separated: auto|f32|f16 (default: the model's own); it sets the KV cache type and the activations' (see run -h)")
	rf.cpuMath = gpurun.DefaultCPUMath.String()
	f.Var(&choiceFlag{&rf.cpuMath, cpu.MathNames}, "cpu-math", "CPU backend arithmetic for quantized weights (int8/int4, K-quants): "+strings.Join(cpu.MathNames, "|")+" (as gpurun run)")
	rf.lora.register(f)
	rf.lora.registerUnmerged(f)
	f.Var(&choiceFlag{&rf.cacheK, fusion.KVTypeNames}, "cache-type-k", "KV cache type of the keys, as run's --cache-type-k (llama.cpp's -ctk); the report's kv_cache and kv bytes per position follow it")
	f.Var(&choiceFlag{&rf.cacheV, fusion.KVTypeNames}, "cache-type-v", "KV cache type of the values, as run's --cache-type-v (llama.cpp's -ctv)")
	f.Var(&choiceFlag{&rf.cacheK, fusion.KVTypeNames}, "ctk", "same as --cache-type-k")
	f.Var(&choiceFlag{&rf.cacheV, fusion.KVTypeNames}, "ctv", "same as --cache-type-v")
	f.BoolVar(&rf.noFusion, "no-fusion", false, "run the graphs unfused, one op per kernel (for comparison)")
	f.BoolVar(&rf.hostSample, "host-sampling", false, "decoding on a GPU (greedy or sampled) reads back every logit and picks on the host (for comparison)")
	rf.steps = pipeline.DefaultStepsPerSubmit
	f.Var(&intFlag{&rf.steps, 1, shaders.MaxSteps, fmt.Sprintf("an integer in 1..%d", shaders.MaxSteps)}, "steps-per-submit",
		"decode steps per GPU submission when the device picks the tokens (as gpurun run)")
	f.StringVar(&rf.synthetic, "synthetic", "", "random-weight models at real shapes, comma-separated: "+strings.Join(synthetic.Names(), "|"))
	f.StringVar(&rf.syntheticQuant, "synthetic-quant", synthetic.QuantInt4, "weights of the --synthetic models, comma-separated: "+strings.Join(syntheticQuants, "|"))
	f.StringVar(&bf.tests, "tests", "", "tests, comma-separated: ppN, tgN, ppN+tgM, mediapipe, the first three optionally at a depth of D context positions, @dD (tg32@d4096) (default pp<prompt-len>+tg<generate>)")
	bf.depthFill = benchreport.DepthPrefill
	f.StringVar(&bf.depthFill, "depth-fill", bf.depthFill, "how tests at a depth (@dD) get their D positions, untimed: prefill (run as a prompt) or random (random keys and values written in the cache's own format through the backend's store path: as many positions attended to, without a long prefill)")
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

func runBench(cmd *cobra.Command, rf *benchModelFlags, bf *benchFlags) error {
	ctx := cmd.Context()
	if bf.from != "" {
		return renderBench(cmd, bf)
	}
	plan, err := planBench(cmd.Flags(), rf, bf)
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
	if bf.reportDir != "" {
		if err := os.MkdirAll(bf.reportDir, 0o755); err != nil {
			return fmt.Errorf("bench: --report: %w", err)
		}
	}
	rep := &benchreport.Report{
		SchemaVersion: benchreport.SchemaVersion,
		Command:       commandLine(cmd, rf.args),
		Environment:   benchreport.HostEnvironment(),
		Protocol: benchreport.Protocol{Reps: bf.reps, Warmup: bf.warmup, Description: "each run is a fresh greedy generation " +
			"on a prompt of random token ids whose first token differs from every other run's (no KV cache reuse), stop tokens ignored; " +
			"tgN: a one-token prompt, then N decode steps; mediapipe: a 1024-token prompt in a 1280-token KV cache, 256 generated tokens" + depthProtocol(plan)},
	}
	opened, err := openBenchBackends(ctx, plan, rep)
	defer func() {
		for _, b := range opened {
			b.Close()
		}
	}()
	if err != nil {
		return err
	}
	if l, ok := benchreport.LoadAverage(); ok {
		rep.Environment.LoadAverage = []float64{l}
	}
	total := int64(len(plan.sources) * len(plan.backends) * len(plan.policies) * len(plan.tests) * (bf.warmup + bf.reps))
	if plan.inBrowser {
		total += int64(len(plan.sources) * len(plan.tests) * (bf.warmup + bf.reps))
	}
	sw := &benchSweep{plan: plan, rf: rf, bf: bf, rep: rep, log: cmd.ErrOrStderr(), bar: benchBar(cmd.ErrOrStderr(), total), processPeak: benchreport.PeakRSS()}
	if err := sw.native(ctx, opened); err != nil {
		return err
	}
	if plan.inBrowser {
		results, dev := benchBrowser(ctx, sw.log, sw.bar, rf, bf, plan.tests, plan.sources)
		rep.Results = append(rep.Results, results...)
		if dev != nil {
			rep.Environment.Devices = append(rep.Environment.Devices, *dev)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	sw.bar.Finish()
	rep.Incomplete = false
	if l, ok := benchreport.LoadAverage(); ok && len(rep.Environment.LoadAverage) == 1 {
		rep.Environment.LoadAverage = append(rep.Environment.LoadAverage, l)
	}
	rep.Environment.PeakRSSBytes = max(sw.processPeak, benchreport.PeakRSS())
	rep.Created = time.Now().UTC().Truncate(time.Second)
	if plan.old != nil {
		rep.Baseline = compareReports(cmd.ErrOrStderr(), plan.old, rep, bf.compare)
	}
	return emitReport(cmd, bf, rep)
}

// openBenchBackends opens every backend once, in the order given, and
// lists their devices in rep. The caller closes what it returns, also on
// an error.
func openBenchBackends(ctx context.Context, plan *benchPlan, rep *benchreport.Report) (map[string]gpu.Backend, error) {
	opened := map[string]gpu.Backend{}
	for _, name := range plan.backends {
		if _, ok := opened[name]; ok {
			continue
		}
		b, err := plan.openBackend(ctx, name)
		if err != nil {
			return opened, fmt.Errorf("bench: backend %s: %w", name, err)
		}
		opened[name] = b
		info := b.Info()
		if !slices.ContainsFunc(rep.Environment.Devices, func(d benchreport.Device) bool { return d.Backend == info.Backend }) {
			rep.Environment.Devices = append(rep.Environment.Devices, benchreport.Device{Backend: info.Backend, Name: info.Name, Type: string(info.Type), Driver: info.Driver})
		}
	}
	return opened, nil
}

// benchSweep measures a plan's native configurations into rep.
type benchSweep struct {
	plan        *benchPlan
	rf          *benchModelFlags
	bf          *benchFlags
	rep         *benchreport.Report
	log         io.Writer
	bar         *progressbar.ProgressBar
	processPeak int64
}

// native measures every model on every native backend. Sweep order:
// model, backend, weights, activations, so that a model's configurations
// on one backend stand together in the tables and charts. A synthetic
// checkpoint is built again for each backend rather than kept: only one
// set of weights is in memory at a time.
func (sw *benchSweep) native(ctx context.Context, opened map[string]gpu.Backend) error {
	sources := sw.plan.sources
	for g := 0; g < len(sources); {
		group := sources[g:]
		for i, src := range group {
			if src.name != sources[g].name || src.file != sources[g].file {
				group = group[:i]
				break
			}
		}
		g += len(group)
		for _, bname := range sw.plan.backends {
			for _, src := range group {
				if err := sw.source(ctx, src, bname, opened); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// source measures one model with one weight type on backend bname under
// every activation policy.
func (sw *benchSweep) source(ctx context.Context, src benchSource, bname string, opened map[string]gpu.Backend) error {
	defer debug.FreeOSMemory()
	var ck *model.Checkpoint
	var modelBytes int64
	var ckErr error
	if src.file != "" {
		if st, err := os.Stat(src.file); err == nil {
			modelBytes = st.Size()
		}
	} else {
		sw.bar.Describe(fmt.Sprintf("building %s %s", src.name, src.quant))
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
	b := opened[bname]
	for _, policy := range sw.plan.policies {
		var fresh func() (gpu.Backend, error)
		if sw.bf.coldLoad && !b.Caps().Host {
			fresh = func() (gpu.Backend, error) { return sw.plan.openBackend(ctx, bname) }
		}
		results := benchConfig(ctx, sw.log, sw.bar, sw.rf, sw.bf, sw.plan.tests, src, ck, ckErr, b, fresh, policy, modelBytes, &sw.processPeak)
		sw.rep.Results = append(sw.rep.Results, results...)
		if sw.bf.reportDir != "" {
			// An interrupted sweep leaves the report of what it measured.
			sw.rep.Environment.PeakRSSBytes = max(sw.processPeak, benchreport.PeakRSS())
			sw.rep.Created = time.Now().UTC().Truncate(time.Second)
			sw.rep.Incomplete = true
			if err := writeReport(sw.bf.reportDir, sw.rep); err != nil {
				return err
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}
