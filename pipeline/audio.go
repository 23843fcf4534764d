package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/audio"
	"github.com/gpurun/gpurun/internal/gguf"

	"github.com/x448/float16"
)

// AudioEncoder turns audio into the embeddings an audio projector (an
// mmproj file of llama.cpp's clip format with an audio encoder; qwen2a)
// gives the text model: the log-mel spectrogram as llama.cpp's mtmd
// computes it (package audio), cut into 30 s chunks, each chunk through
// the Whisper encoder's three fusion graphs (arch.WhisperConv1Graph,
// WhisperEncoderGraph, WhisperProjectorGraph) on a backend. The weights
// are loaded and the programs compiled on the first chunk, once. Safe
// for concurrent use (chunks are encoded one at a time).
type AudioEncoder struct {
	be   gpu.Backend
	clip *gguf.AudioClip
	cfg  arch.WhisperConfig

	// Variant departs from llama.cpp's preprocessing (tests only).
	Variant audio.Variant
	// F32Convs departs from ggml's conv_1d (tests only): the convs'
	// im2col rows are not rounded to f16.
	F32Convs bool

	mu              sync.Mutex
	w               gpu.Weights // nil until the first chunk
	conv, enc, proj gpu.Program
}

// NewAudioEncoder builds the encoder of clip for be.
func NewAudioEncoder(be gpu.Backend, clip *gguf.AudioClip) (*AudioEncoder, error) {
	if clip.Projector != gguf.ProjectorQwen2A {
		return nil, fmt.Errorf("%w: clip audio projector %q", gguf.ErrUnsupported, clip.Projector)
	}
	if clip.Positions < audio.ChunkFrames/2 {
		return nil, fmt.Errorf("%w: a position table of %d rows for chunks of %d", gguf.ErrFormat, clip.Positions, audio.ChunkFrames/2)
	}
	cfg := arch.WhisperConfig{MelBins: clip.MelBins, Width: clip.Width, FF: clip.FF, Layers: clip.Layers, Heads: clip.Heads,
		Eps: clip.Eps, ProjectionDim: clip.ProjectionDim}
	return &AudioEncoder{be: be, clip: clip, cfg: cfg}, nil
}

// Width is the width of each embedding: the text model's.
func (e *AudioEncoder) Width() int { return e.clip.ProjectionDim }

// ChunkTokens is the count of embeddings (text positions) of one 30 s
// chunk: its frames halved by the second conv and again by the pool.
func (e *AudioEncoder) ChunkTokens() int { return audio.ChunkFrames / 4 }

// Mel is the log-mel spectrogram chunks of mono SampleRate samples, as
// the encoder takes them.
func (e *AudioEncoder) Mel(samples []float32) ([]audio.Mel, error) {
	return audio.WhisperMel(samples, e.clip.MelBins, e.Variant)
}

// EncodeWAV decodes a WAV file (audio.DecodeWAV) and encodes it: one run
// of ChunkTokens() embeddings (Width() values each, row by row) per 30 s
// chunk.
func (e *AudioEncoder) EncodeWAV(ctx context.Context, data []byte) ([][]float32, error) {
	s, err := audio.DecodeWAV(data)
	if err != nil {
		return nil, err
	}
	return e.Encode(ctx, s)
}

