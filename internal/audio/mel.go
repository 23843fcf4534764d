package audio

import (
	"fmt"
	"math"
)

// Whisper-style preprocessing constants, as llama.cpp's clip.cpp sets
// them for the Whisper-encoder projectors (qwen2a, ultravox, voxtral, ...)
// and mtmd-audio.cpp applies them.
const (
	SampleRate   = 16000 // Hz
	NFFT         = 400   // the FFT size and the Hann window's length (25 ms)
	Hop          = 160   // samples between frames (10 ms)
	ChunkFrames  = 3000  // frames per encoder run (30 s)
	chunkSeconds = 30
	melFloor     = 5.960464477539063e-08 // the power floor before the log (2^-24)
)

// Mel is a log-mel spectrogram chunk: Bins rows of Frames values
// (Data[b*Frames+t], bin-major, as mtmd hands it to the encoder).
type Mel struct {
	Bins, Frames int
	Data         []float32
}

// Variant departs from llama.cpp's preprocessing on purpose; its zero
// value is llama.cpp's. Tests use it to show that each convention moves
// the embeddings.
type Variant struct {
	SymmetricWindow bool // a symmetric Hann window (llama.cpp's is periodic)
	HTKMel          bool // the HTK mel scale without area normalization (llama.cpp: Slaney, area-normalized)
	NaturalLog      bool // ln instead of log10 (the clamp and scaling unchanged)
	NoClamp         bool // no clamp at max-8 and no (x+4)/4 scaling
}

// Chunks is the count of ChunkFrames chunks WhisperMel cuts n samples
// into (n > 0): the samples padded to at least 31 s, then 30 s of zeros
// after them, framed every Hop samples. A caller bounds the encoder's
// work with it before the spectrogram is computed.
func Chunks(n int) int {
	n = max(n, SampleRate*(chunkSeconds+1))
	frames := (n+SampleRate*chunkSeconds+2*(NFFT/2)-NFFT)/Hop + 1
	return frames / ChunkFrames
}

