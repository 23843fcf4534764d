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
