package audio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
)

// TestDecodeWAVFormats: WAV files of 8-bit (unsigned), 24- and 32-bit
// PCM, 32- and 64-bit float and a WAVE_FORMAT_EXTENSIBLE 24-bit one
// (testdata/audio/formats; mono and stereo, at 16, 22.05 and 48 kHz)
// decode bit for bit to the 16 kHz mono samples llama.cpp's mtmd-helper
// gets from miniaudio (dr_wav's conversions to float32).
func TestDecodeWAVFormats(t *testing.T) {
	const dir = "../../testdata/audio/formats/"
	for _, name := range []string{"u8mono16k", "s24stereo16k", "s32mono22k", "f32stereo48k", "f64mono16k", "s24extmono16k"} {
		b, err := os.ReadFile(dir + name + ".wav")
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(dir + name + ".f32")
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeWAV(b)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(got) != len(raw)/4 {
			t.Errorf("%s: %d samples, llama.cpp's %d", name, len(got), len(raw)/4)
			continue
		}
		bad := 0
		for i, g := range got {
			if w := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); math.Float32bits(g) != math.Float32bits(w) {
				if bad++; bad <= 3 {
					t.Errorf("%s: sample %d is %v, llama.cpp's %v", name, i, g, w)
				}
			}
		}
	}
}

// wavFile is a WAV file of the fmt chunk's fields and the data chunk's
// bytes, its sizes as declared (dataSize < 0: the data's length).
func wavFile(tag, channels uint16, rate uint32, bits uint16, data []byte, dataSize int64) []byte {
	var b bytes.Buffer
	put := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	put(uint32(36 + len(data)))
	b.WriteString("WAVEfmt ")
	put(uint32(16))
	put(tag)
	put(channels)
	put(rate)
	put(rate * uint32(channels) * uint32(bits) / 8)
	put(channels * bits / 8)
	put(bits)
	b.WriteString("data")
	if dataSize < 0 {
		dataSize = int64(len(data))
	}
	put(uint32(dataSize))
	b.Write(data)
	return b.Bytes()
}

// TestDecodeWAVHostile: truncated and hostile files, and formats
// DecodeWAV does not read, are errors (ErrAudio) naming what is wrong,
// never a panic or a huge allocation; a data chunk declared longer than
// the file is read as far as it goes.
func TestDecodeWAVHostile(t *testing.T) {
	pcm := make([]byte, 3200) // 100 ms of 16-bit mono silence at 16 kHz
	good := wavFile(1, 1, 16000, 16, pcm, -1)
	if s, err := DecodeWAV(good); err != nil || len(s) != 1600 {
		t.Fatalf("a good file: %d samples, %v", len(s), err)
	}
	nan := make([]byte, 8)
	binary.LittleEndian.PutUint32(nan, math.Float32bits(float32(math.NaN())))
	huge := make([]byte, 8)
	binary.LittleEndian.PutUint32(huge[4:], math.Float32bits(1e30))
	fmtHuge := bytes.Clone(good)
	binary.LittleEndian.PutUint32(fmtHuge[16:], 0xFFFFFFF0)
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "not a RIFF WAVE file"},
		{"not WAV", []byte("ID3\x03\x00\x00\x00\x00\x00\x00 an mp3, say"), "not a RIFF WAVE file"},
		{"header only", good[:12], "without a fmt chunk"},
		{"fmt cut", good[:30], "past the end of the file"},
		{"no data chunk", good[:36], "without a data chunk"},
		{"fmt of 4 GiB", fmtHuge, "past the end of the file"},
		{"no samples", wavFile(1, 1, 16000, 16, nil, -1), "without samples"},
		{"half a sample", wavFile(1, 2, 16000, 16, []byte{1, 2, 3}, -1), "without samples"},
		{"zero channels", wavFile(1, 0, 16000, 16, pcm, -1), "0 channels"},
		{"six channels", wavFile(1, 6, 16000, 16, pcm, -1), "6 channels"},
		{"rate 0", wavFile(1, 1, 0, 16, pcm, -1), "at 0 Hz"},
		{"rate 999", wavFile(1, 1, 999, 16, pcm, -1), "at 999 Hz"},
		{"rate 4 GHz", wavFile(1, 1, 0xFFFFFFFF, 16, pcm, -1), "at 4294967295 Hz"},
		{"12-bit PCM", wavFile(1, 1, 16000, 12, pcm, -1), "12-bit PCM"},
		{"0-bit PCM", wavFile(1, 1, 16000, 0, pcm, -1), "0-bit PCM"},
		{"16-bit float", wavFile(3, 1, 16000, 16, pcm, -1), "16-bit float"},
		{"A-law", wavFile(6, 1, 8000, 8, pcm, -1), "format tag 6"},
		{"ADPCM", wavFile(2, 1, 8000, 4, pcm, -1), "format tag 2"},
		{"NaN", wavFile(3, 1, 16000, 32, nan, -1), "float sample 0 is NaN"},
		{"1e30", wavFile(3, 1, 16000, 32, huge, -1), "float sample 1 is 1e+30"},
		{"over 30 min", wavFile(1, 1, 1000, 16, make([]byte, 2*(MaxSeconds*1000+1)), -1), "at most 1800 s"},
	} {
		_, err := DecodeWAV(tc.data)
		if !errors.Is(err, ErrAudio) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want ErrAudio with %q", tc.name, err, tc.want)
		}
	}
	// A data chunk declared at 4 GiB in a file of 100 ms: the samples there.
	s, err := DecodeWAV(wavFile(1, 1, 16000, 16, pcm, 0xFFFFFFFF))
	if err != nil || len(s) != 1600 {
		t.Errorf("a data chunk declared past the end: %d samples, %v; want the 1600 there", len(s), err)
	}
}

// TestWAVSamples: ParseWAV tells how many samples Decode gives (what a
// prompt's length check reads before decoding), at 16 kHz and resampled
// up and down, and the file's seconds.
func TestWAVSamples(t *testing.T) {
	for _, path := range []string{"../../testdata/audio/formats/u8mono16k.wav", "../../testdata/audio/formats/s32mono22k.wav",
		"../../testdata/audio/formats/f32stereo48k.wav", "../../testdata/audio/rates/mono8k.wav", "../../testdata/audio/rates/stereo44k.wav"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		w, err := ParseWAV(b)
		if err != nil {
			t.Fatal(err)
		}
		s, err := w.Decode()
		if err != nil {
			t.Fatal(err)
		}
		if w.Samples() != len(s) {
			t.Errorf("%s: Samples %d, Decode gave %d", path, w.Samples(), len(s))
		}
		if want := float64(len(s)) / SampleRate; math.Abs(w.Seconds()-want) > 1e-3 {
			t.Errorf("%s: %v s, want about %v", path, w.Seconds(), want)
		}
	}
}