// WhisperMel is the log-mel spectrogram of 16 kHz mono samples as
// llama.cpp 81ff7abe5's mtmd_audio_preprocessor_whisper computes it, cut
// into the chunks the encoder takes:
//
//   - audio shorter than 31 s is padded with zeros to 31 s;
//   - the samples are preceded by 200 reflected samples (x[200] .. x[1])
//     and followed by 30 s + 200 samples of zeros;
//   - frames every 160 samples of 400 samples times a periodic Hann
//     window, a 400-point FFT (radix-2 steps down to a 25-point DFT, in
//     float32 over sin/cos tables of 400 entries), power |X|^2 of bins
//     0..200;
//   - bins times a Slaney-scale mel filter bank (0 to 8 kHz, area
//     normalized), summed in float64, floored at 2^-24, log10;
//   - all values clamped below at their maximum - 8, then (x + 4) / 4;
//   - cut into chunks of 3000 frames; a last partial chunk is dropped
//     (it is always padding).
//
// Audio of 1 s gives 2 chunks (the padding makes 61 s).
func WhisperMel(samples []float32, bins int, v Variant) ([]Mel, error) {
	if len(samples) == 0 {
		return nil, fmt.Errorf("%w: no samples", ErrAudio)
	}
	if bins < 1 || bins > 256 {
		return nil, fmt.Errorf("%w: %d mel bins (1 to 256)", ErrAudio, bins)
	}
	if min := SampleRate * (chunkSeconds + 1); len(samples) < min {
		s := make([]float32, min)
		copy(s, samples)
		samples = s
	}
	const pad = NFFT / 2
	n := len(samples)
	padded := make([]float32, n+SampleRate*chunkSeconds+2*pad)
	for i := range pad {
		padded[i] = samples[pad-i]
	}
	copy(padded[pad:], samples)
	frames := (len(padded)-NFFT)/Hop + 1

	tab := newTables(NFFT)
	win := hann(NFFT, !v.SymmetricWindow)
	filters := melFilters(bins, NFFT, SampleRate, v.HTKMel)
	nb := NFFT/2 + 1
	out := make([]float32, bins*frames)
	in := make([]float32, NFFT)
	spec := make([]float32, 2*NFFT)
	scratch := make([]float32, 8*NFFT)
	power := make([]float32, nb)
	// Each filter's nonzero span [lo, hi]: the sums below skip the groups
	// of four outside it, whose products are all zero (powers and filters
	// are >= 0, so adding them changes no sum).
	lo, hi := make([]int, bins), make([]int, bins)
	for b := range bins {
		lo[b], hi[b] = nb, -1
		for k, w := range filters[b*nb : (b+1)*nb] {
			if w != 0 {
				lo[b], hi[b] = min(lo[b], k), k
			}
		}
	}
	for i := range frames {
		off := i * Hop
		valid := min(NFFT, len(padded)-off)
		for j := range valid {
			in[j] = win[j] * padded[off+j]
		}
		clear(in[valid:])
		tab.fft(in, spec, scratch)
		for j := range nb {
			re, im := spec[2*j], spec[2*j+1]
			power[j] = re*re + im*im
		}
		for b := range bins {
			f := filters[b*nb : (b+1)*nb]
			var sum float64
			k := lo[b] &^ 3 // groups start at multiples of four, as mtmd's
			for ; k < nb-3 && k <= hi[b]; k += 4 {
				// mtmd sums four float products, then adds them in float64.
				s := power[k]*f[k] + power[k+1]*f[k+1] + power[k+2]*f[k+2] + power[k+3]*f[k+3]
				sum += float64(s)
			}
			for ; k < nb && k <= hi[b]; k++ {
				sum += float64(power[k] * f[k])
			}
			sum = max(sum, melFloor)
			if v.NaturalLog {
				sum = math.Log(sum)
			} else {
				sum = math.Log10(sum)
			}
			out[b*frames+i] = float32(sum)
		}
	}
	if !v.NoClamp {
		mx := math.Inf(-1)
		for _, x := range out {
			mx = max(mx, float64(x))
		}
		mx -= 8
		for i, x := range out {
			y := float64(x)
			if y < mx {
				y = mx
			}
			out[i] = float32((y + 4) / 4)
		}
	}
	var chunks []Mel
	for o := 0; o+ChunkFrames <= frames; o += ChunkFrames {
		m := Mel{Bins: bins, Frames: ChunkFrames, Data: make([]float32, bins*ChunkFrames)}
		for b := range bins {
			copy(m.Data[b*ChunkFrames:(b+1)*ChunkFrames], out[b*frames+o:])
		}
		chunks = append(chunks, m)
	}
	return chunks, nil
}

// hann is a Hann window of n values, periodic (denominator n) or
// symmetric (n-1), in mtmd's precision (a float cosine of a float
// argument, the rest in double).
func hann(n int, periodic bool) []float32 {
	d := n
	if !periodic {
		d = n - 1
	}
	w := make([]float32, n)
	for i := range w {
		c := float32(math.Cos(float64(float32(2 * math.Pi * float64(i) / float64(d)))))
		w[i] = float32(0.5 * (1 - float64(c)))
	}
	return w
}

// melFilters is the [bins, nfft/2+1] filter bank of mtmd's
// fill_mel_filterbank_matrix: triangles between bins+2 points evenly
// spaced on the mel scale from 0 Hz to the Nyquist frequency, each
// weighted by 2/(right-left) (Slaney area normalization), evaluated at
// the FFT bins' frequencies k*sr/nfft; in float64, stored as float32.
// htk: the HTK mel scale and no area normalization (a Variant).
func melFilters(bins, nfft, sr int, htk bool) []float32 {
	toMel := func(f float64) float64 {
		if htk {
			return 2595 * math.Log10(1+f/700)
		}
		const minLogHz, slope = 1000.0, 3 / 200.0
		if f < minLogHz {
			return f * slope
		}
		return minLogHz*slope + math.Log(f/minLogHz)/(math.Log(6.4)/27)
	}
	toHz := func(m float64) float64 {
		if htk {
			return 700 * (math.Pow(10, m/2595) - 1)
		}
		const minLogHz, slope = 1000.0, 3 / 200.0
		if m < minLogHz*slope {
			return m / slope
		}
		return minLogHz * math.Exp((m-minLogHz*slope)*(math.Log(6.4)/27))
	}
	lo, hi := toMel(0), toMel(0.5*float64(sr))
	hz := make([]float64, bins+2)
	for i := range hz {
		hz[i] = toHz(lo + (hi-lo)*(float64(i)/float64(bins+1)))
	}
	nb := nfft/2 + 1
	step := float64(sr) / float64(nfft)
	out := make([]float32, bins*nb)
	for m := range bins {
		l, c, r := hz[m], hz[m+1], hz[m+2]
		dl, dr := max(1e-30, c-l), max(1e-30, r-c)
		norm := 2 / max(1e-30, r-l)
		if htk {
			norm = 1
		}
		for k := range nb {
			f := float64(k) * step
			var w float64
			if f >= l && f <= c {
				w = (f - l) / dl
			} else if f > c && f <= r {
				w = (r - f) / dr
			}
			out[m*nb+k] = float32(w * norm)
		}
	}
	return out
}

