package compute

import (
	"encoding/binary"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/shaders"
)

// TestStepsEncoded: encodeStep puts every field at the word the kernels
// read it from (shaders' step words, shaders.DecodeStep's layout, a
// batched program's posAt and setAt), for the three kinds of program.
func TestStepsEncoded(t *testing.T) {
	word := func(b []byte, i int) uint32 { return binary.LittleEndian.Uint32(b[4*i:]) }

	prefill := &program{g: &fusion.Graph{Tokens: 4}}
	b := prefill.encodeStep(stepWords{Pos: 7, Rows: 3, Tokens: []uint32{11, 12, 13}})
	if len(b) != 4*(shaders.StepToken+3) {
		t.Fatalf("prefill step of %d bytes, want %d", len(b), 4*(shaders.StepToken+3))
	}
	if word(b, shaders.StepPos) != 7 || word(b, shaders.StepRows) != 3 || word(b, shaders.StepToken) != 11 || word(b, shaders.StepToken+2) != 13 {
		t.Errorf("prefill step words %v", b)
	}

	const T = 3
	batch := &program{g: &fusion.Graph{Tokens: T, Batch: true}, posAt: shaders.StepToken + T, setAt: shaders.StepToken + 2*T}
	b = batch.encodeStep(stepWords{Rows: 2, Tokens: []uint32{5, 6, 0}, Positions: []uint32{9, 4, noRow}, Sets: []uint32{1, 0, noRow}})
	if len(b) != 4*(shaders.StepToken+3*T) {
		t.Fatalf("batched step of %d bytes, want %d", len(b), 4*(shaders.StepToken+3*T))
	}
	if word(b, shaders.StepRows) != 2 || word(b, shaders.StepToken+1) != 6 || word(b, batch.posAt) != 9 || word(b, batch.posAt+2) != noRow ||
		word(b, batch.setAt) != 1 || word(b, batch.setAt+2) != noRow {
		t.Errorf("batched step words %v", b)
	}

	rule := fusion.Sampling{Temperature: 0.5, TopK: 40, TopP: 0.9, Seed: 1<<32 | 3}
	decode := &program{g: &fusion.Graph{Tokens: 1}, rule: &rule}
	b = decode.encodeStep(stepWords{Pos: 20, Rows: 1, Tokens: []uint32{42}, Steps: 8, Stops: []int32{2, 0}})
	if len(b) != shaders.DecodeStepHeader {
		t.Fatalf("decode step of %d bytes, want the header's %d", len(b), shaders.DecodeStepHeader)
	}
	var st shaders.DecodeStep
	full := make([]byte, binary.Size(st))
	copy(full, b)
	if _, err := binary.Decode(full, binary.LittleEndian, &st); err != nil {
		t.Fatal(err)
	}
	want := shaders.DecodeStep{Pos: 20, Tokens: 1, Token: 42, ValidLen: 20, Steps: 8, NStops: 2, InvTemperature: 2, TopK: 40, TopP: 0.9, SeedLo: 3, SeedHi: 1}
	want.Stops[0] = 2
	if st != want {
		t.Errorf("decode step %+v, want %+v", st, want)
	}
	if word(b, shaders.StepPos) != 20 || word(b, shaders.StepRows) != 1 || word(b, shaders.StepToken) != 42 || word(b, shaders.DecodeStepRuleAt+shaders.RuleTopK) != 40 {
		t.Errorf("decode step words %v: not where the kernels read them", b)
	}
}
