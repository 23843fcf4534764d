package gguf

import (
	"fmt"

	"github.com/gpurun/gpurun/tensors"
)

// ProjectorQwen2A is the audio projector of Qwen2-Audio / Qwen2.5-Omni
// (clip.projector_type qwen2a; llama.cpp's legacy qwen2.5o reads as it
// for audio): a Whisper encoder, 1-D average pooling by 2 and one linear
// layer.
const ProjectorQwen2A = "qwen2a"

// AudioClip is an audio projector file of llama.cpp's clip format (an
// mmproj with clip.has_audio_encoder): the shape of its Whisper encoder
// and projector and its tensors, named as in the file. Only
// ProjectorQwen2A is read.
//
// Tensors are [out, in] row-major as a fusion graph takes them: the conv
// kernels a.conv1d.{1,2}.weight (ggml [3, in, out]) are [out, in*3], a row
// per output channel with the input channel outer and the tap inner; the
// conv biases (ggml [1, out]) are [out]; a.position_embd.weight is
// [Positions, Width].
type AudioClip struct {
	Projector     string
	MelBins       int // clip.audio.num_mel_bins: the conv's input channels
	Width         int // the encoder's embedding width
	FF            int
	Layers        int
	Heads         int
	Eps           float32 // LayerNorm epsilon
	Positions     int     // rows of the learned position table (>= 1500 for 30 s chunks)
	ProjectionDim int     // the text model's embedding width
	Tensors       []*tensors.Tensor
}

