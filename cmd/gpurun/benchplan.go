package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/gpurun/gpurun"
	"github.com/gpurun/gpurun/cmd/gpurun/internal/benchreport"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/modelfile"
	"github.com/gpurun/gpurun/internal/synthetic"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/tensors/model"
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

// parseTest reads one test name: ppN, tgN, ppN+tgM or mediapipe, the
// first three optionally at a depth, "@dD" (llama-bench's -d D): the
// context of D positions each run holds before its prompt.
func parseTest(name string) (benchreport.Test, error) {
	base, at, deep := strings.Cut(name, "@")
	depth := 0
	if deep {
		d, ok := strings.CutPrefix(at, "d")
		n, err := strconv.Atoi(d)
		switch {
		case !ok || d == "" || d[0] < '0' || d[0] > '9' || err != nil:
			return benchreport.Test{}, fmt.Errorf("bench: test %q: after @ want dD, a depth of D context positions (tg32@d4096)", name)
		case n < 1 || n > pipeline.MaxCacheLimit:
			return benchreport.Test{}, fmt.Errorf("bench: test %q: depth %d outside 1..%d (no @d for none)", name, n, pipeline.MaxCacheLimit)
		case base == benchreport.KindMediaPipe:
			return benchreport.Test{}, fmt.Errorf("bench: test %q: mediapipe's protocol has no depth (its 1024-token prompt is its context)", name)
		}
		depth = n
	}
	t, ok := parseBaseTest(base)
	if !ok {
		return t, fmt.Errorf("bench: unknown test %q (want ppN, tgN, ppN+tgM or mediapipe, N and M positive, the first three optionally at a depth of D positions: tg32@d4096)", name)
	}
	t.Name, t.Depth = name, depth
	return t, nil
}

// parseBaseTest reads a test name without a depth.
func parseBaseTest(name string) (benchreport.Test, bool) {
	count := func(s, prefix string) (int, bool) {
		v, ok := strings.CutPrefix(s, prefix)
		if !ok || v == "" || v[0] < '0' || v[0] > '9' {
			return 0, false
		}
		n, err := strconv.Atoi(v)
		return n, err == nil && n > 0 && n <= 1<<20
	}
	if name == benchreport.KindMediaPipe {
		return benchreport.Test{Name: name, Kind: benchreport.KindMediaPipe, PromptTokens: mediaPipePrompt,
			GenerateTokens: mediaPipeCache - mediaPipePrompt, MaxCache: mediaPipeCache}, true
	}
	if p, g, ok := strings.Cut(name, "+"); ok {
		np, ok1 := count(p, "pp")
		ng, ok2 := count(g, "tg")
		if ok1 && ok2 {
			return benchreport.Test{Name: name, Kind: benchreport.KindCombined, PromptTokens: np, GenerateTokens: ng}, true
		}
	} else if n, ok := count(name, "pp"); ok {
		return benchreport.Test{Name: name, Kind: benchreport.KindPrompt, PromptTokens: n, GenerateTokens: 1}, true
	} else if n, ok := count(name, "tg"); ok {
		return benchreport.Test{Name: name, Kind: benchreport.KindGenerate, PromptTokens: 1, GenerateTokens: n + 1}, true
	}
	return benchreport.Test{}, false
}

// testCache is the KV cache positions test t's runs take: its depth,
// prompt and generated tokens.
func testCache(t benchreport.Test) int { return t.Depth + t.PromptTokens + t.GenerateTokens }

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

// benchPlan is what a bench run measures, every name and value checked
// before anything is loaded.
type benchPlan struct {
	tests     []benchreport.Test
	sources   []benchSource
	backends  []string // the native backends, in the order given
	inBrowser bool     // --backend browser
	policies  []string // activation policies; "" is the model's own
	cpuMath   cpu.Math
	old       *benchreport.Report // --compare
}