// Encode encodes mono SampleRate samples into one run of embeddings per
// chunk.
func (e *AudioEncoder) Encode(ctx context.Context, samples []float32) ([][]float32, error) {
	mels, err := e.Mel(samples)
	if err != nil {
		return nil, err
	}
	out := make([][]float32, len(mels))
	for i, m := range mels {
		if out[i], err = e.EncodeMel(ctx, m); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// EncodeMel runs the encoder on one chunk of the spectrogram.
func (e *AudioEncoder) EncodeMel(ctx context.Context, m audio.Mel) ([]float32, error) {
	c := e.cfg
	F := m.Frames
	if m.Bins != c.MelBins || F != audio.ChunkFrames || len(m.Data) != m.Bins*F {
		return nil, fmt.Errorf("pipeline: audio encoder: a chunk of %d bins x %d frames (%d values), want %d x %d", m.Bins, F, len(m.Data), c.MelBins, audio.ChunkFrames)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.prepare(ctx); err != nil {
		return nil, err
	}
	// conv1d_1: stride 1, padding 1 over the mel bins (bin-major input).
	x, err := runRows(ctx, e.conv, im2col(m.Data, m.Bins, F, 1, true, !e.F32Convs), F, F*c.Width)
	if err != nil {
		return nil, err
	}
	// conv1d_2: stride 2 over conv1's rows ([F, Width], frame-major).
	n := F / 2
	h, err := runRows(ctx, e.enc, im2col(x, c.Width, F, 2, false, !e.F32Convs), n, n*c.Width)
	if err != nil {
		return nil, err
	}
	// The pool's pairs: rows 2t, 2t+1 of h are row t of h read as [n/2, 2*Width].
	return runRows(ctx, e.proj, h, n/2, n/2*c.ProjectionDim)
}

// im2col builds a kernel-3, padding-1 conv's input rows, rounded to f16
// as ggml's conv_1d im2col is: output frame t's row holds channel ch's
// taps t*stride-1+k (k < 3) at ch*3+k, zero outside the input. in is
// [channels][frames] (channelMajor) or [frames][channels]; f16: the
// values rounded to f16 (ggml's conv_1d: llama.cpp's embeddings move by
// ~2e-3 without it).
func im2col(in []float32, channels, frames, stride int, channelMajor, f16 bool) []float32 {
	outN := (frames+2-3)/stride + 1
	out := make([]float32, outN*3*channels)
	for t := range outN {
		row := out[t*3*channels : (t+1)*3*channels]
		for k := range 3 {
			s := t*stride - 1 + k
			if s < 0 || s >= frames {
				continue
			}
			for ch := range channels {
				var v float32
				if channelMajor {
					v = in[ch*frames+s]
				} else {
					v = in[s*channels+ch]
				}
				if f16 {
					v = float16.Fromfloat32(v).Float32()
				}
				row[ch*3+k] = v
			}
		}
	}
	return out
}

// prepare loads the projector's weights and compiles the three programs,
// once.
func (e *AudioEncoder) prepare(ctx context.Context) error {
	if e.proj != nil {
		return nil
	}
	w, err := e.be.LoadWeights(ctx, e.clip.Tensors)
	if err != nil {
		return fmt.Errorf("pipeline: audio: %w", err)
	}
	F := audio.ChunkFrames
	c := e.cfg
	var ps []gpu.Program
	fail := func(err error) error {
		for _, p := range ps {
			p.Release()
		}
		w.Release()
		return fmt.Errorf("pipeline: audio encoder: %w", err)
	}
	for _, build := range []func() (*fusion.Graph, error){
		func() (*fusion.Graph, error) { return arch.WhisperConv1Graph(c, F) },
		func() (*fusion.Graph, error) { return arch.WhisperEncoderGraph(c, F/2) },
		func() (*fusion.Graph, error) { return arch.WhisperProjectorGraph(c, F/4) },
	} {
		g, err := build()
		if err != nil {
			return fail(err)
		}
		p, err := e.be.Compile(g, w, nil)
		if err != nil {
			return fail(err)
		}
		ps = append(ps, p)
	}
	e.w, e.conv, e.enc, e.proj = w, ps[0], ps[1], ps[2]
	return nil
}

// Close releases the encoder's programs and weights (a later chunk loads
// and compiles them again).
func (e *AudioEncoder) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.proj != nil {
		e.conv.Release()
		e.enc.Release()
		e.proj.Release()
		e.w.Release()
		e.conv, e.enc, e.proj, e.w = nil, nil, nil, nil
	}
}

// ErrNoAudio: a prompt with audio for a model without an audio projector
// (Options.MMProj), or a projector that does not fit the model.
var ErrNoAudio = errors.New("pipeline: audio needs an audio projector that fits the model (--mmproj)")

// Audio markers of Qwen2-Audio's vocabulary around each audio's
// embeddings (llama.cpp's mtmd, qwen2a), tokenized with special tokens
// parsed.
const (
	audioStart = "<|audio_bos|>"
	audioEnd   = "<|audio_eos|>"
)

// mediaEncoder is a projector's encoder as prompts use it: a media
// file's runs of embeddings.
type mediaEncoder interface {
	Width() int
	MaxTokens() int
	encodeRuns(ctx context.Context, data []byte) (*ImageRuns, error)
	Close()
}

func (e *VisionEncoder) encodeRuns(ctx context.Context, data []byte) (*ImageRuns, error) {
	return e.EncodeFileRuns(ctx, data, 0)
}

// MaxTokens is ChunkTokens: one run is one chunk.
func (e *AudioEncoder) MaxTokens() int { return e.ChunkTokens() }

// encodeRuns encodes a WAV file: one run per 30 s chunk, in order, with
// no markers between them (mtmd's audio chunks).
func (e *AudioEncoder) encodeRuns(ctx context.Context, data []byte) (*ImageRuns, error) {
	w, err := audio.ParseWAV(data)
	if err != nil {
		return nil, err
	}
	// A prompt's media file has at most 1<<runBits runs: refuse a longer
	// file before decoding or encoding any of it.
	if n := audio.Chunks(w.Samples()); n > 1<<runBits {
		return nil, fmt.Errorf("%w: %.1f s of audio, %d chunks of 30 s (at most %d: under %d s)", audio.ErrAudio,
			w.Seconds(), n, 1<<runBits, maxAudioSamples()/audio.SampleRate+1)
	}
	s, err := w.Decode()
	if err != nil {
		return nil, err
	}
	runs, err := e.Encode(ctx, s)
	if err != nil {
		return nil, err
	}
	return &ImageRuns{Runs: runs}, nil
}

func (v *visionModel) plural() string {
	if v.audio {
		return "audio files"
	}
	return "images"
}

func (v *visionModel) kind() string {
	if v.audio {
		return "audio"
	}
	return "image"
}

// attachAudio attaches the audio projector of f (at path): qwen2a, the
// model's width, its audio marker ids (control tokens, else the markers'
// text tokens as mtmd's parse_special tokenization gives them).
func (m *Model) attachAudio(f *gguf.File, path string) error {
	clip, err := f.AudioClip()
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNoAudio, path, err)
	}
	return m.attachAudioClip(clip, path)
}