// tables holds the sine and cosine of 2*pi*i/n, i < n, in float32 (a
// float sine of the double angle narrowed to float, as mtmd's table).
type tables struct {
	n        int
	sin, cos []float32
	// odd is n's largest odd divisor, the length of the direct DFTs the
	// recursion ends in; oddCos[k*odd+j] and oddNegSin[k*odd+j] are
	// cos[i] and -sin[i] at i = (k*j*n/odd) % n, read in place of the
	// index arithmetic (the same values, so the same sums).
	odd               int
	oddCos, oddNegSin []float32
}

func newTables(n int) *tables {
	t := &tables{n: n, sin: make([]float32, n), cos: make([]float32, n)}
	for i := range n {
		a := float64(float32(2 * math.Pi * float64(i) / float64(n)))
		t.sin[i], t.cos[i] = float32(math.Sin(a)), float32(math.Cos(a))
	}
	t.odd = n
	for t.odd > 1 && t.odd%2 == 0 {
		t.odd /= 2
	}
	m, step := t.odd, n/t.odd
	t.oddCos, t.oddNegSin = make([]float32, m*m), make([]float32, m*m)
	for k := range m {
		for j := range m {
			i := (k * j * step) % n
			t.oddCos[k*m+j], t.oddNegSin[k*m+j] = t.cos[i], -t.sin[i]
		}
	}
	return t
}

// fft writes the DFT of the real in (len N, N dividing t.n) to out as
// interleaved (re, im) pairs (2N values): split into even and odd
// samples while N is even, a direct DFT once N is odd, in float32;
// scratch holds 8N values.
func (t *tables) fft(in, out, scratch []float32) {
	N := len(in)
	if N == 1 {
		out[0], out[1] = in[0], 0
		return
	}
	if N%2 == 1 && N == t.odd {
		in := in[:N]
		for k := range N {
			c, ns := t.oddCos[k*N:(k+1)*N], t.oddNegSin[k*N:(k+1)*N]
			var re, im float32
			for j, x := range in {
				re += x * c[j]
				im += x * ns[j] // (-x)*sin, as below: negation is exact
			}
			out[2*k], out[2*k+1] = re, im
		}
		return
	}
	if N%2 == 1 {
		step := t.n / N
		for k := range N {
			var re, im float32
			for n := range N {
				idx := (k * n * step) % t.n
				re += in[n] * t.cos[idx]
				im += -in[n] * t.sin[idx]
			}
			out[2*k], out[2*k+1] = re, im
		}
		return
	}
	h := N / 2
	half, rest := scratch[:h], scratch[h:]
	even, odd := rest[:N], rest[N:2*N]
	rest = rest[2*N:]
	for i := range h {
		half[i] = in[2*i]
	}
	t.fft(half, even, rest)
	for i := range h {
		half[i] = in[2*i+1]
	}
	t.fft(half, odd, rest)
	step := t.n / N
	for k := range h {
		re, im := t.cos[k*step], -t.sin[k*step]
		ro, io := odd[2*k], odd[2*k+1]
		out[2*k] = even[2*k] + re*ro - im*io
		out[2*k+1] = even[2*k+1] + re*io + im*ro
		out[2*(k+h)] = even[2*k] - re*ro + im*io
		out[2*(k+h)+1] = even[2*k+1] - re*io - im*ro
	}
}
