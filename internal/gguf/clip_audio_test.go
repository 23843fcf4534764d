package gguf

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

var qwen2aPath = filepath.Join("..", "..", "testdata", "audio", "qwen2a", "mmproj-qwen2a.gguf")

// TestAudioClipQwen2A reads the tiny qwen2a mmproj: its shape, the conv
// kernels as [out, in*3] matrices and the conv biases as vectors; a
// vision mmproj is not an audio one, and a text model not a clip file.
func TestAudioClipQwen2A(t *testing.T) {
	c, err := OpenAudioClip(qwen2aPath)
	if err != nil {
		t.Fatal(err)
	}
	if c.Projector != ProjectorQwen2A || c.MelBins != 128 || c.Width != 32 || c.FF != 64 || c.Layers != 2 || c.Heads != 4 ||
		c.Positions != 1500 || c.ProjectionDim != 32 || c.Eps != 1e-5 {
		t.Fatalf("clip %+v", c)
	}
	shapes := map[string][]int{}
	for _, w := range c.Tensors {
		shapes[w.Name] = w.Shape
	}
	for name, want := range map[string][]int{
		"a.conv1d.1.weight": {32, 384}, "a.conv1d.1.bias": {32}, "a.conv1d.2.weight": {32, 96},
		"a.position_embd.weight": {1500, 32}, "mm.a.fc.weight": {32, 32},
	} {
		if got := shapes[name]; !equalDims(got, want) {
			t.Errorf("%s: shape %v, want %v", name, got, want)
		}
	}
	if _, ok := shapes["a.blk.0.attn_k.bias"]; ok || len(c.Tensors) != 4+1+2*15+4 {
		t.Errorf("%d tensors (want 39, no attn_k bias)", len(c.Tensors))
	}
	if _, err := OpenAudioClip(filepath.Join("..", "..", "testdata", "vision", "lfm2", "mmproj-lfm2.gguf")); !errors.Is(err, ErrUnsupported) {
		t.Errorf("a vision mmproj: err %v, want ErrUnsupported", err)
	}
	if _, err := OpenAudioClip(filepath.Join("..", "..", "testdata", "audio", "qwen2a", "text-audio.gguf")); !errors.Is(err, ErrFormat) {
		t.Errorf("a text model: err %v, want ErrFormat", err)
	}
}

// FuzzAudioClip: any bytes given as an audio projector (seeded with the
// qwen2a mmproj, whole, cut short and with a byte changed) give an
// AudioClip or an error, never a panic.
func FuzzAudioClip(f *testing.F) {
	data, err := os.ReadFile(qwen2aPath)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add(data[:len(data)/2])
	for _, at := range []int{100, 300, 700, 1500, 2500} {
		b := append([]byte(nil), data...)
		b[at] ^= 0x5a
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			return
		}
		if c, err := p.AudioClip(); err == nil && len(c.Tensors) == 0 {
			t.Fatal("an audio clip without tensors")
		}
	})
}
