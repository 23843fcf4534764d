package audio

import (
	"encoding/binary"
	"fmt"
	"io"

	goaudio "github.com/go-audio/audio"
	"github.com/go-audio/wav"
)

// Integer PCM samples are read by github.com/go-audio/wav, behind
// ParseWAV: the library never sees the caller's file, only a canonical
// one rebuilt from what ParseWAV checked (pcmStream). go-audio/wav v1.1.0
// (with go-audio/riff v1.0.0) given a file directly:
//   - allocates what a chunk declares before reading it: a 3 KB file
//     whose fmt or LIST chunk declares 4 GiB, or whose LIST INFO
//     subchunk declares 2 GiB, allocates 4-8 GiB (natively), and in wasm
//     (the browser page) dies with "fatal error: out of memory", which no
//     recover catches;
//   - reads a data chunk declared at 0xFFFFFFFF bytes (a streaming
//     writer's "unknown length") as empty: the size's padding to even
//     overflows its uint32;
//   - reads an odd-sized data chunk's pad byte as one more sample, and a
//     trailing half sample as a whole one made partly of the previous
//     sample's bytes;
//   - has no IEEE float decoder (format 3 is read as integers, 64 bits
//     is "unhandled byte depth:64") and drops WAVE_FORMAT_EXTENSIBLE's
//     subformat, so a float file in an EXTENSIBLE header cannot be told
//     from an integer one.
//
// So ParseWAV walks the chunks (each inside the file), reads the format
// (the subformat of EXTENSIBLE) and counts the whole frames; floats are
// converted here (toFloat); integer PCM goes to the library as a 44-byte
// header of format 1 and exactly the whole frames' bytes, without a pad
// byte, read a bounded buffer at a time, and no more samples are taken
// than ParseWAV counted (TestDecodeWAVLibraryWorkarounds).

// pcmBuffer is how many samples one read of the library decodes: even,
// so a buffer holds whole stereo frames.
const pcmBuffer = 1 << 14

// decodePCM fills out (w.frames mono samples) with w's integer PCM
// samples as go-audio/wav reads them, converted to float32 as dr_wav does
// (pcmToFloat) and the channels averaged.
func (w *WAV) decodePCM(out []float32) error {
	d := wav.NewDecoder(w.pcmStream())
	if err := d.FwdToPCM(); err != nil {
		return fmt.Errorf("%w: go-audio/wav: %v", ErrAudio, err)
	}
	if int(d.NumChans) != w.channels || int(d.BitDepth) != w.bits || d.WavAudioFormat != wavPCM {
		return fmt.Errorf("%w: go-audio/wav read the format as %d channels of %d bits (tag %d), not %d of %d", ErrAudio,
			d.NumChans, d.BitDepth, d.WavAudioFormat, w.channels, w.bits)
	}
	buf := &goaudio.IntBuffer{Data: make([]int, pcmBuffer)}
	total := w.frames * w.channels
	got := 0
	for got < total {
		n, err := d.PCMBuffer(buf)
		if err != nil {
			return fmt.Errorf("%w: go-audio/wav: %v", ErrAudio, err)
		}
		if n == 0 {
			break
		}
		n = min(n, total-got) // never past ParseWAV's whole frames
		for _, v := range buf.Data[:n] {
			s := pcmToFloat(v, w.bits)
			i := got / w.channels
			if w.channels == 1 || got%2 == 0 {
				out[i] = s
			} else {
				out[i] = (out[i] + s) / 2 // the two channels' mean, as Decode's floats
			}
			got++
		}
	}
	if got != total {
		return fmt.Errorf("%w: go-audio/wav read %d of the %d samples", ErrAudio, got, total)
	}
	return nil
}

// pcmStream is w as a canonical WAV file: RIFF, a 16-byte fmt chunk of
// integer PCM (format 1, whatever the file's header was) and a data chunk
// of the whole frames' bytes, and nothing after them (no pad byte). The
// samples are not copied.
func (w *WAV) pcmStream() io.ReadSeeker {
	n := w.frames * w.channels * (w.bits / 8) // at most len(w.pcm) < 4 GiB
	h := make([]byte, 0, 44)
	h = append(h, "RIFF"...)
	h = binary.LittleEndian.AppendUint32(h, uint32(36+n))
	h = append(h, "WAVEfmt "...)
	h = binary.LittleEndian.AppendUint32(h, 16)
	h = binary.LittleEndian.AppendUint16(h, wavPCM)
	h = binary.LittleEndian.AppendUint16(h, uint16(w.channels))
	h = binary.LittleEndian.AppendUint32(h, uint32(w.rate))
	h = binary.LittleEndian.AppendUint32(h, uint32(w.rate*w.channels*w.bits/8))
	h = binary.LittleEndian.AppendUint16(h, uint16(w.channels*w.bits/8))
	h = binary.LittleEndian.AppendUint16(h, uint16(w.bits))
	h = append(h, "data"...)
	h = binary.LittleEndian.AppendUint32(h, uint32(n))
	s := twoSlices{h, w.pcm[:n]}
	return io.NewSectionReader(s, 0, int64(len(h)+n))
}

// twoSlices reads a then b as one io.ReaderAt.
type twoSlices struct{ a, b []byte }

func (t twoSlices) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	if off < int64(len(t.a)) {
		n = copy(p, t.a[off:])
	}
	if n < len(p) {
		if o := off + int64(n) - int64(len(t.a)); o < int64(len(t.b)) {
			n += copy(p[n:], t.b[o:])
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// pcmToFloat converts one integer PCM sample of bits bits, as
// go-audio/wav gives it (8-bit ones unsigned, 0 to 255; the others
// signed), to float32 as llama.cpp's miniaudio (dr_wav's *_to_f32, asked
// for f32 frames) does: 8 bits x as x*(2/255) - 1 in float32, 16 bits as
// x/32768, 24 and 32 bits as x/2^23 and x/2^31 in float64 rounded to
// float32.
func pcmToFloat(v, bits int) float32 {
	switch bits {
	case 8:
		// Two roundings, as dr_wav's float arithmetic (no fused multiply-add).
		return float32(float32(v)*float32(0.00784313725490196078)) - 1
	case 16:
		return float32(v) * 0.000030517578125
	case 24:
		return float32(float64(v) * 0.00000011920928955078125)
	}
	return float32(float64(v) / 2147483648.0)
}
