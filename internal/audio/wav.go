// Package audio reads audio for the audio encoders of llama.cpp's mmproj
// files: WAV files of PCM or float samples (wav.go) and the log-mel spectrogram
// Whisper-style encoders take, computed as llama.cpp's mtmd does
// (mel.go).
package audio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrAudio: audio data that cannot be read (not a WAV file, a sample
// format DecodeWAV does not read, more than two channels, no samples, too
// long).
var ErrAudio = errors.New("audio: bad audio")

// MaxSeconds bounds the length of the audio a WAV file may hold.
const MaxSeconds = 30 * 60

// DecodeWAV reads a RIFF WAVE file of integer PCM (format 1) of 8 bits
// (unsigned), 16, 24 or 32 bits, or of IEEE float (format 3) of 32 or 64
// bits (either also as WAVE_FORMAT_EXTENSIBLE with that subformat), mono
// or stereo, at any rate from 1 kHz to 384 kHz, into mono samples at
// SampleRate Hz as llama.cpp's mtmd-helper gets them from miniaudio: each
// sample converted to float32 as dr_wav does (pcmToFloat, toFloat), the two channels'
// mean, then resampled as miniaudio's linear resampler does (resample).
// ParseWAV reads the header; integer PCM samples are then decoded by
// github.com/go-audio/wav (wavlib.go), floats here. Other formats (A-law, mu-law, ADPCM, other sample sizes) are errors
// (ErrAudio).
func DecodeWAV(data []byte) ([]float32, error) {
	w, err := ParseWAV(data)
	if err != nil {
		return nil, err
	}
	return w.Decode()
}

// WAV is a WAV file's format and the bytes of its samples, as ParseWAV
// read them: what Decode will decode, and how many samples it gives
// (Samples), known before anything is decoded.
type WAV struct {
	tag      uint16
	channels int
	bits     int
	rate     int
	pcm      []byte
	frames   int
}

// Samples is the count of SampleRate samples Decode gives.
func (w *WAV) Samples() int {
	return int(expectedFrames(SampleRate, uint64(w.rate), uint64(w.frames)))
}

// Seconds is the file's length.
func (w *WAV) Seconds() float64 { return float64(w.frames) / float64(w.rate) }

// ParseWAV reads a WAV file's chunks and checks its format as DecodeWAV
// does, decoding nothing.
func ParseWAV(data []byte) (*WAV, error) {
	if len(data) < 12 || string(data[0:4]) != "RIFF" || string(data[8:12]) != "WAVE" {
		return nil, fmt.Errorf("%w: not a RIFF WAVE file", ErrAudio)
	}
	var (
		fmtOK          bool
		tag            uint16
		channels, bits int
		rate           uint32
		pcm            []byte
	)
	for p := 12; p+8 <= len(data); {
		id := string(data[p : p+4])
		size := int64(binary.LittleEndian.Uint32(data[p+4 : p+8]))
		body := int64(p + 8)
		end := body + size
		if end > int64(len(data)) {
			if id != "data" {
				return nil, fmt.Errorf("%w: WAV chunk %q of %d bytes past the end of the file", ErrAudio, id, size)
			}
			end = int64(len(data)) // a truncated data chunk: take what is there
		}
		b := data[body:end]
		switch id {
		case "fmt ":
			if len(b) < 16 {
				return nil, fmt.Errorf("%w: WAV fmt chunk of %d bytes", ErrAudio, len(b))
			}
			tag = binary.LittleEndian.Uint16(b[0:2])
			channels = int(binary.LittleEndian.Uint16(b[2:4]))
			rate = binary.LittleEndian.Uint32(b[4:8])
			bits = int(binary.LittleEndian.Uint16(b[14:16]))
			if tag == 0xFFFE { // WAVE_FORMAT_EXTENSIBLE: the subformat GUID's first two bytes are the tag
				if len(b) < 26 {
					return nil, fmt.Errorf("%w: WAV extensible fmt chunk of %d bytes", ErrAudio, len(b))
				}
				tag = binary.LittleEndian.Uint16(b[24:26])
			}
			if tag != wavPCM && tag != wavFloat {
				return nil, fmt.Errorf("%w: WAV format tag %d (gpurun reads integer PCM, tag 1, and IEEE float, tag 3)", ErrAudio, tag)
			}
			fmtOK = true
		case "data":
			pcm = b
		}
		p = int(end + end&1) // chunks are padded to even sizes
		if pcm != nil {
			break
		}
	}
	switch {
	case !fmtOK:
		return nil, fmt.Errorf("%w: WAV file without a fmt chunk", ErrAudio)
	case pcm == nil:
		return nil, fmt.Errorf("%w: WAV file without a data chunk", ErrAudio)
	case tag == wavPCM && bits != 8 && bits != 16 && bits != 24 && bits != 32:
		return nil, fmt.Errorf("%w: WAV of %d-bit PCM samples (gpurun reads 8, 16, 24 and 32 bits)", ErrAudio, bits)
	case tag == wavFloat && bits != 32 && bits != 64:
		return nil, fmt.Errorf("%w: WAV of %d-bit float samples (gpurun reads 32 and 64 bits)", ErrAudio, bits)
	case channels < 1 || channels > 2:
		return nil, fmt.Errorf("%w: WAV of %d channels (gpurun reads mono and stereo)", ErrAudio, channels)
	case rate < 1000 || rate > 384000:
		return nil, fmt.Errorf("%w: WAV at %d Hz (1 kHz to 384 kHz)", ErrAudio, rate)
	}
	n := len(pcm) / (bits / 8 * channels)
	if n == 0 {
		return nil, fmt.Errorf("%w: WAV file without samples", ErrAudio)
	}
	if n > MaxSeconds*int(rate) {
		return nil, fmt.Errorf("%w: WAV of %d samples (at most %d s)", ErrAudio, n, MaxSeconds)
	}
	return &WAV{tag: tag, channels: channels, bits: bits, rate: int(rate), pcm: pcm, frames: n}, nil
}

// Decode converts, mixes and resamples the samples (DecodeWAV): integer
// PCM read by go-audio/wav (decodePCM), floats here.
func (w *WAV) Decode() ([]float32, error) {
	out := make([]float32, w.frames)
	if w.tag == wavPCM {
		if err := w.decodePCM(out); err != nil {
			return nil, err
		}
		return resample(out, w.rate, SampleRate), nil
	}
	channels, size, pcm := w.channels, w.bits/8, w.pcm
	for i := range out {
		var s float32
		for c := range channels {
			o := size * (i*channels + c)
			v := toFloat(pcm[o : o+size])
			if !(math.Abs(float64(v)) <= maxFloatSample) { // NaN too
				return nil, fmt.Errorf("%w: WAV float sample %d is %g (at most %g in magnitude; samples are in [-1, 1])", ErrAudio, i*channels+c, v, float64(maxFloatSample))
			}
			s += v
		}
		out[i] = s / float32(channels)
	}
	return resample(out, w.rate, SampleRate), nil
}

// maxFloatSample bounds a float WAV's samples: past it (or NaN, or
// infinite) the spectrogram's powers overflow float32 and the encoder
// would see infinities.
const maxFloatSample = 1 << 16

// WAV format tags DecodeWAV reads.
const (
	wavPCM   = 1
	wavFloat = 3
)

// toFloat converts one IEEE float sample (len(b) bytes, little-endian) to
// float32 as llama.cpp's miniaudio does: 32-bit ones as they are, 64-bit
// ones rounded. (Integer PCM: pcmToFloat.)
func toFloat(b []byte) float32 {
	if len(b) == 8 {
		return float32(math.Float64frombits(binary.LittleEndian.Uint64(b)))
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(b))
}
