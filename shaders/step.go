package shaders

import (
	"fmt"
	"reflect"
	"strings"
	"unsafe"
)

// Limits of the step tensor (DecodeStep): the most decode steps one
// submission runs and the most stop ids the device checks.
const (
	MaxSteps = 64
	MaxStops = 8
)

// Words of the step buffer (binding step, array<u32>) every kernel reads:
// the host writes them for each run, a decode program's advance kernel
// updates them between steps (DecodeStep's first words). The WGSL
// constants STEP_POS, STEP_ROWS and STEP_TOKEN are generated from these
// (codesWGSL), and kernels index the buffer only through them.
const (
	StepPos   = 0 // cache position of row 0 (row t's is StepPos+t, unless a batched step's pos_at)
	StepRows  = 1 // rows to run: the step's tokens, 0 for a no-op step
	StepToken = 2 // token id of row 0; row t's at StepToken+t
)

// PosAtRow is the pos_at of a kernel whose rows are their own positions
// (row t at position t, whatever the step's StepPos): the private cache of
// a fusion.SelfAttnOp, which stores and attends to the step's rows alone.
// wgsl/lib/row_pos.wgsl declares it as POS_AT_ROW (TestPosAtRow).
const PosAtRow = 0xffffffff

// Words of a sampling rule in the step buffer, from the rule's first word
// (SampleParams.RuleAt, DecodeStepRuleAt in a decode program): the WGSL
// constants RULE_INV_TEMPERATURE ... RULE_SEED_HI.
const (
	RuleInvTemperature = iota
	RuleTopK
	RuleTopP
	RuleSeedLo
	RuleSeedHi
)

// stepWords is the table of the generated step-word constants.
var stepWords = []struct {
	name string
	word uint32
}{
	{"STEP_POS", StepPos}, {"STEP_ROWS", StepRows}, {"STEP_TOKEN", StepToken},
	{"RULE_INV_TEMPERATURE", RuleInvTemperature}, {"RULE_TOP_K", RuleTopK}, {"RULE_TOP_P", RuleTopP},
	{"RULE_SEED_LO", RuleSeedLo}, {"RULE_SEED_HI", RuleSeedHi},
	{"STEP_VALID_LEN", uint32(StepValidLen)}, {"STEP_DONE", uint32(StepDone)}, {"STEP_COUNT", uint32(StepCount)},
	{"STEP_STEPS", uint32(StepSteps)}, {"STEP_N_STOPS", uint32(StepNStops)}, {"STEP_STOPS", uint32(StepStops)}, {"STEP_IDS", uint32(StepIDs)},
	{"STEP_STOPPED", StepStopped}, {"STEP_LAST", StepLast}, {"MAX_STEPS", MaxSteps}, {"MAX_STOPS", MaxStops},
}

// Words of a DecodeStep past StepToken, for a picking kernel that advances
// the step itself (wgsl/lib/step_advance.wgsl, ArgmaxParams.Advance and
// SampleParams.Advance): the generated WGSL constants STEP_VALID_LEN ...
// STEP_IDS, taken from the struct's own layout.
const (
	StepValidLen = int(unsafe.Offsetof(DecodeStep{}.ValidLen) / 4)
	StepDone     = int(unsafe.Offsetof(DecodeStep{}.Done) / 4)
	StepCount    = int(unsafe.Offsetof(DecodeStep{}.Count) / 4)
	StepSteps    = int(unsafe.Offsetof(DecodeStep{}.Steps) / 4)
	StepNStops   = int(unsafe.Offsetof(DecodeStep{}.NStops) / 4)
	StepStops    = int(unsafe.Offsetof(DecodeStep{}.Stops) / 4)
	StepIDs      = int(unsafe.Offsetof(DecodeStep{}.IDs) / 4)
)

// AdvanceParams is the uniform block of wgsl/step.wgsl: the index of the
// step an advance dispatch ends.
type AdvanceParams struct {
	Index uint32 `wgsl:"index"`
	Pad0  uint32 `wgsl:"pad0"`
	Pad1  uint32 `wgsl:"pad1"`
	Pad2  uint32 `wgsl:"pad2"`
}

func (AdvanceParams) params() {}

