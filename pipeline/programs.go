package pipeline

import (
	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
)

// This file is the one place in package pipeline that asks a backend or a
// program for one of package gpu's optional interfaces (issue 38): each
// answer is read once, here, into a typed value the rest of the package
// uses, or asked through the functions at the end (gpu's helpers, which
// ask inside package gpu), so that folding the interfaces into gpu's main
// ones changes this file only.

// programs are the programs a slot compiled against its KV cache, one per
// way of stepping it that the slot uses; a generation's stepper (step.go)
// takes the ones it needs.
type programs struct {
	// decode runs one token and returns its logits: the host's picks,
	// and a batched round of one row.
	decode gpu.Program
	// prefill runs a prompt's chunks, ascending by size (feed).
	prefill []prefillProgram
	// argmax and sample pick the token on the device, by fusion.Argmax
	// or fusion.Sample; compiled at load where the device picks
	// (compilePickers), nil where the host does.
	argmax, sample *pickProgram
	// verify holds the speculative verifiers by tokens per step
	// (speculative.go), compiled on first use.
	verify map[int]gpu.Program
}

type prefillProgram struct {
	size int
	prog gpu.Program
}

// release releases every program.
func (ps *programs) release() {
	for _, p := range ps.prefill {
		p.prog.Release()
	}
	for _, p := range ps.verify {
		p.Release()
	}
	for _, p := range []gpu.Program{ps.decode, ps.argmax.program(), ps.sample.program()} {
		if p != nil {
			p.Release()
		}
	}
	*ps = programs{}
}

// pickProgram is a one-token decode program whose only output is the
// token id it picked (fusion.Argmax, or fusion.Sample with rule), with the
// abilities its backend gives it besides Run.
type pickProgram struct {
	prog gpu.Program
	rule fusion.Sampling // the rule it draws with; zero for argmax
	// steps runs several steps per submission; nil: one per Run.
	steps gpu.StepRunner
	// mask restricts the tokens it picks; nil: it takes no mask, and a
	// constrained generation picks on the host.
	mask gpu.TokenMasker
	// rules takes a new sampling rule without compiling again; nil: a new
	// rule compiles the graph again.
	rules gpu.SamplingSetter
}

// newPickProgram reads what p can do besides Run.
func newPickProgram(p gpu.Program, rule fusion.Sampling) *pickProgram {
	pp := &pickProgram{prog: p, rule: rule}
	if sr, ok := p.(gpu.StepRunner); ok {
		pp.steps = sr
	}
	if tm, ok := p.(gpu.TokenMasker); ok {
		pp.mask = tm
	}
	if ss, ok := p.(gpu.SamplingSetter); ok {
		pp.rules = ss
	}
	return pp
}

// program is p's program; nil for a nil p.
func (p *pickProgram) program() gpu.Program {
	if p == nil {
		return nil
	}
	return p.prog
}

// halfLoRA reports whether backend be wants the adapter matrices of
// quantized weights as binary16 (gpu.LoRAHalf).
func halfLoRA(be gpu.Backend) bool {
	q, ok := be.(gpu.LoRAHalf)
	return ok && q.HalfLoRA()
}

// profiler returns p's profiling run (gpu.Profiler), if it has one.
func profiler(p gpu.Program) (gpu.Profiler, bool) {
	pr, ok := p.(gpu.Profiler)
	return pr, ok
}

// fuse rewrites g into fewer kernels, those backend be runs fused where it
// says (gpu.FusionBackend).
func fuse(be gpu.Backend, w gpu.Weights, g *fusion.Graph) *fusion.Graph {
	return gpu.Fuse(be, w, g)
}

// compileBatch compiles batched graph g over the caches kvs; it wraps
// gpu.ErrUnsupported where be runs no batched graphs (gpu.BatchBackend).
func compileBatch(be gpu.Backend, g *fusion.Graph, w gpu.Weights, kvs []gpu.KVCache) (gpu.BatchProgram, error) {
	return gpu.CompileBatch(be, g, w, kvs)
}

// canCopyKV reports whether be copies KV cache rows (gpu.KVCopier), and
// copyKV copies the first n positions of src into dst.
func canCopyKV(be gpu.Backend) bool { return gpu.CanCopyKV(be) }

func copyKV(be gpu.Backend, dst, src gpu.KVCache, n int) error {
	return gpu.CopyKV(be, dst, src, n)
}
