package main

import (
	"fmt"

	"github.com/gpurun/gpurun/internal/audio"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/pipeline"
)

// projector is what attachMMProj attached: the projector type, the
// positions each image takes (0 where it depends on the image, and for
// audio) and whether it takes audio (WAV files) rather than images.
type projector struct {
	Projector   string
	ImageTokens int
	Audio       bool
}

// attachMMProj reads a projector (llama.cpp's mmproj GGUF, the bytes of
// the file the page was given) and attaches it to m: a vision projector,
// after which m takes images (pipeline.Prompt.Images, one per
// pipeline.MediaMarker), or an audio one (a clip file with an audio
// encoder and no vision encoder, as Options.MMProj tells them apart),
// after which it takes WAV files (pipeline.Prompt.Audio).
func attachMMProj(m *pipeline.Model, data []byte) (projector, error) {
	f, err := gguf.Parse(data)
	if err != nil {
		return projector{}, fmt.Errorf("projector: %w", err)
	}
	if hasVision, ok := f.Get("clip.has_vision_encoder"); f.IsAudioClip() && (!ok || !boolValue(hasVision)) {
		clip, err := f.AudioClip()
		if err != nil {
			return projector{}, fmt.Errorf("audio projector: %w: %w", pipeline.ErrNoAudio, err)
		}
		if err := m.AttachAudio(clip); err != nil {
			return projector{}, err
		}
		return projector{Projector: clip.Projector, Audio: true}, nil
	}
	clip, err := f.Clip()
	if err != nil {
		return projector{}, fmt.Errorf("vision projector: %w", err)
	}
	if err := m.AttachVision(clip); err != nil {
		return projector{}, err
	}
	p := projector{Projector: clip.Projector}
	if clip.Projector != gguf.ProjectorLFM2 {
		p.ImageTokens = clip.ImageTokens()
	}
	return p, nil
}

func boolValue(v gguf.Value) bool { b, _ := v.Bool(); return b }

// audioPrompt is a chat prompt (chatPrompt) whose messages' media files
// are WAV files: Prompt.Audio rather than Prompt.Images.
func audioPrompt(p pipeline.Prompt) pipeline.Prompt {
	p.Images, p.Audio = nil, p.Images
	return p
}

// maxAudioBytes bounds a WAV file the page takes: past it the file and
// its samples would crowd wasm32's 4 GiB (a prompt takes under 480 s of
// audio: 184 MB of 48 kHz stereo float32).
const maxAudioBytes = 256 << 20

// checkMediaSize refuses a media file of n bytes the page cannot hold
// (audio over maxAudioBytes) before it is copied into wasm memory.
func checkMediaSize(kind string, i, n int) error {
	if kind == "audio" && n > maxAudioBytes {
		return fmt.Errorf("%s %d: a file of %d bytes, over the %d MiB the page reads (a prompt takes under 480 s of audio): %w",
			kind, i, n, maxAudioBytes>>20, audio.ErrAudio)
	}
	return nil
}
