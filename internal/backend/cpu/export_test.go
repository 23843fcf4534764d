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
