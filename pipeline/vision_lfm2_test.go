package pipeline_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/internal/vision"
	"github.com/gpurun/gpurun/pipeline"
)

// lfm2Dir holds the tiny lfm2 (LFM2-VL) text model + mmproj pair, its
// image and llama.cpp mtmd's outputs (testdata/vision/lfm2/README.md).
var lfm2Dir = filepath.Join("..", "testdata", "vision", "lfm2")

func loadLFM2(t *testing.T) (*gguf.Clip, []byte, visionGolden) {
	t.Helper()
	clip, err := gguf.OpenClip(filepath.Join(lfm2Dir, "mmproj-lfm2.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	png, err := os.ReadFile(filepath.Join(lfm2Dir, "image.png"))
	if err != nil {
		t.Fatal(err)
	}
	var g visionGolden
	testmodels.DecodeJSON(t, filepath.Join(lfm2Dir, "golden.json"), &g)
	return clip, png, g
}

// lfm2Tol bounds the largest difference from llama.cpp's lfm2 image
// embeddings (values up to ~12). Both sides evaluate GELU through ggml's
// fp16 table; an input that ggml's other summation order puts across an
// fp16 rounding step moves that GELU output by one fp16 ulp (~2e-3 near
// 3), which the projector's mm.2 (weights N(0, 0.2)) carries into the
// embedding. Tokens without such a flip agree within 1e-6; the largest
// flip here is 2.6e-3. Every convention ablation moves them by > 4.
const lfm2Tol = 5e-3

// TestLFM2EmbeddingsGolden: the lfm2 projector's embeddings of the
// 72x44 image (smart-resized to 88x56: 22x14 patches, 11x7 = 77 tokens)
// on the CPU backend equal llama.cpp mtmd's within lfm2Tol.
func TestVisionLFM2EmbeddingsGolden(t *testing.T) {
	clip, png, g := loadLFM2(t)
	if clip.Projector != gguf.ProjectorLFM2 || clip.PosSide != 8 || clip.PoolKernel != 2 || !clip.PostLN || !clip.InputNorm || clip.ProjHidden != 96 {
		t.Fatalf("clip %s: pos side %d, merge %d, post_ln %v, input norm %v, hidden %d", clip.Projector, clip.PosSide, clip.PoolKernel, clip.PostLN, clip.InputNorm, clip.ProjHidden)
	}
	enc, err := pipeline.NewVisionEncoder(cpu.New(cpu.Options{Threads: 1}), clip)
	if err != nil {
		t.Fatal(err)
	}
	got, err := enc.EncodeFile(context.Background(), png, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := g.imageEmbd(t)
	if len(got) != 77*32 || len(want) != len(got) {
		t.Fatalf("%d values, golden %d, want 77x32", len(got), len(want))
	}
	if d := testmodels.MaxAbsDiff(got, want); d > lfm2Tol {
		t.Fatalf("image embeddings differ from llama.cpp's by %g (tolerance %g)", d, lfm2Tol)
	} else {
		t.Logf("max |diff| from llama.cpp: %.3g", d)
	}
}

// TestLFM2ConventionsMatter: each of lfm2's conventions moves the
// embeddings far past lfm2Tol when done otherwise: the pixel-unshuffle
// grouping (row-major patch order in place of vision.MergeOrder), the
// NaFlex position resampling (nearest cell in place of antialiased
// bilinear), the smart resize's bilinear filter (nearest), and the
// file's mean/std (ImageNet's).
func TestVisionLFM2ConventionsMatter(t *testing.T) {
	clip, png, g := loadLFM2(t)
	enc, err := pipeline.NewVisionEncoder(cpu.New(cpu.Options{Threads: 1}), clip)
	if err != nil {
		t.Fatal(err)
	}
	img, err := vision.Decode(png, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := g.imageEmbd(t)
	ctx := context.Background()
	right, err := enc.PrepareLFM2(img)
	if err != nil {
		t.Fatal(err)
	}
	got, err := enc.EncodeLFM2(ctx, right)
	if err != nil {
		t.Fatal(err)
	}
	if d := testmodels.MaxAbsDiff(got, want); d > lfm2Tol {
		t.Fatalf("the right input is off by %g", d)
	}
	run := func(name string, in *pipeline.LFM2Input) {
		t.Helper()
		got, err := enc.EncodeLFM2(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		d := testmodels.MaxAbsDiff(got, want)
		if !(d > 100*lfm2Tol) {
			t.Errorf("%s: embeddings within %g of llama.cpp's (tolerance %g): the convention is not tested", name, d, lfm2Tol)
		}
		t.Logf("%s moves the embeddings by %.3g", name, d)
	}
	const P, W, M = 4, 32, 2
	gw, gh := right.GridW, right.GridH
	resized, err := vision.LFM2Resize(img, P, M)
	if err != nil {
		t.Fatal(err)
	}
	table := posTable(t, clip)
	order := vision.MergeOrder(gw, gh, M)
	with := func(r *vision.RGB, mean, std [3]float32, order []int, pos []float32) *pipeline.LFM2Input {
		p, err := vision.PatchRows(vision.Normalize(r, mean, std), r.W, r.H, P, order)
		if err != nil {
			t.Fatal(err)
		}
		return &pipeline.LFM2Input{GridW: gw, GridH: gh, Patches: p, Positions: pos}
	}
	// Pixel unshuffle: token t's blocks taken as 4 consecutive row-major patches.
	rowMajor := make([]int, gw*gh)
	for i := range rowMajor {
		rowMajor[i] = i
	}
	run("merge order", with(resized, clip.Mean, clip.Std, rowMajor, vision.ResizePositions(table, 8, W, gw, gh, rowMajor)))
	// Position table: the nearest cell of the 8x8 table for each patch.
	near := make([]float32, gw*gh*W)
	for r, idx := range order {
		y, x := idx/gw*8/gh, idx%gw*8/gw
		copy(near[r*W:(r+1)*W], table[(y*8+x)*W:])
	}
	run("position resampling", with(resized, clip.Mean, clip.Std, order, near))
	// Resize filter: nearest-neighbour to 88x56.
	nr := &vision.RGB{W: resized.W, H: resized.H, Pix: make([]uint8, len(resized.Pix))}
	for y := range nr.H {
		for x := range nr.W {
			copy(nr.Pix[(y*nr.W+x)*3:][:3], img.Pix[(y*img.H/nr.H*img.W+x*img.W/nr.W)*3:])
		}
	}
	run("resize filter", with(nr, clip.Mean, clip.Std, order, right.Positions))
	run("mean/std", with(resized, [3]float32{0.485, 0.456, 0.406}, [3]float32{0.229, 0.224, 0.225}, order, right.Positions))
}

func posTable(t *testing.T, clip *gguf.Clip) []float32 {
	t.Helper()
	for _, w := range clip.Tensors {
		if w.Name == "v.position_embd.weight" {
			xs, err := w.Float32()
			if err != nil {
				t.Fatal(err)
			}
			return xs
		}
	}
	t.Fatal("no position table")
	return nil
}

// TestVisionLFM2PromptGolden: the golden prompt as llama.cpp mtmd
// evaluates it on the lfm2 text model (text chunk, the image's 77
// embeddings decoded causally as one step, text chunk), then 16 greedy
// steps, on the CPU backend: the last prompt logits and every greedy
// step's logits equal llama.cpp's within 2e-5 (4.3e-6 seen) and the ids
// are its ids; a non-causal image decode (gemma3's rule; 2.2e-4) and
// embeddings scaled by 2 move the logits past that.
func TestVisionLFM2PromptGolden(t *testing.T) {
	_, _, g := loadLFM2(t)
	var gl struct {
		GreedyLogits [][]float64 `json:"greedy_logits"`
	}
	testmodels.DecodeJSON(t, filepath.Join(lfm2Dir, "golden.json"), &gl)
	const tol = 2e-5
	ids, rows := lfm2Prompt(t, false, 1)
	if !slices.Equal(ids, g.GreedyIDs) {
		t.Errorf("greedy ids\n got %v\nwant %v", ids, g.GreedyIDs)
	}
	if len(rows) != len(gl.GreedyLogits) {
		t.Fatalf("%d logit rows, golden %d", len(rows), len(gl.GreedyLogits))
	}
	worst := 0.0
	for i := range rows {
		worst = max(worst, testmodels.MaxAbsDiff(rows[i], gl.GreedyLogits[i]))
	}
	if d := testmodels.MaxAbsDiff(rows[0], g.LastLogits); d > tol || worst > tol {
		t.Errorf("logits differ from llama.cpp's by %g (last prompt) and %g (any greedy step); tolerance %g", d, worst, tol)
	} else {
		t.Logf("max |diff|: last prompt logits %.3g, greedy steps %.3g", d, worst)
	}
	if _, rows := lfm2Prompt(t, true, 1); !(testmodels.MaxAbsDiff(rows[0], g.LastLogits) > tol) {
		t.Errorf("a non-causal image decode is within %g of llama.cpp's logits", testmodels.MaxAbsDiff(rows[0], g.LastLogits))
	} else {
		t.Logf("a non-causal image decode moves the logits by %.3g", testmodels.MaxAbsDiff(rows[0], g.LastLogits))
	}
	if _, rows := lfm2Prompt(t, false, 2); !(testmodels.MaxAbsDiff(rows[0], g.LastLogits) > tol) {
		t.Errorf("doubled image embeddings are within %g of llama.cpp's logits", testmodels.MaxAbsDiff(rows[0], g.LastLogits))
	} else {
		t.Logf("doubled image embeddings move the logits by %.3g", testmodels.MaxAbsDiff(rows[0], g.LastLogits))
	}
}

// lfm2Prompt runs the golden prompt's chunks with programs of its own,
// the image decoded non-causally or not and its embeddings times scale,
// and returns the greedy ids and the logits of every greedy step.
func lfm2Prompt(t *testing.T, nonCausal bool, scale float32) ([]int, [][]float32) {
	t.Helper()
	clip, png, g := loadLFM2(t)
	be := cpu.New(cpu.Options{Threads: 1})
	enc, err := pipeline.NewVisionEncoder(be, clip)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	embd, err := enc.EncodeFile(ctx, png, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range embd {
		embd[i] *= scale
	}
	ck, err := gguf.Load(filepath.Join(lfm2Dir, "text-lfm2.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := be.LoadWeights(ctx, ck.Tensors)
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
			n := len(embd) / enc.Width()
			if n != c.NPos {
				t.Fatalf("%d image positions, golden %d", n, c.NPos)
			}
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
	dec := compile(arch.BuildOptions{Tokens: 1})
	var ids []int
	var rows [][]float32
	for range g.GreedyIDs {
		rows = append(rows, slices.Clone(logits))
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
	return ids, rows
}

// TestVisionLFM2Session: a session on the lfm2 text model with the lfm2
// projector (Options.MMProj) lays the prompt out as llama.cpp does
// (<|image_start|> <|img_thumbnail|>, 77 image positions, <|image_end|>)
// and generates llama.cpp's greedy ids; a second session agrees.
func TestVisionLFM2Session(t *testing.T) {
	_, png, g := loadLFM2(t)
	ck, err := gguf.Load(filepath.Join(lfm2Dir, "text-lfm2.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	m := load(t, ck, pipeline.Options{MaxCache: 128, MMProj: filepath.Join(lfm2Dir, "mmproj-lfm2.gguf")})
	prompt := pipeline.Prompt{Text: "Look: " + pipeline.MediaMarker + " What is it?", Images: [][]byte{png}}
	for range 2 {
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
				want = append(want, slices.Repeat([]int{-1}, c.NPos)...)
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
	}
}

// TestClipLFM2Refuses: an lfm2 projector without its scale factor or
// mm.1, with mm.input_norm's weight alone, or projecting to another
// width than mm.2's is a clear error; an image llama.cpp would tile is
// refused as a bad image (vision.ErrImage) when this patch-4 projector
// would make tiles of 4096 positions, before any encoding.
func TestClipLFM2Refuses(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(lfm2Dir, "mmproj-lfm2.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	rename := func(old, new string) []byte {
		i := bytes.Index(data, []byte(old))
		if i < 0 || len(old) != len(new) {
			t.Fatalf("%q not in the file", old)
		}
		out := bytes.Clone(data)
		copy(out[i:], new)
		return out
	}
	pd := append(binary.LittleEndian.AppendUint64(nil, uint64(len("clip.vision.projection_dim"))), "clip.vision.projection_dim"...)
	pd = append(pd, 4, 0, 0, 0)
	i := bytes.Index(data, pd)
	if i < 0 {
		t.Fatal("no projection_dim key")
	}
	wrongDim := bytes.Clone(data)
	wrongDim[i+len(pd)] = 33
	for name, tc := range map[string]struct {
		data []byte
		want error
	}{
		"scale factor":     {rename("clip.vision.projector.scale_factor", "clip.vision.projector.scale_factoR"), gguf.ErrFormat},
		"mm.1":             {rename("mm.1.weight", "mm.7.weight"), gguf.ErrFormat},
		"input norm alone": {rename("mm.input_norm.bias", "mm.input_norm.bia_"), gguf.ErrUnsupported},
		"projection dim":   {wrongDim, gguf.ErrFormat},
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
	clip, _, _ := loadLFM2(t)
	enc, err := pipeline.NewVisionEncoder(cpu.New(cpu.Options{Threads: 1}), clip)
	if err != nil {
		t.Fatal(err)
	}
	wide := &vision.RGB{W: 1100, H: 20, Pix: make([]uint8, 3*1100*20)}
	if _, err := enc.Encode(context.Background(), wide); !errors.Is(err, vision.ErrImage) {
		t.Errorf("a 1100-wide image: err %v, want vision.ErrImage (tiles of 4096 positions)", err)
	} else {
		t.Logf("a 1100-wide image: %v", err)
	}
}

// TestVisionLFM2MoreImages: two more shapes equal llama.cpp mtmd's
// embeddings within lfm2Tol (extra.json): wide.png (400x20 -> 400x24, a
// 100x6 patch grid: the 8x8 position table is downsampled in y, where
// the antialiasing filter widens) and large.png (160x120 -> 144x104 by
// the smart resize's max-pixels branch, a bilinear downscale).
func TestVisionLFM2MoreImages(t *testing.T) {
	clip, _, _ := loadLFM2(t)
	var x struct {
		Images []struct {
			File      string      `json:"file"`
			Grid      []int       `json:"patch_grid"`
			ImageEmbd [][]float64 `json:"image_embd"`
		} `json:"images"`
	}
	testmodels.DecodeJSON(t, filepath.Join(lfm2Dir, "extra.json"), &x)
	if len(x.Images) != 2 {
		t.Fatalf("%d images in extra.json", len(x.Images))
	}
	enc, err := pipeline.NewVisionEncoder(cpu.New(cpu.Options{Threads: 1}), clip)
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range x.Images {
		data, err := os.ReadFile(filepath.Join(lfm2Dir, im.File))
		if err != nil {
			t.Fatal(err)
		}
		img, err := vision.Decode(data, 0)
		if err != nil {
			t.Fatal(err)
		}
		in, err := enc.PrepareLFM2(img)
		if err != nil {
			t.Fatal(err)
		}
		if in.GridW != im.Grid[0] || in.GridH != im.Grid[1] {
			t.Errorf("%s: a %dx%d patch grid, llama.cpp's is %v", im.File, in.GridW, in.GridH, im.Grid)
			continue
		}
		got, err := enc.EncodeLFM2(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		var want []float64
		for _, r := range im.ImageEmbd {
			want = append(want, r...)
		}
		if d := testmodels.MaxAbsDiff(got, want); d > lfm2Tol {
			t.Errorf("%s: embeddings differ from llama.cpp's by %g (tolerance %g)", im.File, d, lfm2Tol)
		} else {
			t.Logf("%s: max |diff| %.3g", im.File, d)
		}
		if im.File != "wide.png" {
			continue
		}
		// The antialiasing matters where the table shrinks: plain
		// bilinear (2 taps, half-pixel centres, edges clamped) moves the
		// embeddings far past the tolerance.
		in.Positions = plainBilinear(posTable(t, clip), 8, 32, in.GridW, in.GridH, vision.MergeOrder(in.GridW, in.GridH, 2))
		got, err = enc.EncodeLFM2(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if d := testmodels.MaxAbsDiff(got, want); !(d > 100*lfm2Tol) {
			t.Errorf("wide.png: positions without antialiasing are within %g of llama.cpp's", d)
		} else {
			t.Logf("wide.png: positions without antialiasing move the embeddings by %.3g", d)
		}
	}
}

// plainBilinear resamples a side x side table (cols wide) to gw x gh with
// 2-tap bilinear weights at half-pixel centres, edges clamped, rows in
// order.
func plainBilinear(table []float32, side, cols, gw, gh int, order []int) []float32 {
	at := func(i, n int) (int, int, float32) {
		s := (float64(i)+0.5)*float64(side)/float64(n) - 0.5
		s = max(s, 0)
		i0 := min(int(s), side-1)
		return i0, min(i0+1, side-1), float32(s - float64(i0))
	}
	out := make([]float32, len(order)*cols)
	for r, idx := range order {
		y0, y1, fy := at(idx/gw, gh)
		x0, x1, fx := at(idx%gw, gw)
		for c := range cols {
			v := func(y, x int) float32 { return table[(y*side+x)*cols+c] }
			top := v(y0, x0)*(1-fx) + v(y0, x1)*fx
			bot := v(y1, x0)*(1-fx) + v(y1, x1)*fx
			out[r*cols+c] = top*(1-fy) + bot*fy
		}
	}
	return out
}

// TestVisionLFM2F16: the same projector with its matrices in F16 (as
// converters store them; mmproj-lfm2-f16.gguf) gives llama.cpp's
// embeddings of image.png from that file (f16.json) within 1e-2. Every
// token is off by 1.4e-3 to 5e-3 (values up to 12): ggml's CPU matmul
// with F16 weights rounds the activations to F16 too (src1 to its
// vec_dot_type; the conv's im2col takes the kernel's type), which the
// CPU backend's F16 dot products do not, a relative 2^-11. The
// conventions' effects (> 4) stay far past it.
func TestVisionLFM2F16(t *testing.T) {
	clip, err := gguf.OpenClip(filepath.Join(lfm2Dir, "mmproj-lfm2-f16.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	_, png, _ := loadLFM2(t)
	var g struct {
		ImageEmbd [][]float64 `json:"image_embd"`
	}
	testmodels.DecodeJSON(t, filepath.Join(lfm2Dir, "f16.json"), &g)
	enc, err := pipeline.NewVisionEncoder(cpu.New(cpu.Options{Threads: 1}), clip)
	if err != nil {
		t.Fatal(err)
	}
	got, err := enc.EncodeFile(context.Background(), png, 0)
	if err != nil {
		t.Fatal(err)
	}
	var want []float64
	for _, r := range g.ImageEmbd {
		want = append(want, r...)
	}
	const tol = 1e-2
	if d := testmodels.MaxAbsDiff(got, want); d > tol {
		t.Errorf("embeddings differ from llama.cpp's by %g (tolerance %g)", d, tol)
	} else {
		t.Logf("max |diff| %.3g", d)
	}
}

// TestVisionLFM2OddSizes: a 1x1 image (scaled up to 64x64: 64 tokens)
// and thin ones (1024x2 -> 1024x8: 128 tokens; 3x1000 -> 8x1000: 125)
// encode to that many finite embeddings.
func TestVisionLFM2OddSizes(t *testing.T) {
	clip, _, _ := loadLFM2(t)
	enc, err := pipeline.NewVisionEncoder(cpu.New(cpu.Options{Threads: 1}), clip)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ w, h, tokens int }{{1, 1, 64}, {1024, 2, 128}, {3, 1000, 125}} {
		img := &vision.RGB{W: c.w, H: c.h, Pix: make([]uint8, 3*c.w*c.h)}
		for i := range img.Pix {
			img.Pix[i] = uint8(i * 7)
		}
		got, err := enc.Encode(context.Background(), img)
		if err != nil {
			t.Errorf("%dx%d: %v", c.w, c.h, err)
			continue
		}
		if len(got) != c.tokens*enc.Width() {
			t.Errorf("%dx%d: %d embeddings, want %d", c.w, c.h, len(got)/enc.Width(), c.tokens)
		}
		for _, v := range got {
			if v != v || v > 1e30 || v < -1e30 {
				t.Fatalf("%dx%d: a non-finite embedding %v", c.w, c.h, v)
			}
		}
	}
}