// DecodeStep is the step tensor of a one-token decode program: the step
// buffer every kernel reads (words 0-2: position, rows, token id) grown by
// what a multi-step submission needs (wgsl/step.wgsl's struct DecodeStep,
// held to this one by CheckStepLayout). The host writes it when a
// submission starts; the advance kernel updates it on the device after
// every step; the host reads it back when the submission finished.
type DecodeStep struct {
	Pos      uint32 `wgsl:"pos"`       // position of Token
	Tokens   uint32 `wgsl:"tokens"`    // rows to run: 1, or 0 once Done
	Token    uint32 `wgsl:"token"`     // the token the next step runs
	ValidLen uint32 `wgsl:"valid_len"` // cache positions holding keys and values after the last step run
	Done     uint32 `wgsl:"done"`      // StepRunning, StepStopped or StepLast
	Count    uint32 `wgsl:"count"`     // ids picked in this submission
	Steps    uint32 `wgsl:"steps"`     // steps of this submission, 1..MaxSteps
	NStops   uint32 `wgsl:"n_stops"`   // stop ids in Stops, 0..MaxStops
	// The sampling rule of a program ending in fusion.Sample, read by the
	// sample kernel (SampleParams.RuleAt); its draw counter is Pos+Tokens.
	InvTemperature float32          `wgsl:"inv_temperature"`
	TopK           uint32           `wgsl:"top_k"`
	TopP           float32          `wgsl:"top_p"`
	SeedLo         uint32           `wgsl:"seed_lo"`
	SeedHi         uint32           `wgsl:"seed_hi"`
	Pad0           uint32           `wgsl:"pad0"`
	Pad1           uint32           `wgsl:"pad1"`
	Pad2           uint32           `wgsl:"pad2"`
	Stops          [MaxStops]uint32 `wgsl:"stops"`
	IDs            [MaxSteps]uint32 `wgsl:"ids"`
}

// DecodeStep.Done values.
const (
	StepRunning = 0 // every step so far advanced
	StepStopped = 1 // the last picked id is a stop id
	StepLast    = 2 // the submission's last step ran
)

// DecodeStepHeader is the byte size of DecodeStep without IDs: what the
// host writes when a submission starts.
const DecodeStepHeader = 4 * (16 + MaxStops)

// DecodeStepRuleAt is the word of DecodeStep.InvTemperature: the sample
// kernel's SampleParams.RuleAt in a decode program.
const DecodeStepRuleAt = 8

// CheckStepLayout checks wgsl/step.wgsl's struct DecodeStep against its Go
// twin, field by field (names, types, offsets), as CheckLayout does for
// the uniform blocks.
func CheckStepLayout() error {
	r := load()
	if r.err != nil {
		return r.err
	}
	f, ok := r.families["step"]
	if !ok {
		return fmt.Errorf("%w: family step", ErrUnknown)
	}
	return checkStepStruct(f.WGSL)
}

func checkStepStruct(src string) error {
	return checkBlock("step", src, "DecodeStep", reflect.TypeOf(DecodeStep{}))
}

// checkBlock holds WGSL struct name in src to its Go twin t field by field:
// names (wgsl tags), types and offsets. Fields are 4-byte scalars (u32,
// i32, f32) or arrays of them or of 4-vectors of them (array<u32, N>,
// array<vec4<f32>, N>), laid out without padding.
func checkBlock(family, src, name string, t reflect.Type) error {
	fields, err := structFields(src, name)
	if err != nil {
		return fmt.Errorf("shaders: %s: %w", family, err)
	}
	if t.NumField() != len(fields) {
		return fmt.Errorf("shaders: %s: Go %s has %d fields, WGSL %d", family, name, t.NumField(), len(fields))
	}
	off := uintptr(0)
	for i, wf := range fields {
		gf := t.Field(i)
		if tag := gf.Tag.Get("wgsl"); tag != wf[0] {
			return fmt.Errorf("shaders: %s: %s field %d: Go %s (wgsl %q), WGSL %s", family, name, i, gf.Name, tag, wf[0])
		}
		if got, want := strings.ReplaceAll(wf[1], " ", ""), wgslTypeOf(gf.Type); want == "" || got != want {
			return fmt.Errorf("shaders: %s: %s field %s: Go %s, WGSL %s", family, name, wf[0], gf.Type, wf[1])
		}
		if gf.Offset != off {
			return fmt.Errorf("shaders: %s: %s field %s at Go offset %d, WGSL %d", family, name, wf[0], gf.Offset, off)
		}
		off += gf.Type.Size()
	}
	return nil
}

// wgslTypeOf is the WGSL spelling (no spaces) of a Go field type, "" for
// one a block may not hold.
func wgslTypeOf(t reflect.Type) string {
	scalar := map[reflect.Kind]string{reflect.Uint32: "u32", reflect.Int32: "i32", reflect.Float32: "f32"}
	if s, ok := scalar[t.Kind()]; ok {
		return s
	}
	if t.Kind() != reflect.Array {
		return ""
	}
	e := t.Elem()
	if s, ok := scalar[e.Kind()]; ok {
		return fmt.Sprintf("array<%s,%d>", s, t.Len())
	}
	if e.Kind() == reflect.Array && e.Len() == 4 {
		if s, ok := scalar[e.Elem().Kind()]; ok {
			return fmt.Sprintf("array<vec4<%s>,%d>", s, t.Len())
		}
	}
	return ""
}