// AttachAudio gives the model an audio projector already read (as
// Options.MMProj does from a file with an audio encoder; the browser page
// reads it from a Blob), checked against the model as Load checks it
// (ErrNoAudio). Call it before the model's first session, once.
func (m *Model) AttachAudio(clip *gguf.AudioClip) error {
	if m.vision != nil {
		return fmt.Errorf("%w: the model has a projector already", ErrNoAudio)
	}
	return m.attachAudioClip(clip, "the projector")
}

// attachAudioClip attaches clip, named path in errors.
func (m *Model) attachAudioClip(clip *gguf.AudioClip, path string) error {
	var err error
	if clip.ProjectionDim != m.cfg.Dim {
		return fmt.Errorf("%w: %s projects to width %d, the model's is %d", ErrNoAudio, path, clip.ProjectionDim, m.cfg.Dim)
	}
	v := &visionModel{cache: map[int64]*ImageRuns{}, thumb: -1, audio: true}
	if v.before, err = m.markerIDs(audioStart); err != nil {
		return fmt.Errorf("%w: %w", ErrNoAudio, err)
	}
	if v.after, err = m.markerIDs(audioEnd); err != nil {
		return fmt.Errorf("%w: %w", ErrNoAudio, err)
	}
	enc, err := NewAudioEncoder(m.backend, clip)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoAudio, err)
	}
	if err := m.fitMediaSteps(enc, ErrNoAudio); err != nil {
		return err
	}
	v.enc = enc
	m.vision = v
	return nil
}

// promptMedia is the media files of a prompt for the model's projector:
// its images, or its audio for an audio projector.
func (m *Model) promptMedia(p Prompt) ([][]byte, error) {
	v := m.vision
	switch {
	case len(p.Images) > 0 && len(p.Audio) > 0:
		return nil, fmt.Errorf("%w: a prompt with both images and audio (a model has one projector)", ErrPrompt)
	case v == nil && len(p.Audio) > 0:
		return nil, fmt.Errorf("%w: %d audio files for a text-only model", ErrNoAudio, len(p.Audio))
	case v == nil:
		return nil, fmt.Errorf("%w: %d images for a text-only model", ErrNoVision, len(p.Images))
	case v.audio && len(p.Images) > 0:
		return nil, fmt.Errorf("%w: %d images for a model with an audio projector", ErrNoVision, len(p.Images))
	case !v.audio && len(p.Audio) > 0:
		return nil, fmt.Errorf("%w: %d audio files for a model with a vision projector", ErrNoAudio, len(p.Audio))
	case v.audio:
		return p.Audio, nil
	}
	return p.Images, nil
}

func boolValue(v gguf.Value) bool { b, _ := v.Bool(); return b }

// maxAudioSamples is the most samples (at SampleRate) a prompt's audio
// file may hold: 1<<runBits chunks.
func maxAudioSamples() int {
	n := (1<<runBits+1)*audio.ChunkFrames*audio.Hop - audio.SampleRate*30 // the first length of one more chunk, about
	for audio.Chunks(n) > 1<<runBits {
		n -= audio.Hop
	}
	for audio.Chunks(n+1) <= 1<<runBits {
		n++
	}
	return n
}

// fitMediaSteps lets a projector attached after Load (AttachVision,
// AttachAudio; Load sizes the steps itself) run its runs of positions as
// one step each: the steps of a model's graphs are bounded by its ring
// size (Load's largest prefill step), which only ring caches (sliding
// window layers) hold to. Without ring caches the bound rises and every
// program compiled stays as it is; with them a longer run is an error
// (errNo) naming Options.MMProj, which sizes the rings at load.
func (m *Model) fitMediaSteps(enc mediaEncoder, errNo error) error {
	n := enc.MaxTokens()
	if m.ringTokens <= 0 || n <= m.ringTokens {
		return nil
	}
	if m.kvSpec.Ring != nil {
		return fmt.Errorf("%w: the projector's runs of %d positions are over the %d the model's sliding-window caches were sized for; give the projector when loading (Options.MMProj)", errNo, n, m.ringTokens)
	}
	m.ringTokens = n
	return nil
}