// OpenAudioClip reads an audio projector file (AudioClip).
func OpenAudioClip(path string) (*AudioClip, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	c, err := f.AudioClip()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// IsAudioClip reports whether the file is a clip file with an audio
// encoder (clip.has_audio_encoder true).
func (f *File) IsAudioClip() bool {
	if f.Architecture() != "clip" {
		return false
	}
	v, ok := f.Get("clip.has_audio_encoder")
	b, _ := v.Bool()
	return ok && b
}

// AudioClip reads the file as an audio projector. A file that is not of
// the clip architecture or has no audio encoder, a projector type other
// than qwen2a, a missing or out-of-range key and a tensor of the wrong
// shape are errors (ErrFormat, ErrUnsupported).
func (f *File) AudioClip() (*AudioClip, error) {
	if a := f.Architecture(); a != "clip" {
		return nil, fmt.Errorf("%w: general.architecture %q, want clip (an audio projector, --mmproj)", ErrFormat, a)
	}
	if !f.IsAudioClip() {
		return nil, fmt.Errorf("%w: clip file without an audio encoder (clip.has_audio_encoder)", ErrUnsupported)
	}
	str := func(k string) string { v, _ := f.Get(k); s, _ := v.Str(); return s }
	// clip.cpp: the default key, then the audio one of mixed-modality files.
	c := &AudioClip{Projector: str("clip.projector_type")}
	if c.Projector == "" {
		c.Projector = str("clip.audio.projector_type")
	}
	if c.Projector == "qwen2.5o" {
		c.Projector = ProjectorQwen2A
	}
	if c.Projector != ProjectorQwen2A {
		return nil, fmt.Errorf("%w: clip audio projector type %q (gpurun reads %q)", ErrUnsupported, c.Projector, ProjectorQwen2A)
	}
	var err error
	geti := func(k string, lo, hi int) int {
		if err != nil {
			return 0
		}
		v, ok := f.Get(k)
		if !ok {
			err = fmt.Errorf("%w: missing key %s", ErrFormat, k)
			return 0
		}
		n, ok := v.Int()
		if !ok || n < int64(lo) || n > int64(hi) {
			err = fmt.Errorf("%w: key %s = %v, want an integer in [%d, %d]", ErrFormat, k, v, lo, hi)
			return 0
		}
		return int(n)
	}
	const p = "clip.audio."
	c.MelBins = geti(p+"num_mel_bins", 1, 256)
	c.Width = geti(p+"embedding_length", 1, 1<<16)
	c.FF = geti(p+"feed_forward_length", 1, 1<<18)
	c.Layers = geti(p+"block_count", 1, 1<<10)
	c.Heads = geti(p+"attention.head_count", 1, 1<<10)
	c.ProjectionDim = geti(p+"projection_dim", 1, 1<<18)
	if err != nil {
		return nil, err
	}
	v, ok := f.Get(p + "attention.layer_norm_epsilon")
	e, okf := v.Float()
	if !ok || !okf || !(e > 0 && e < 1) {
		return nil, fmt.Errorf("%w: key %sattention.layer_norm_epsilon = %v", ErrFormat, p, v)
	}
	c.Eps = float32(e)
	if c.Width%c.Heads != 0 {
		return nil, fmt.Errorf("%w: width %d is not a multiple of %d heads", ErrFormat, c.Width, c.Heads)
	}
	pos := f.Tensor("a.position_embd.weight")
	if pos == nil || len(pos.Dims) != 2 || pos.Dims[0] != c.Width {
		return nil, fmt.Errorf("%w: clip qwen2a projector without an a.position_embd.weight of width %d", ErrFormat, c.Width)
	}
	c.Positions = pos.Dims[1]
	if c.Positions < 1500 || c.Positions > 1<<16 {
		return nil, fmt.Errorf("%w: clip qwen2a position table of %d rows (a 30 s chunk needs 1500)", ErrFormat, c.Positions)
	}
	return c, f.audioTensors(c)
}

// audioTensors reads a qwen2a projector's tensors, checking each shape
// (ggml order) against the hyperparameters:
//
//	a.conv1d.1.{weight [3, M, W], bias [1, W]}   a.conv1d.2.{weight [3, W, W], bias [1, W]}
//	a.position_embd.weight [W, P]
//	a.blk.i.{ln1,ln2}.{weight,bias} [W]  attn_{q,v,out}.{weight [W, W], bias [W]}  attn_k.weight [W, W] (no bias)
//	a.blk.i.ffn_up.{weight [W, FF], bias [FF]}  ffn_down.{weight [FF, W], bias [W]}
//	a.post_ln.{weight,bias} [W]   mm.a.fc.{weight [W, E], bias [E]}
func (f *File) audioTensors(c *AudioClip) error {
	W, FF, M := c.Width, c.FF, c.MelBins
	type want struct {
		name  string
		dims  []int
		shape []int // the shape gpurun gives it, when not the dims reversed
	}
	ws := []want{
		{"a.conv1d.1.weight", []int{3, M, W}, []int{W, 3 * M}}, {"a.conv1d.1.bias", []int{1, W}, []int{W}},
		{"a.conv1d.2.weight", []int{3, W, W}, []int{W, 3 * W}}, {"a.conv1d.2.bias", []int{1, W}, []int{W}},
		{"a.position_embd.weight", []int{W, c.Positions}, nil},
	}
	for l := range c.Layers {
		b := fmt.Sprintf("a.blk.%d.", l)
		for _, s := range []string{"ln1", "ln2"} {
			ws = append(ws, want{b + s + ".weight", []int{W}, nil}, want{b + s + ".bias", []int{W}, nil})
		}
		for _, s := range []string{"attn_q", "attn_k", "attn_v", "attn_out"} {
			ws = append(ws, want{b + s + ".weight", []int{W, W}, nil})
			if s != "attn_k" {
				ws = append(ws, want{b + s + ".bias", []int{W}, nil})
			}
		}
		ws = append(ws, want{b + "ffn_up.weight", []int{W, FF}, nil}, want{b + "ffn_up.bias", []int{FF}, nil},
			want{b + "ffn_down.weight", []int{FF, W}, nil}, want{b + "ffn_down.bias", []int{W}, nil})
	}
	ws = append(ws, want{"a.post_ln.weight", []int{W}, nil}, want{"a.post_ln.bias", []int{W}, nil},
		want{"mm.a.fc.weight", []int{W, c.ProjectionDim}, nil}, want{"mm.a.fc.bias", []int{c.ProjectionDim}, nil})
	if f.Tensor("a.blk.0.attn_k.bias") != nil {
		return fmt.Errorf("%w: clip qwen2a attn_k with a bias (Whisper's key projection has none)", ErrUnsupported)
	}
	for _, w := range ws {
		info := f.Tensor(w.name)
		if info == nil {
			return fmt.Errorf("%w: clip %s projector without tensor %q", ErrFormat, c.Projector, w.name)
		}
		if !equalDims(info.Dims, w.dims) {
			return fmt.Errorf("%w: clip tensor %q has dims %v, want %v (from the file's keys)", ErrFormat, w.name, info.Dims, w.dims)
		}
		t, err := f.readTensor(info, w.name)
		if err != nil {
			return err
		}
		if w.shape != nil {
			t.Shape = w.shape
		}
		if len(t.Shape) == 1 || w.name == "a.position_embd.weight" {
			if t, err = toF32(t); err != nil {
				return err
			}
		}
		c.Tensors = append(c.Tensors, t)
	}
	return nil
}
