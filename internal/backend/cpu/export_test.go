package cpu

// ConvAblation names one of shortConv's deliberate mistakes (convAblation).
type ConvAblation int

const (
	ConvExact        ConvAblation = iota
	ConvForgetState               // the state not carried from one step to the next
	ConvShiftWindow               // the window off by one position
	ConvNoInputGate               // u = x rather than B⊙x
	ConvNoOutputGate              // the C gate dropped
)

// SetConvAblation makes every short convolution run with mistake a until
// the next call (ConvExact: none).
func SetConvAblation(a ConvAblation) {
	convAblation.forget = a == ConvForgetState
	convAblation.shift = a == ConvShiftWindow
	convAblation.noInputGate = a == ConvNoInputGate
	convAblation.noOutputGate = a == ConvNoOutputGate
}

// DeltaAblation names one of the Gated DeltaNet's or the gated
// attention's deliberate mistakes (deltaAblation, sigmoidGateAblation).
type DeltaAblation int

const (
	DeltaExact        DeltaAblation = iota
	DeltaForgetState                // the state (window and matrices) not carried from one step to the next
	DeltaShiftWindow                // the convolution window off by one position
	DeltaGroupedHeads               // value head h reads key head h / (V/K), not h mod K
	DeltaNoOutputGate               // the attention output gate dropped
)

// SetDeltaAblation makes every Gated DeltaNet and sigmoid gate run with
// mistake a until the next call (DeltaExact: none).
func SetDeltaAblation(a DeltaAblation) {
	deltaAblation.forget = a == DeltaForgetState
	deltaAblation.shift = a == DeltaShiftWindow
	deltaAblation.grouped = a == DeltaGroupedHeads
	sigmoidGateAblation = a == DeltaNoOutputGate
}

// SetDeltaChunk sets the chunk length of the chunked delta rule and
// returns the previous one.
func SetDeltaChunk(n int) int {
	old := deltaChunk
	deltaChunk = n
	return old
}

// SSMAblation names one of mamba2's deliberate mistakes (ssmAblation).
type SSMAblation int

const (
	SSMExact          SSMAblation = iota
	SSMForgetState                // the state not carried from one step to the next
	SSMForgetMatrices             // the state matrices not carried (the conv window is)
	SSMShiftWindow                // the convolution window off by one position
	SSMNoSkip                     // the D·x skip dropped
	SSMNoGate                     // the SiLU(z) gate dropped
)

// SetSSMAblation makes every Mamba-2 mixer run with mistake a until the
// next call (SSMExact: none).
func SetSSMAblation(a SSMAblation) {
	ssmAblation.forget = a == SSMForgetState
	ssmAblation.forgetMatrices = a == SSMForgetMatrices
	ssmAblation.shift = a == SSMShiftWindow
	ssmAblation.noSkip = a == SSMNoSkip
	ssmAblation.noGate = a == SSMNoGate
}

// SetKVRotationAblation makes the caches made from now on rotate queries
// and keys by H_n instead of llama.cpp's matrix, where they rotate them (0:
// llama.cpp's).
func SetKVRotationAblation(n int) { kvRotAblation = n }
