// Package audio reads audio for the audio encoders of llama.cpp's mmproj
// files: WAV files of 16-bit PCM (wav.go) and the log-mel spectrogram
// Whisper-style encoders take, computed as llama.cpp's mtmd does
// (mel.go).
package audio

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrAudio: audio data that cannot be read (not a WAV file, a format
// other than 16-bit PCM, more than two channels, no samples, too long).
var ErrAudio = errors.New("audio: bad audio")

// MaxSeconds bounds the length of the audio a WAV file may hold.
const MaxSeconds = 30 * 60

// DecodeWAV reads a RIFF WAVE file of 16-bit integer PCM (format 1, or
// WAVE_FORMAT_EXTENSIBLE with the PCM subformat), mono or stereo, at any
// rate from 1 kHz to 384 kHz, into mono samples at SampleRate Hz as
// llama.cpp's mtmd-helper gets them from miniaudio: each sample divided
// by 32768, the two channels' mean, then resampled as miniaudio's linear
// resampler does (resample). Other formats are errors (ErrAudio).
func DecodeWAV(data []byte) ([]float32, error) {
	if len(data) < 12 || string(data[0:4]) != "RIFF" || string(data[8:12]) != "WAVE" {
		return nil, fmt.Errorf("%w: not a RIFF WAVE file", ErrAudio)
	}
	var (
		fmtOK          bool
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
			tag := binary.LittleEndian.Uint16(b[0:2])
			channels = int(binary.LittleEndian.Uint16(b[2:4]))
			rate = binary.LittleEndian.Uint32(b[4:8])
			bits = int(binary.LittleEndian.Uint16(b[14:16]))
			if tag == 0xFFFE { // WAVE_FORMAT_EXTENSIBLE: the subformat GUID's first two bytes are the tag
				if len(b) < 26 {
					return nil, fmt.Errorf("%w: WAV extensible fmt chunk of %d bytes", ErrAudio, len(b))
				}
				tag = binary.LittleEndian.Uint16(b[24:26])
			}
			if tag != 1 {
				return nil, fmt.Errorf("%w: WAV format tag %d (gpurun reads 16-bit PCM, tag 1)", ErrAudio, tag)
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
	case bits != 16:
		return nil, fmt.Errorf("%w: WAV of %d-bit samples (gpurun reads 16-bit PCM)", ErrAudio, bits)
	case channels < 1 || channels > 2:
		return nil, fmt.Errorf("%w: WAV of %d channels (gpurun reads mono and stereo)", ErrAudio, channels)
	case rate < 1000 || rate > 384000:
		return nil, fmt.Errorf("%w: WAV at %d Hz (1 kHz to 384 kHz)", ErrAudio, rate)
	}
	n := len(pcm) / (2 * channels)
	if n == 0 {
		return nil, fmt.Errorf("%w: WAV file without samples", ErrAudio)
	}
	if n > MaxSeconds*int(rate) {
		return nil, fmt.Errorf("%w: WAV of %d samples (at most %d s)", ErrAudio, n, MaxSeconds)
	}
	out := make([]float32, n)
	for i := range out {
		var s float32
		for c := range channels {
			o := 2 * (i*channels + c)
			s += float32(int16(binary.LittleEndian.Uint16(pcm[o:o+2]))) / 32768
		}
		out[i] = s / float32(channels)
	}
	return resample(out, int(rate), SampleRate), nil
}
