package audio

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"testing"
)

const testdata = "../../testdata/audio/qwen2a/"

type melGolden struct {
	Frames []int         `json:"frames"`
	Chunks [][][]float64 `json:"chunks"`
}

func loadTones(t *testing.T) []float32 {
	t.Helper()
	b, err := os.ReadFile(testdata + "tones.wav")
	if err != nil {
		t.Fatal(err)
	}
	s, err := DecodeWAV(b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// melDiff is the largest difference between WhisperMel's chunks and
// llama.cpp's values at the golden's frames.
func melDiff(t *testing.T, v Variant) float64 {
	t.Helper()
	b, err := os.ReadFile(testdata + "mel.json")
	if err != nil {
		t.Fatal(err)
	}
	var g melGolden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	chunks, err := WhisperMel(loadTones(t), 128, v)
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) != len(g.Chunks) {
		t.Fatalf("%d chunks, llama.cpp %d", len(chunks), len(g.Chunks))
	}
	worst := 0.0
	for c, ch := range g.Chunks {
		m := chunks[c]
		if m.Bins != 128 || m.Frames != ChunkFrames || len(m.Data) != 128*ChunkFrames {
			t.Fatalf("chunk %d: %d bins x %d frames (%d values)", c, m.Bins, m.Frames, len(m.Data))
		}
		for i, f := range g.Frames {
			for b, want := range ch[i] {
				worst = max(worst, math.Abs(float64(m.Data[b*m.Frames+f])-want))
			}
		}
	}
	return worst
}

// TestWhisperMelGolden holds the log-mel spectrogram to llama.cpp's
// (printed with 6 decimals: 5e-7 of rounding, and float32 sums in
// another order).
func TestWhisperMelGolden(t *testing.T) {
	if d := melDiff(t, Variant{}); d > 2e-5 {
		t.Fatalf("log-mel differs from llama.cpp's by %g (tolerance 2e-5)", d)
	} else {
		t.Logf("max |diff| %g", d)
	}
}

// TestWhisperMelConventions: each convention of llama.cpp's
// preprocessing moves the log-mel values far past the tolerance.
func TestWhisperMelConventions(t *testing.T) {
	for name, v := range map[string]Variant{
		"symmetric window": {SymmetricWindow: true},
		"HTK mel filters":  {HTKMel: true},
		"natural log":      {NaturalLog: true},
		"no clamp/scale":   {NoClamp: true},
	} {
		if d := melDiff(t, v); d < 1e-2 {
			t.Errorf("%s: log-mel moves by only %g", name, d)
		} else {
			t.Logf("%s: %g", name, d)
		}
	}
}

func TestDecodeWAV(t *testing.T) {
	s := loadTones(t)
	if len(s) != 24000 || s[0] != 0 || math.Abs(float64(s[1])-0.13678) > 1e-5 {
		t.Fatalf("%d samples, first %v %v (llama.cpp: 24000, 0, 0.13678)", len(s), s[0], s[1])
	}
	b, _ := os.ReadFile(testdata + "tones.wav")
	for name, data := range map[string][]byte{
		"empty":     nil,
		"not riff":  []byte("RIFX0000WAVEfmt "),
		"truncated": b[:30],
		"no data":   b[:36],
		"500 Hz":    withRate(b, 500),
	} {
		if _, err := DecodeWAV(data); !errors.Is(err, ErrAudio) {
			t.Errorf("%s: err %v, want ErrAudio", name, err)
		}
	}
}

func withRate(b []byte, rate uint32) []byte {
	c := append([]byte(nil), b...)
	c[24], c[25], c[26], c[27] = byte(rate), byte(rate>>8), byte(rate>>16), byte(rate>>24)
	return c
}

// FuzzDecodeWAV: any bytes decode to samples (finite, at most what the
// file's bytes can hold resampled from 1 kHz) or an ErrAudio error,
// never a panic. Seeds: the start of tones.wav and testdata/fuzz (each
// sample format, odd chunks, hostile headers).
func FuzzDecodeWAV(f *testing.F) {
	b, _ := os.ReadFile(testdata + "tones.wav")
	f.Add(b[:200])
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeWAV(data)
		if err != nil {
			if !errors.Is(err, ErrAudio) {
				t.Fatalf("error %v is not ErrAudio", err)
			}
			return
		}
		if len(s) == 0 {
			t.Fatal("no error and no samples")
		}
		if max := len(data)*SampleRate/1000 + 2; len(s) > max {
			t.Fatalf("%d samples from %d bytes (at most %d)", len(s), len(data), max)
		}
		for i, x := range s {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("sample %d is %v", i, x)
			}
		}
	})
}

// TestDecodeWAVResampled: a 44.1 kHz stereo and an 8 kHz mono WAV file
// (testdata/audio/rates) decode to llama.cpp mtmd-helper's 16 kHz mono
// samples (miniaudio's channel mix and linear resampler with its
// low-pass filter) within 1e-6; plain linear interpolation without the
// filter misses them by far more.
func TestDecodeWAVResampled(t *testing.T) {
	for _, name := range []string{"stereo44k", "mono8k"} {
		b, err := os.ReadFile("../../testdata/audio/rates/" + name + ".wav")
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile("../../testdata/audio/rates/" + name + ".f32")
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float64, len(raw)/4)
		for i := range want {
			want[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
		}
		got, err := DecodeWAV(b)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d samples, llama.cpp %d", name, len(got), len(want))
		}
		worst := 0.0
		for i := range got {
			worst = max(worst, math.Abs(float64(got[i])-want[i]))
		}
		if worst > 1e-6 {
			t.Errorf("%s: samples differ from llama.cpp's by %g (tolerance 1e-6)", name, worst)
		} else {
			t.Logf("%s: max |diff| %g", name, worst)
		}
		// Without the low-pass filter.
		rate := int(binary.LittleEndian.Uint32(b[24:28]))
		mono, err := DecodeWAV(withRate(b, SampleRate)) // the same samples, read as 16 kHz: no resampling
		if err != nil {
			t.Fatal(err)
		}
		plain := resampleWith(mono, rate, SampleRate, false)
		worst = 0
		for i := range plain {
			worst = max(worst, math.Abs(float64(plain[i])-want[i]))
		}
		if worst < 1e-2 {
			t.Errorf("%s: resampling without the low-pass filter is within %g of llama.cpp's", name, worst)
		} else {
			t.Logf("%s: without the low-pass filter: %.3g", name, worst)
		}
	}
}
