package pipeline_test

import (
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/audio"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
)

// silentWAV is a WAV file of n samples of silence, 16-bit mono at rate.
func silentWAV(rate, n int) []byte {
	b := make([]byte, 44+2*n)
	copy(b, "RIFF")
	binary.LittleEndian.PutUint32(b[4:], uint32(36+2*n))
	copy(b[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(b[16:], 16)
	binary.LittleEndian.PutUint16(b[20:], 1)
	binary.LittleEndian.PutUint16(b[22:], 1)
	binary.LittleEndian.PutUint32(b[24:], uint32(rate))
	binary.LittleEndian.PutUint32(b[28:], uint32(2*rate))
	binary.LittleEndian.PutUint16(b[32:], 2)
	binary.LittleEndian.PutUint16(b[34:], 16)
	copy(b[36:], "data")
	binary.LittleEndian.PutUint32(b[40:], uint32(2*n))
	return b
}

// TestAudioAttachAfterLoad: an audio projector given to a loaded model
// (Model.AttachAudio, as the browser page gives it, its 750-position runs
// over the 512 of the largest prefill step the model was sized for)
// generates llama.cpp's greedy ids as one given at load does; a second
// projector is refused, and so is a WAV file longer than a prompt's 16
// chunks of 30 s, before any of it is encoded (the message names the
// chunks, where the run count check after encoding would not).
func TestAudioAttachAfterLoad(t *testing.T) {
	g := loadAudioGolden(t)
	clip, wav, _ := loadQwen2A(t)
	ck, err := gguf.Load(filepath.Join(qwen2aDir, "text-audio.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	m := load(t, ck, pipeline.Options{MaxCache: 2048})
	if m.HasAudio() {
		t.Fatal("HasAudio before a projector")
	}
	if err := m.AttachAudio(clip); err != nil {
		t.Fatal(err)
	}
	if !m.HasAudio() || m.HasVision() {
		t.Errorf("HasAudio %v, HasVision %v after AttachAudio", m.HasAudio(), m.HasVision())
	}
	if err := m.AttachAudio(clip); !errors.Is(err, pipeline.ErrNoAudio) {
		t.Errorf("a second projector: err %v, want ErrNoAudio", err)
	}
	got := collect(t, m.NewSession(), pipeline.Prompt{Text: g.Prompt, Audio: [][]byte{wav}}, pipeline.GenerateOptions{MaxTokens: len(g.GreedyIDs)})
	if !slices.Equal(got, g.GreedyIDs) {
		t.Errorf("greedy ids\n got %v\nwant %v (llama.cpp's)", got, g.GreedyIDs)
	}

	long := silentWAV(1000, 481000) // 481 s: 17 chunks
	var gerr error
	for _, e := range m.NewSession().Generate(context.Background(), pipeline.Prompt{Text: g.Prompt, Audio: [][]byte{long}}, pipeline.GenerateOptions{MaxTokens: 1}) {
		if e != nil {
			gerr = e
		}
	}
	if !errors.Is(gerr, pipeline.ErrPrompt) || !errors.Is(gerr, audio.ErrAudio) || !strings.Contains(gerr.Error(), "17 chunks of 30 s (at most 16: under 480 s)") {
		t.Errorf("481 s of audio: err %v, want ErrPrompt and ErrAudio naming 17 chunks", gerr)
	}
}

// TestVisionAttachAfterLoadRings: a vision projector given to a loaded
// model whose sliding-window layers keep ring caches sized for steps of
// 4 positions (PrefillSizes {4}; the tiny gemma3's window is 8) cannot
// run its 16-position images as one step: AttachVision refuses it
// (ErrNoVision, naming Options.MMProj), while the same projector given at
// load sizes the rings for it and generates llama.cpp's greedy ids.
func TestVisionAttachAfterLoadRings(t *testing.T) {
	clip, png, g := loadVision(t)
	ck, err := gguf.Load(testmodels.Path(t, "vision", "text-gemma3.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	m := load(t, ck, pipeline.Options{MaxCache: 128, PrefillSizes: []int{4}})
	if err := m.AttachVision(clip); !errors.Is(err, pipeline.ErrNoVision) || !strings.Contains(err.Error(), "Options.MMProj") {
		t.Errorf("AttachVision over rings for 4 positions: err %v, want ErrNoVision naming Options.MMProj", err)
	}
	if m.HasVision() {
		t.Error("HasVision after a refused projector")
	}
	m = load(t, ck, pipeline.Options{MaxCache: 128, PrefillSizes: []int{4}, MMProj: testmodels.Path(t, "vision", "mmproj-gemma3.gguf")})
	prompt := pipeline.Prompt{Text: "Look: " + pipeline.MediaMarker + " What is it?", Images: [][]byte{png}}
	if got := collect(t, m.NewSession(), prompt, pipeline.GenerateOptions{MaxTokens: len(g.GreedyIDs)}); !slices.Equal(got, g.GreedyIDs) {
		t.Errorf("greedy ids\n got %v\nwant %v (llama.cpp's)", got, g.GreedyIDs)
	}
}
