package audio

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"runtime"
	"testing"

	"github.com/go-audio/wav"
)

// withChunk is a WAV file (wavFile's layout) with chunk inserted before
// its fmt chunk.
func withChunk(file, chunk []byte) []byte {
	out := append(bytes.Clone(file[:12]), chunk...)
	out = append(out, file[12:]...)
	binary.LittleEndian.PutUint32(out[4:], uint32(len(out)-8))
	return out
}

// extensible rewrites a WAV file of wavFile's layout (a 16-byte fmt
// chunk at 12) with a 40-byte WAVE_FORMAT_EXTENSIBLE fmt chunk whose
// subformat GUID is the file's format tag.
func extensible(file []byte) []byte {
	fmtc := file[20:36]
	ext := append([]byte("fmt \x28\x00\x00\x00"), fmtc...)
	binary.LittleEndian.PutUint16(ext[8:], 0xFFFE)
	ext = binary.LittleEndian.AppendUint16(ext, 22)                                    // cbSize
	ext = binary.LittleEndian.AppendUint16(ext, binary.LittleEndian.Uint16(fmtc[14:])) // valid bits
	ext = binary.LittleEndian.AppendUint32(ext, 0)                                     // channel mask
	ext = binary.LittleEndian.AppendUint16(ext, binary.LittleEndian.Uint16(fmtc[0:]))  // subformat: the tag
	ext = append(ext, "\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"...)
	out := append(bytes.Clone(file[:12]), ext...)
	out = append(out, file[36:]...)
	binary.LittleEndian.PutUint32(out[4:], uint32(len(out)-8))
	return out
}

// TestDecodeWAVLibraryWorkarounds: what go-audio/wav gets wrong on a file
// given to it directly (TestGoAudioWAVQuirks) DecodeWAV gets right, as it
// gives the library only a canonical file rebuilt from ParseWAV's checks:
// an odd data chunk's pad byte and a trailing half sample are not samples,
// chunks declaring gigabytes allocate nothing of the kind, and float
// samples in an EXTENSIBLE header are read as floats, bit for bit as
// llama.cpp reads them.
func TestDecodeWAVLibraryWorkarounds(t *testing.T) {
	// 8-bit mono, 3 bytes of data and the pad byte: 3 samples of 128.
	u8 := append(wavFile(1, 1, 16000, 8, []byte{128, 128, 128}, -1), 0)
	s, err := DecodeWAV(u8)
	want := float32(float32(128)*float32(0.00784313725490196078)) - 1
	if err != nil || len(s) != 3 || s[0] != want || s[1] != want || s[2] != want {
		t.Errorf("8-bit, odd data with its pad byte: %v, %v; want 3 samples of %v", s, err, want)
	}
	// 16-bit mono, 3 bytes of data: one sample, 0x4000 = 0.5.
	s, err = DecodeWAV(wavFile(1, 1, 16000, 16, []byte{0, 0x40, 0x7f}, -1))
	if err != nil || len(s) != 1 || s[0] != 0.5 {
		t.Errorf("16-bit, a trailing half sample: %v, %v; want [0.5]", s, err)
	}
	// A LIST INFO chunk (before fmt, and between fmt and data) whose INAM
	// subchunk declares 2 GiB, in a 3 KB file: its samples, and no
	// allocation near 2 GiB.
	pcm := make([]byte, 3200)
	binary.LittleEndian.PutUint16(pcm[2:], 0x4000)
	list := []byte("LIST\x0c\x00\x00\x00INFOINAM\xff\xff\xff\x7f")
	for _, f := range [][]byte{withChunk(wavFile(1, 1, 16000, 16, pcm, -1), list),
		append(append(wavFile(1, 1, 16000, 16, nil, -1)[:36], list...), wavFile(1, 1, 16000, 16, pcm, -1)[36:]...)} {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		s, err = DecodeWAV(f)
		runtime.ReadMemStats(&m1)
		if err != nil || len(s) != 1600 || s[1] != 0.5 {
			t.Errorf("a LIST INFO of 2 GiB: %d samples, %v; want 1600, the second 0.5", len(s), err)
		}
		if a := m1.TotalAlloc - m0.TotalAlloc; a > 16<<20 {
			t.Errorf("a LIST INFO of 2 GiB in %d bytes: %d MiB allocated", len(f), a>>20)
		}
	}
	// Floats in EXTENSIBLE headers: llama.cpp's samples, as the plain files.
	const dir = "../../testdata/audio/formats/"
	for _, name := range []string{"f32stereo48k", "f64mono16k", "s24stereo16k", "u8mono16k"} {
		b, err := os.ReadFile(dir + name + ".wav")
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(dir + name + ".f32")
		if err != nil {
			t.Fatal(err)
		}
		if string(b[12:16]) != "fmt " || binary.LittleEndian.Uint32(b[16:]) != 16 || string(b[36:40]) != "data" {
			t.Fatalf("%s: not a canonical 44-byte header", name)
		}
		got, err := DecodeWAV(extensible(b))
		if err != nil || len(got) != len(raw)/4 {
			t.Errorf("%s as EXTENSIBLE: %d samples, %v; want %d", name, len(got), err, len(raw)/4)
			continue
		}
		for i, g := range got {
			if w := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); math.Float32bits(g) != math.Float32bits(w) {
				t.Errorf("%s as EXTENSIBLE: sample %d is %v, llama.cpp's %v", name, i, g, w)
				break
			}
		}
	}
}

// TestGoAudioWAVQuirks: go-audio/wav given a file directly reads an odd
// data chunk's pad byte as a sample, a trailing half sample as a whole
// one, a data chunk declared at 0xFFFFFFFF bytes as empty, and no 64-bit
// floats; its header says 0xFFFE for EXTENSIBLE files, float or not.
// These are why DecodeWAV gives it only canonical files (wavlib.go):
// when an upgrade fixes them this test fails, and the workaround may be
// revisited.
func TestGoAudioWAVQuirks(t *testing.T) {
	read := func(b []byte) ([]int, uint16, error) {
		d := wav.NewDecoder(bytes.NewReader(b))
		buf, err := d.FullPCMBuffer()
		if buf == nil {
			return nil, d.WavAudioFormat, err
		}
		return buf.Data, d.WavAudioFormat, err
	}
	if s, _, err := read(append(wavFile(1, 1, 16000, 8, []byte{128, 128, 128}, -1), 0)); err != nil || len(s) != 4 {
		t.Errorf("odd 8-bit data and its pad byte: %v, %v; the quirk was 4 samples", s, err)
	}
	if s, _, err := read(wavFile(1, 1, 16000, 16, []byte{0, 0x40, 0x7f}, -1)); err != nil || len(s) != 2 {
		t.Errorf("16-bit, a trailing half sample: %v, %v; the quirk was 2 samples", s, err)
	}
	if s, _, err := read(wavFile(1, 1, 16000, 16, make([]byte, 3200), 0xFFFFFFFF)); err != nil || len(s) != 0 {
		t.Errorf("data declared at 0xFFFFFFFF: %d samples, %v; the quirk was none", len(s), err)
	}
	b, err := os.ReadFile("../../testdata/audio/formats/f64mono16k.wav")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := read(b); err == nil {
		t.Error("64-bit float: no error; the quirk was unhandled byte depth:64")
	}
	if _, tag, err := read(extensible(b)); tag != 0xFFFE {
		t.Errorf("EXTENSIBLE: format %#x, %v; the quirk was 0xFFFE, the subformat dropped", tag, err)
	}
}
