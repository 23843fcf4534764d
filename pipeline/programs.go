package pipeline

import (
	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
)

// This file is where package pipeline turns the backend's capabilities
// (gpu.Caps, read once into Model.caps) into what a slot's programs can do
// besides Run: a picking program's abilities are set here, once, from the
// caps, so the steppers test a field rather than ask the backend.

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
	// embed holds an embedding model's programs by tokens per step
	// (embed.go), compiled on first use.
	embed map[int]gpu.Program
	// image runs an image's positions (media.go), compiled on first use.
	image       gpu.Program
	imageTokens int // image's step size
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
	for _, p := range ps.embed {
		p.Release()
	}
	for _, p := range []gpu.Program{ps.decode, ps.argmax.program(), ps.sample.program(), ps.image} {
		if p != nil {
			p.Release()
		}
	}
	*ps = programs{}
}

// pickProgram is a one-token decode program whose only output is the
// token id it picked (fusion.Argmax, or fusion.Sample with rule), with the
// abilities its backend's capabilities give it besides Run.
type pickProgram struct {
	prog gpu.Program
	rule fusion.Sampling // the rule it draws with; zero for argmax
	// multiStep: prog runs several steps per submission (RunSteps;
	// gpu.Caps.MaxSteps above 1), else one per Run.
	multiStep bool
	// setsRule: a new sampling rule goes into prog's step tensor
	// (SetSampling; gpu.Caps.Sampling), else the graph compiles again.
	setsRule bool
	// maxStops is how many stop ids the device checks in a multi-step
	// submission (gpu.Caps.MaxStops).
	maxStops int
}

// newPickProgram sets what p can do besides Run from the backend's caps.
// Every picking program takes a token mask (gpu.Program.SetTokenMask).
func newPickProgram(p gpu.Program, rule fusion.Sampling, caps gpu.Caps) *pickProgram {
	return &pickProgram{prog: p, rule: rule, multiStep: caps.MaxSteps > 1, setsRule: caps.Sampling, maxStops: caps.MaxStops}
}

// program is p's program; nil for a nil p.
func (p *pickProgram) program() gpu.Program {
	if p == nil {
		return nil
	}
	return p.prog
}