// planBench checks bench's flags and reads what they name.
func planBench(flags *pflag.FlagSet, rf *benchModelFlags, bf *benchFlags) (*benchPlan, error) {
	p := &benchPlan{}
	if bf.reps < 1 || bf.warmup < 0 {
		return nil, fmt.Errorf("bench: --reps must be positive and --warmup not negative")
	}
	testList := bf.tests
	if testList == "" {
		if bf.promptLen < 1 || bf.genLen < 1 {
			return nil, fmt.Errorf("bench: --prompt-len and --generate must be positive")
		}
		testList = fmt.Sprintf("pp%d+tg%d", bf.promptLen, bf.genLen)
	} else if flags.Changed("prompt-len") || flags.Changed("generate") {
		return nil, fmt.Errorf("bench: give --tests or --prompt-len/--generate, not both")
	}
	var err error
	if p.tests, err = parseTests(testList); err != nil {
		return nil, err
	}
	if p.sources, err = benchSources(rf); err != nil {
		return nil, err
	}
	if err := bf.spec.check(); err != nil {
		return nil, err
	}
	backends := splitList(rf.backend)
	if len(backends) == 0 {
		return nil, fmt.Errorf("bench: --backend is empty")
	}
	p.inBrowser = slices.Contains(backends, browserBackend)
	p.backends = slices.DeleteFunc(backends, func(b string) bool { return b == browserBackend })
	for _, b := range p.backends {
		if !slices.Contains(gpurun.BackendNames, b) {
			return nil, fmt.Errorf("--backend %s: want one of %s", b, strings.Join(append(slices.Clone(gpurun.BackendNames), browserBackend), ", "))
		}
	}
	p.policies = splitList(rf.activations)
	for _, pol := range p.policies {
		if !slices.Contains([]string{model.PolicyAuto, model.PolicyF32, model.PolicyF16}, pol) {
			return nil, fmt.Errorf("--activations %s: want one of auto, f32, f16 (activation policy)", pol)
		}
	}
	if len(p.policies) == 0 {
		p.policies = []string{""} // the model's own
	}
	if err := p.checkDepths(flags, rf, bf); err != nil {
		return nil, err
	}
	if p.cpuMath, err = cpu.ParseMath(rf.cpuMath); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if bf.compare != "" {
		if p.old, err = readReport("--compare", bf.compare); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// openBackend opens the named native backend with the plan's CPU math.
func (p *benchPlan) openBackend(ctx context.Context, name string) (gpu.Backend, error) {
	return gpurun.OpenBackend(ctx, name, gpurun.BackendOptions{CPU: cpu.Options{Math: p.cpuMath}})
}

// checkDepths gives the tests at a depth their fill (--depth-fill) and
// refuses what cannot run them: a cache (--max-cache, or the default one)
// shorter than a test's depth, prompt and generated tokens, the browser,
// and --profile (which profiles steps at depth 0).
func (p *benchPlan) checkDepths(flags *pflag.FlagSet, rf *benchModelFlags, bf *benchFlags) error {
	fill := bf.depthFill
	if fill != benchreport.DepthPrefill && fill != benchreport.DepthRandom {
		return fmt.Errorf("--depth-fill %q: want %s or %s", fill, benchreport.DepthPrefill, benchreport.DepthRandom)
	}
	deep := false
	for i := range p.tests {
		t := &p.tests[i]
		if t.Depth == 0 {
			continue
		}
		deep = true
		t.DepthFill = fill
		need := testCache(*t)
		switch {
		case p.inBrowser:
			return fmt.Errorf("test %s: --backend browser runs no tests at a depth", t.Name)
		case bf.profile:
			return fmt.Errorf("test %s: --profile profiles steps at depth 0, not at a depth", t.Name)
		case fill == benchreport.DepthRandom && bf.spec.draft != "":
			return fmt.Errorf("test %s: --draft with --depth-fill random (the draft model would run the random depth's tokens as a prompt)", t.Name)
		case rf.maxCache > 0 && need > rf.maxCache:
			return fmt.Errorf("test %s needs a KV cache of %d positions (depth %d + prompt %d + generated %d), --max-cache is %d",
				t.Name, need, t.Depth, t.PromptTokens, t.GenerateTokens, rf.maxCache)
		case rf.maxCache == 0 && need > pipeline.DefaultMaxCache:
			return fmt.Errorf("test %s needs a KV cache of %d positions (depth %d + prompt %d + generated %d), the default cache holds %d: give --max-cache %d or more",
				t.Name, need, t.Depth, t.PromptTokens, t.GenerateTokens, pipeline.DefaultMaxCache, need)
		}
	}
	if !deep && flags.Changed("depth-fill") {
		return fmt.Errorf("--depth-fill without a test at a depth (@dD: tg32@d4096)")
	}
	return nil
}

// depthProtocol is the protocol's words on the plan's tests at a depth
// ("" for none).
func depthProtocol(p *benchPlan) string {
	for _, t := range p.tests {
		if t.Depth == 0 {
			continue
		}
		how := "the D tokens (random ids) run as a prompt"
		if t.DepthFill == benchreport.DepthRandom {
			how = "random keys and values written at the D positions in the cache's own format through the backend's store path (decode cost does not depend on the values)"
		}
		return "; T@dD: each run first holds a context of D positions, untimed (" + how + "), then runs test T after them"
	}
	return ""
}
