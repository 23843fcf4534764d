package audio

import "math"

// resample converts mono samples from rateIn to rateOut Hz as miniaudio's
// decoder does for llama.cpp's mtmd-helper (ma_linear_resampler, its
// default low-pass order 4):
//
//   - the rates are divided by their greatest common divisor; a frame
//     timer starts at one whole input frame and advances by in/out per
//     output frame;
//   - each output frame interpolates linearly between the last two input
//     frames loaded, x0 + (x1-x0)*frac, in float32;
//   - a low-pass filter, two biquad sections (Butterworth Q 1/(2cos(pi/8))
//     and 1/(2cos(3pi/8)), cutoff min(in, out)/2, RBJ coefficients in
//     float64 normalized to float32, transposed direct form II in
//     float32), runs over each input frame as it is loaded when
//     downsampling, over each output frame when upsampling;
//   - the output stops when an output frame would need an input frame past
//     the end; its length is miniaudio's expected count
//     (ma_calculate_frame_count_after_resampling), zeros after what was
//     produced, as mtmd-helper sizes its buffer.
func resample(x []float32, rateIn, rateOut int) []float32 {
	return resampleWith(x, rateIn, rateOut, true)
}

// resampleWith is resample, without the low-pass filter unless filter.
func resampleWith(x []float32, rateIn, rateOut int, filter bool) []float32 {
	if rateIn == rateOut || len(x) == 0 {
		return x
	}
	n := expectedFrames(uint64(rateOut), uint64(rateIn), uint64(len(x)))
	out := make([]float32, n)
	g := gcd(rateIn, rateOut)
	in, o := rateIn/g, rateOut/g
	lpf := newLowPass(max(in, o), float64(min(in, o))*0.5)
	advInt, advFrac := in/o, in%o
	timeInt, timeFrac := 1, 0
	var x0, x1 float32
	next := 0
	down := in > o
	for k := range out {
		for timeInt > 0 && next < len(x) {
			x0, x1 = x1, x[next]
			next++
			if down && filter {
				x1 = lpf.step(x1)
			}
			timeInt--
		}
		if timeInt > 0 {
			break // out of input
		}
		a := float32(timeFrac) / float32(o)
		y := x0 + (x1-x0)*a
		if !down && filter {
			y = lpf.step(y)
		}
		out[k] = y
		timeInt += advInt
		timeFrac += advFrac
		if timeFrac >= o {
			timeFrac -= o
			timeInt++
		}
	}
	return out
}

// expectedFrames is miniaudio's ma_calculate_frame_count_after_resampling
// (its arithmetic as it is, in uint64).
func expectedFrames(rateOut, rateIn, n uint64) uint64 {
	if rateIn == 0 || rateOut == 0 || n == 0 {
		return 0
	}
	if rateIn == rateOut {
		return n
	}
	out := n * rateOut / rateIn
	frac := out * (rateIn / rateOut) / rateOut
	if out*(rateIn%rateOut)+frac <= n {
		out++
	}
	return out
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// lowPass is miniaudio's order-4 ma_lpf over f32 mono frames: two
// second-order sections in series.
type lowPass struct {
	b0, b1, b2, a1, a2 [2]float32
	r1, r2             [2]float32
}

func newLowPass(rate int, cutoff float64) *lowPass {
	l := &lowPass{}
	for i := range 2 {
		a := float64(1+2*i) * (math.Pi / 8)
		q := 1 / (2 * math.Cos(a))
		w := 2 * math.Pi * cutoff / float64(rate)
		s, c := math.Sin(w), math.Cos(w)
		al := s / (2 * q)
		a0 := 1 + al
		l.b0[i] = float32((1 - c) / 2 / a0)
		l.b1[i] = float32((1 - c) / a0)
		l.b2[i] = float32((1 - c) / 2 / a0)
		l.a1[i] = float32(-2 * c / a0)
		l.a2[i] = float32((1 - al) / a0)
	}
	return l
}

func (l *lowPass) step(x float32) float32 {
	for i := range 2 {
		y := l.b0[i]*x + l.r1[i]
		l.r1[i] = l.b1[i]*x - l.a1[i]*y + l.r2[i]
		l.r2[i] = l.b2[i]*x - l.a2[i]*y
		x = y
	}
	return x
}
