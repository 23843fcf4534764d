package pipeline_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/internal/vision"
	"github.com/gpurun/gpurun/pipeline"
)

// visionGolden is the part of ../shared/models/vision/golden.json these
// tests read: llama.cpp mtmd's run of the tiny gemma3 text model and
// mmproj on image.png.
type visionGolden struct {
	Chunks []struct {
		Type      string      `json:"type"`
		TokenIDs  []int       `json:"token_ids"`
		PosStart  int         `json:"pos_start"`
		NPos      int         `json:"n_pos"`
		EmbdShape []int       `json:"image_embd_shape"`
		ImageEmbd [][]float64 `json:"image_embd"`
	} `json:"chunks"`
	LastLogits []float64 `json:"last_logits"`
	GreedyIDs  []int     `json:"greedy_ids"`
}

func loadVision(t *testing.T) (*gguf.Clip, []byte, visionGolden) {
	t.Helper()
	clip, err := gguf.OpenClip(testmodels.Path(t, "vision", "mmproj-gemma3.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	png, err := os.ReadFile(testmodels.Path(t, "vision", "image.png"))
	if err != nil {
		t.Fatal(err)
	}
	var g visionGolden
	testmodels.DecodeJSON(t, testmodels.Path(t, "vision", "golden.json"), &g)
	return clip, png, g
}

func (g visionGolden) imageEmbd(t *testing.T) []float64 {
	for _, c := range g.Chunks {
		if c.Type == "image" {
			var flat []float64
			for _, row := range c.ImageEmbd {
				flat = append(flat, row...)
			}
			return flat
		}
	}
	t.Fatal("golden.json has no image chunk")
	return nil
}

// visionTol bounds the largest difference from llama.cpp's image
// embeddings (values of magnitude ~1; ggml sums in another order and
// rounds GELU through its f16 table as the CPU backend does).
const visionTol = 1e-5

// TestVisionEmbeddingsGolden: the gemma3 projector's embeddings of
// image.png on the CPU backend equal llama.cpp mtmd's within visionTol.
func TestVisionEmbeddingsGolden(t *testing.T) {
	clip, png, g := loadVision(t)
	enc, err := pipeline.NewVisionEncoder(cpu.New(cpu.Options{Threads: 1}), clip)
	if err != nil {
		t.Fatal(err)
	}
	if enc.Tokens() != 16 || enc.Width() != 64 {
		t.Fatalf("%d tokens of %d, want 16 of 64", enc.Tokens(), enc.Width())
	}
	got, err := enc.EncodeFile(context.Background(), png, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := g.imageEmbd(t)
	if d := testmodels.MaxAbsDiff(got, want); d > visionTol {
		t.Fatalf("image embeddings differ from llama.cpp's by %g (tolerance %g)", d, visionTol)
	} else {
		t.Logf("max |diff| from llama.cpp: %.3g", d)
	}
}

// TestVisionConventionsMatter: a wrong mean/std, a wrong patch order and
// a wrong resize filter each move the embeddings past visionTol.
func TestVisionConventionsMatter(t *testing.T) {
	clip, png, g := loadVision(t)
	enc, err := pipeline.NewVisionEncoder(cpu.New(cpu.Options{Threads: 1}), clip)
	if err != nil {
		t.Fatal(err)
	}
	img, err := vision.Decode(png, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := g.imageEmbd(t)
	S, P := clip.ImageSize, clip.PatchSize
	run := func(name string, patches []float32) {
		t.Helper()
		got, err := enc.EncodePatches(context.Background(), patches)
		if err != nil {
			t.Fatal(err)
		}
		d := testmodels.MaxAbsDiff(got, want)
		if !(d > visionTol) {
			t.Errorf("%s: embeddings within %g of llama.cpp's (tolerance %g): the convention is not tested", name, d, visionTol)
		}
		t.Logf("%s moves the embeddings by %.3g", name, d)
	}
	// ImageNet's mean and std in place of the file's 0.5/0.5.
	imagenet, err := vision.Patches(vision.Normalize(img, [3]float32{0.485, 0.456, 0.406}, [3]float32{0.229, 0.224, 0.225}), S, P)
	if err != nil {
		t.Fatal(err)
	}
	run("mean/std", imagenet)
	// Column-major patch order: row k holds patch (k % n, k / n).
	right, err := vision.Patches(vision.Normalize(img, clip.Mean, clip.Std), S, P)
	if err != nil {
		t.Fatal(err)
	}
	n, k := S/P, 3*P*P
	colMajor := make([]float32, len(right))
	for r := range n {
		for c := range n {
			copy(colMajor[(c*n+r)*k:(c*n+r+1)*k], right[(r*n+c)*k:])
		}
	}
	run("patch order", colMajor)
	// The image seen through another resize: half size and back with
	// nearest-neighbour sampling in place of the bilinear filter llama.cpp
	// uses, against the bilinear round trip the same sizes give.
	nearest := func(src *vision.RGB, w, h int) *vision.RGB {
		out := &vision.RGB{W: w, H: h, Pix: make([]uint8, 3*w*h)}
		for y := range h {
			for x := range w {
				sx, sy := x*src.W/w, y*src.H/h
				copy(out.Pix[(y*w+x)*3:(y*w+x)*3+3], src.Pix[(sy*src.W+sx)*3:])
			}
		}
		return out
	}
	bil := vision.FixedSize(vision.ResizeBilinear(img, S/2, S/2), S)
	near := nearest(nearest(img, S/2, S/2), S, S)
	pb, err := vision.Patches(vision.Normalize(bil, clip.Mean, clip.Std), S, P)
	if err != nil {
		t.Fatal(err)
	}
	pn, err := vision.Patches(vision.Normalize(near, clip.Mean, clip.Std), S, P)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := enc.EncodePatches(context.Background(), pb)
	if err != nil {
		t.Fatal(err)
	}
	en, err := enc.EncodePatches(context.Background(), pn)
	if err != nil {
		t.Fatal(err)
	}
	var d float64
	for i := range eb {
		d = max(d, math.Abs(float64(eb[i]-en[i])))
	}
	if !(d > visionTol) {
		t.Errorf("resize filter: bilinear and nearest embeddings within %g (tolerance %g)", d, visionTol)
	}
	t.Logf("resize filter moves the embeddings by %.3g", d)
}

// TestVisionPromptGolden: the prompt `Look: <__media__> What is it?` with
// image.png, as llama.cpp mtmd evaluates it (text chunk, the image's 16
// embeddings unscaled and decoded non-causally as one step, text chunk),
// then 16 greedy steps, on the CPU backend: the last prompt logits equal
// llama.cpp's within 1e-4 and the greedy ids are its ids.
func TestVisionPromptGolden(t *testing.T) {
	ids, d := visionPrompt(t, cpu.New(cpu.Options{Threads: 1}), true, 1)
	if d > 1e-4 {
		t.Errorf("last prompt logits differ from llama.cpp's by %g (tolerance 1e-4)", d)
	} else {
		t.Logf("last prompt logits: max |diff| %.3g", d)
	}
	_, _, golden := loadVision(t)
	if !slices.Equal(ids, golden.GreedyIDs) {
		t.Errorf("greedy ids\n got %v\nwant %v", ids, golden.GreedyIDs)
	}
	// Both conventions of the image's decode matter: a causal decode and
	// embeddings scaled as token embeddings are (by sqrt(E)) move the
	// logits past the tolerance.
	if _, d := visionPrompt(t, cpu.New(cpu.Options{Threads: 1}), false, 1); !(d > 1e-4) {
		t.Errorf("a causal image decode is within %g of llama.cpp's logits", d)
	} else {
		t.Logf("a causal image decode moves the logits by %.3g", d)
	}
	if _, d := visionPrompt(t, cpu.New(cpu.Options{Threads: 1}), true, 8); !(d > 1e-4) {
		t.Errorf("scaled image embeddings are within %g of llama.cpp's logits", d)
	} else {
		t.Logf("scaled image embeddings move the logits by %.3g", d)
	}
}

// visionPrompt runs the golden prompt on be (the encoder too) with the
// image decoded non-causally or not and its embeddings times scale,
// returning the 16 greedy ids and the largest difference of the last
// prompt logits from llama.cpp's.
func visionPrompt(t *testing.T, be gpu.Backend, nonCausal bool, scale float32) ([]int, float64) {
	t.Helper()
	clip, png, g := loadVision(t)
	enc, err := pipeline.NewVisionEncoder(be, clip)
	if err != nil {
		t.Fatal(err)
	}
	embd, err := enc.EncodeFile(context.Background(), png, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range embd {
		embd[i] *= scale
	}
	ck, err := gguf.Load(testmodels.Path(t, "vision", "text-gemma3.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := be.LoadWeights(context.Background(), ck.Tensors)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	var kv gpu.KVCache
	compile := func(opts arch.BuildOptions) gpu.Program {
		t.Helper()
		opts.MaxLen = 128
		graph, err := arch.Build(&ck.Config, opts)
		if err != nil {
			t.Fatal(err)
		}
		if kv == nil {
			if kv, err = be.NewKVCache(graph.KV); err != nil {
				t.Fatal(err)
			}
		}
		p, err := be.Compile(graph, w, kv)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ctx := context.Background()
	logits := make([]float32, ck.Config.VocabSize)
	pos := 0
	for _, c := range g.Chunks {
		if c.PosStart != pos {
			t.Fatalf("chunk at %d, want %d", c.PosStart, pos)
		}
		switch c.Type {
		case "text":
			p := compile(arch.BuildOptions{Tokens: len(c.TokenIDs)})
			if err := p.Run(ctx, testmodels.IDs32(c.TokenIDs), pos); err != nil {
				t.Fatal(err)
			}
			if _, err := p.Logits(logits); err != nil {
				t.Fatal(err)
			}
			pos += len(c.TokenIDs)
		case "image":
			n := enc.Tokens()
			p := compile(arch.BuildOptions{Tokens: n, Embeddings: true, NonCausal: nonCausal})
			if err := p.SetInput(embd); err != nil {
				t.Fatal(err)
			}
			if err := p.Run(ctx, make([]int32, n), pos); err != nil {
				t.Fatal(err)
			}
			pos += n
		}
	}
	d := testmodels.MaxAbsDiff(logits, g.LastLogits)
	dec := compile(arch.BuildOptions{Tokens: 1})
	var ids []int
	for range g.GreedyIDs {
		id := testmodels.Argmax(logits)
		ids = append(ids, id)
		if err := dec.Run(ctx, []int32{int32(id)}, pos); err != nil {
			t.Fatal(err)
		}
		if _, err := dec.Logits(logits); err != nil {
			t.Fatal(err)
		}
		pos++
	}
	return ids, d
}

// TestClipRefuses: an unknown projector type and keys that disagree with
// the tensors are clear errors, as is a text model's file given as a
// projector.
func TestClipRefuses(t *testing.T) {
	data, err := os.ReadFile(testmodels.Path(t, "vision", "mmproj-gemma3.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	patch := func(old, new []byte) []byte {
		i := bytes.Index(data, old)
		if i < 0 {
			t.Fatalf("%q not in the file", old)
		}
		out := bytes.Clone(data)
		copy(out[i:], new)
		return out
	}
	if f, err := gguf.Parse(data); err != nil {
		t.Fatal(err)
	} else if _, err := f.Clip(); err != nil {
		t.Fatalf("the file itself: %v", err)
	}
	key := func(k string) []byte { return append(binary.LittleEndian.AppendUint64(nil, uint64(len(k))), k...) }
	pd := append(key("clip.vision.projection_dim"), 4, 0, 0, 0) // uint32
	for name, tc := range map[string]struct {
		data []byte
		want error
	}{
		"projector type": {patch(append(key("clip.projector_type"), []byte("\x08\x00\x00\x00\x06\x00\x00\x00\x00\x00\x00\x00gemma3")...),
			append(key("clip.projector_type"), []byte("\x08\x00\x00\x00\x06\x00\x00\x00\x00\x00\x00\x00qwen3v")...)), gguf.ErrUnsupported},
		"projection dim": {patch(append(bytes.Clone(pd), 64), append(bytes.Clone(pd), 65)), gguf.ErrFormat},
		"patch size":     {patch(append(append(key("clip.vision.patch_size"), 4, 0, 0, 0), 8), append(append(key("clip.vision.patch_size"), 4, 0, 0, 0), 16)), gguf.ErrFormat},
	} {
		f, err := gguf.Parse(tc.data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := f.Clip(); !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", name, err, tc.want)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	if _, err := gguf.OpenClip(testmodels.Path(t, "vision", "text-gemma3.gguf")); !errors.Is(err, gguf.ErrFormat) {
		t.Errorf("a text model as projector: err %v", err)
	}
}

// TestVisionSession: a session given the golden prompt's text with its
// MediaMarker and image.png (Options.MMProj) prefills llama.cpp's tokens
// around the image and generates its 16 greedy ids; a second turn with the
// same image again reuses the cached positions; a text-only model, a
// marker count off the images, a broken image and too many images for the
// cache are clear errors.
func TestVisionSession(t *testing.T) {
	_, png, g := loadVision(t)
	ck, err := gguf.Load(testmodels.Path(t, "vision", "text-gemma3.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	mmproj := testmodels.Path(t, "vision", "mmproj-gemma3.gguf")
	m := load(t, ck, pipeline.Options{MaxCache: 128, MMProj: mmproj})
	prompt := pipeline.Prompt{Text: "Look: " + pipeline.MediaMarker + " What is it?", Images: [][]byte{png}}
	s := m.NewSession()
	got := collect(t, s, prompt, pipeline.GenerateOptions{MaxTokens: len(g.GreedyIDs)})
	if !slices.Equal(got, g.GreedyIDs) {
		t.Errorf("greedy ids\n got %v\nwant %v", got, g.GreedyIDs)
	}
	var want []int
	for _, c := range g.Chunks {
		if c.Type == "text" {
			want = append(want, c.TokenIDs...)
		} else {
			for range c.NPos {
				want = append(want, -1)
			}
		}
	}
	last := s.LastPrompt()
	if len(last) != len(want) {
		t.Fatalf("prompt of %d positions, want %d", len(last), len(want))
	}
	for i := range want {
		if (want[i] < 0) != (last[i] < 0) || want[i] >= 0 && want[i] != last[i] {
			t.Fatalf("prompt\n got %v\nwant %v (image positions -1)", last, want)
		}
	}
	// A new session with the same prompt: same ids.
	if got := collect(t, m.NewSession(), prompt, pipeline.GenerateOptions{MaxTokens: len(g.GreedyIDs)}); !slices.Equal(got, g.GreedyIDs) {
		t.Errorf("again: greedy ids\n got %v\nwant %v", got, g.GreedyIDs)
	}

	errOf := func(m *pipeline.Model, p pipeline.Prompt) error {
		for _, err := range m.NewSession().Generate(context.Background(), p, pipeline.GenerateOptions{MaxTokens: 1}) {
			if err != nil {
				return err
			}
		}
		return nil
	}
	textOnly := load(t, ck, pipeline.Options{MaxCache: 128})
	for name, tc := range map[string]struct {
		m    *pipeline.Model
		p    pipeline.Prompt
		want error
	}{
		"text-only model": {textOnly, prompt, pipeline.ErrNoVision},
		"markers":         {m, pipeline.Prompt{Text: "no marker", Images: [][]byte{png}}, pipeline.ErrPrompt},
		"broken image":    {m, pipeline.Prompt{Text: pipeline.MediaMarker, Images: [][]byte{png[:len(png)/2]}}, pipeline.ErrPrompt},
		"too many images": {m, pipeline.Prompt{Text: strings.Repeat(pipeline.MediaMarker, 8), Images: slices.Repeat([][]byte{png}, 8)}, pipeline.ErrPromptTooLong},
	} {
		err := errOf(tc.m, tc.p)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", name, err, tc.want)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	// A projector that does not fit the model: another width.
	other := testmodels.Path(t, "arch2", "qwen3.gguf")
	ck2, err := gguf.Load(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pipeline.FromCheckpoint(context.Background(), ck2, pipeline.Options{Backend: cpu.New(cpu.Options{}), MMProj: mmproj}); !errors.Is(err, pipeline.ErrNoVision) {
		t.Errorf("a projector on qwen3: err %v, want ErrNoVision", err)
	} else {
		t.Logf("a projector on qwen3: %v", err)
	}
}
