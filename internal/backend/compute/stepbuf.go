package compute

import (
	"encoding/binary"

	"github.com/gpurun/gpurun/internal/sampler"
	"github.com/gpurun/gpurun/shaders"
)

// stepWords is what a run writes into the step buffer every kernel reads
// (binding step): Run, RunBatch and RunSteps fill one, and encodeStep
// alone lays it out, at the words shaders names (StepPos, StepRows,
// StepToken; a decode program's step tensor, shaders.DecodeStep).
type stepWords struct {
	Pos    uint32   // cache position of row 0 (a batched step's rows have their own)
	Rows   uint32   // rows to run: 0 for a no-op step, a batched step's rows up to the highest sequence used
	Tokens []uint32 // row t's token id, from StepToken
	// A batched step's row t position and adapter set (gpu.Row.Adapter),
	// from program.posAt and program.setAt; noRow for a row no sequence
	// uses.
	Positions, Sets []uint32
	// A decode program's submission of Steps steps (RunSteps) and its stop
	// ids; a plain Run has none.
	Steps uint32
	Stops []int32
}

// encodeStep returns the bytes of s as p's step buffer holds them: a
// decode program's step tensor header (shaders.DecodeStep without its
// ids, the program's sampling rule included) or the words of a prefill or
// batched step.
func (p *program) encodeStep(s stepWords) []byte {
	if stepTensor(p.g) {
		st := shaders.DecodeStep{Pos: s.Pos, Tokens: s.Rows, ValidLen: s.Pos, Steps: s.Steps, NStops: uint32(len(s.Stops))}
		if len(s.Tokens) > 0 {
			st.Token = s.Tokens[0]
		}
		for i, id := range s.Stops {
			st.Stops[i] = uint32(id)
		}
		if r := p.rule; r != nil {
			st.InvTemperature = sampler.InvTemperature(r.Temperature)
			st.TopK, st.TopP = uint32(r.TopK), r.TopP
			st.SeedLo, st.SeedHi = uint32(r.Seed), uint32(r.Seed>>32)
		}
		b, _ := binary.Append(nil, binary.LittleEndian, st) // a fixed-size struct: no error
		return b[:shaders.DecodeStepHeader]
	}
	n := shaders.StepToken + len(s.Tokens)
	if p.g.Batch {
		n = max(n, p.posAt+len(s.Positions), p.setAt+len(s.Sets))
	}
	words := make([]uint32, n)
	words[shaders.StepPos], words[shaders.StepRows] = s.Pos, s.Rows
	copy(words[shaders.StepToken:], s.Tokens)
	if p.g.Batch {
		copy(words[p.posAt:], s.Positions)
		copy(words[p.setAt:], s.Sets)
	}
	b, _ := binary.Append(nil, binary.LittleEndian, words) // a slice of fixed-size words: no error
	return b
}
