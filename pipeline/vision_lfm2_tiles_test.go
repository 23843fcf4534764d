package pipeline_test

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/internal/vision"
	"github.com/gpurun/gpurun/pipeline"
)

// tiledGolden is testdata/vision/lfm2/tiled.json: llama.cpp mtmd's run
// of the patch-16 lfm2 projector on the 1100x1000 tiled.png (a 2x2 grid
// of 512-pixel tiles and a 512x480 thumbnail) in the prompt
// "Look: <__media__> What is it?" with text-lfm2.gguf.
type tiledGolden struct {
	EmbdStride int `json:"embd_stride"`
	Chunks     []struct {
		Type      string `json:"type"`
		TokenIDs  []int  `json:"token_ids"`
		PosStart  int    `json:"pos_start"`
		NPos      int    `json:"n_pos"`
		EmbdShape []int  `json:"image_embd_shape"`
	} `json:"chunks"`
	NPast        int         `json:"n_past_after_prompt"`
	LastLogits   []float64   `json:"last_logits"`
	GreedyIDs    []int       `json:"greedy_ids"`
	GreedyLogits [][]float64 `json:"greedy_logits"`
}

func loadTiled(t *testing.T) (*gguf.Clip, []byte, tiledGolden, [][]float32) {
	t.Helper()
	clip, err := gguf.OpenClip(filepath.Join(lfm2Dir, "mmproj-lfm2-p16.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	png, err := os.ReadFile(filepath.Join(lfm2Dir, "tiled.png"))
	if err != nil {
		t.Fatal(err)
	}
	var g tiledGolden
	testmodels.DecodeJSON(t, filepath.Join(lfm2Dir, "tiled.json"), &g)
	raw, err := os.ReadFile(filepath.Join(lfm2Dir, "tiled-embd.f32"))
	if err != nil {
		t.Fatal(err)
	}
	// Every EmbdStride-th row of each image run, runs in prompt order.
	var runs [][]float32
	off := 0
	for _, c := range g.Chunks {
		if c.Type != "image" {
			continue
		}
		n, e := c.EmbdShape[0], c.EmbdShape[1]
		stored := (n + g.EmbdStride - 1) / g.EmbdStride
		run := make([]float32, stored*e)
		for i := range run {
			if off+4 > len(raw) {
				t.Fatalf("tiled-embd.f32 holds %d bytes, too few", len(raw))
			}
			run[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[off:]))
			off += 4
		}
		runs = append(runs, run)
	}
	if off != len(raw) {
		t.Fatalf("tiled-embd.f32 holds %d bytes, the golden's runs %d", len(raw), off)
	}
	return clip, png, g, runs
}

// strided is every stride-th row (of width w) of rows.
func strided(rows []float32, w, stride int) []float32 {
	var out []float32
	for i := 0; i*w < len(rows); i += stride {
		out = append(out, rows[i*w:(i+1)*w]...)
	}
	return out
}

func maxDiff32(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var d float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

// TestVisionLFM2TiledEmbeddings: an 1100x1000 image (past llama.cpp's
// 1024-pixel tiling threshold) is encoded as llama.cpp's mtmd encodes it:
// a 2x2 grid of 512-pixel tiles cut from the image resized into 1024x1024
// with its aspect kept (1024x931 on black, offset 46), 256 embeddings
// each, then the 512x480 thumbnail's 240; every run equals llama.cpp's
// within lfm2Tol. Tiles taken column by column, or cut from the image
// stretched to 1024x1024, move them far past it.
func TestVisionLFM2TiledEmbeddings(t *testing.T) {
	clip, png, g, want := loadTiled(t)
	enc, err := pipeline.NewVisionEncoder(cpu.New(cpu.Options{Threads: 1}), clip)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	got, err := enc.EncodeFileRuns(ctx, png, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := enc.Width()
	if got.Cols != 2 || got.Rows != 2 || len(got.Runs) != 5 || len(want) != 5 {
		t.Fatalf("grid %dx%d, %d runs (golden %d), want 2x2 and 5", got.Cols, got.Rows, len(got.Runs), len(want))
	}
	for i, run := range got.Runs {
		if n := len(run) / w; n != g.Chunks[2*i+1].EmbdShape[0] {
			t.Fatalf("run %d: %d embeddings, golden %d", i, n, g.Chunks[2*i+1].EmbdShape[0])
		}
		if d := maxDiff32(strided(run, w, g.EmbdStride), want[i]); d > lfm2Tol {
			t.Errorf("run %d differs from llama.cpp's by %g (tolerance %g)", i, d, lfm2Tol)
		} else {
			t.Logf("run %d: max |diff| %.3g", i, d)
		}
	}
	// The ablations: tile i of another cut, against the golden's tile i.
	img, err := vision.Decode(png, 0)
	if err != nil {
		t.Fatal(err)
	}
	tile := func(src *vision.RGB, c, r int) []float32 {
		t.Helper()
		crop, err := vision.Crop(src, c*512, r*512, 512, 512)
		if err != nil {
			t.Fatal(err)
		}
		in, err := enc.PrepareLFM2(crop)
		if err != nil {
			t.Fatal(err)
		}
		e, err := enc.EncodeLFM2(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return strided(e, w, g.EmbdStride)
	}
	padded := vision.ResizePadCeil(img, 1024, 1024)
	if d := maxDiff32(tile(padded, 0, 1), want[1]); !(d > 20*lfm2Tol) {
		t.Errorf("tile (row 2, col 1) in place of (row 1, col 2) is within %g of llama.cpp's", d)
	} else {
		t.Logf("column-major tiles move the embeddings by %.3g", d)
	}
	stretched := vision.ResizeBilinear(img, 1024, 1024)
	if d := maxDiff32(tile(stretched, 0, 0), want[0]); !(d > 20*lfm2Tol) {
		t.Errorf("a tile of the stretched image is within %g of llama.cpp's", d)
	} else {
		t.Logf("a stretched refined image moves the first tile's embeddings by %.3g", d)
	}
}

// TestVisionLFM2TiledSession: a session with the patch-16 projector lays
// the tiled image out as llama.cpp's mtmd does (<|image_start|>, each
// tile after its <|img_row_R_col_C|> marker, here plain text since the
// tiny vocabulary has no such token, then <|img_thumbnail|>, the
// thumbnail and <|image_end|>: 1354 positions), generates llama.cpp's
// greedy ids, and its last prompt logits equal llama.cpp's within 2e-5.
// The same context with tiles (row 1, col 2) and (row 2, col 1)
// exchanged moves them past that.
func TestVisionLFM2TiledSession(t *testing.T) {
	_, png, g, _ := loadTiled(t)
	ck, err := gguf.Load(filepath.Join(lfm2Dir, "text-lfm2.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	m := load(t, ck, pipeline.Options{MaxCache: 1536, MMProj: filepath.Join(lfm2Dir, "mmproj-lfm2-p16.gguf")})
	prompt := pipeline.Prompt{Text: "Look: " + pipeline.MediaMarker + " What is it?", Images: [][]byte{png}}
	s := m.NewSession()
	n := min(4, len(g.GreedyIDs))
	if got := collect(t, s, prompt, pipeline.GenerateOptions{MaxTokens: n}); !slices.Equal(got, g.GreedyIDs[:n]) {
		t.Errorf("greedy ids\n got %v\nwant %v", got, g.GreedyIDs[:n])
	}
	var want []int
	var runs [][2]int // each image run's first position and length
	for _, c := range g.Chunks {
		if c.Type == "text" {
			want = append(want, c.TokenIDs...)
		} else {
			runs = append(runs, [2]int{len(want), c.NPos})
			want = append(want, slices.Repeat([]int{-1}, c.NPos)...)
		}
	}
	last := s.LastPrompt()
	if len(last) != len(want) || len(want) != g.NPast {
		t.Fatalf("prompt of %d positions, want %d (llama.cpp's n_past %d)", len(last), len(want), g.NPast)
	}
	for i := range want {
		if (want[i] < 0) != (last[i] < 0) || want[i] >= 0 && want[i] != last[i] {
			t.Fatalf("prompt position %d: %d, want %d (image positions -1)\n got %v\nwant %v", i, last[i], want[i], last, want)
		}
	}
	const tol = 2e-5
	logits, _, err := pipeline.PrefillLogits(m, last)
	if err != nil {
		t.Fatal(err)
	}
	if d := testmodels.MaxAbsDiff(logits, g.LastLogits); d > tol {
		t.Errorf("last prompt logits differ from llama.cpp's by %g (tolerance %g)", d, tol)
	} else {
		t.Logf("last prompt logits: max |diff| %.3g", d)
	}
	swapped := slices.Clone(last)
	a, b := runs[1], runs[2]
	if a[1] != b[1] {
		t.Fatalf("tiles of %d and %d positions", a[1], b[1])
	}
	copy(swapped[a[0]:a[0]+a[1]], last[b[0]:b[0]+b[1]])
	copy(swapped[b[0]:b[0]+b[1]], last[a[0]:a[0]+a[1]])
	logits, _, err = pipeline.PrefillLogits(m, swapped)
	if err != nil {
		t.Fatal(err)
	}
	if d := testmodels.MaxAbsDiff(logits, g.LastLogits); !(d > tol) {
		t.Errorf("exchanged tiles are within %g of llama.cpp's logits", d)
	} else {
		t.Logf("exchanged tiles move the logits by %.3g", d)
	}
}

// TestVisionLFM2TileMarkerTokens: where the vocabulary has the
// <|img_row_R_col_C|> markers as control tokens (as LFM2-VL's does; here
// ids 500-503 of the tiny vocabulary renamed), each tile's marker is that
// one id, as mtmd's special-token parsing makes it.
func TestVisionLFM2TileMarkerTokens(t *testing.T) {
	_, png, _, _ := loadTiled(t)
	ck, err := gguf.Load(filepath.Join(lfm2Dir, "text-lfm2.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if ck.Vocab == nil {
		t.Fatal("text-lfm2.gguf: no vocabulary")
	}
	markers := []string{"<|img_row_1_col_1|>", "<|img_row_1_col_2|>", "<|img_row_2_col_1|>", "<|img_row_2_col_2|>"}
	for i, s := range markers {
		ck.Vocab.Pieces[500+i], ck.Vocab.Types[500+i] = s, 3
	}
	m := load(t, ck, pipeline.Options{MaxCache: 1536, MMProj: filepath.Join(lfm2Dir, "mmproj-lfm2-p16.gguf")})
	ct := m.ControlTokens()
	s := m.NewSession()
	collect(t, s, pipeline.Prompt{Text: pipeline.MediaMarker, Images: [][]byte{png}}, pipeline.GenerateOptions{MaxTokens: 1})
	var got []int
	for _, id := range s.LastPrompt() {
		if id >= 0 {
			got = append(got, id)
		}
	}
	want := []int{ck.Config.BOS, ct["<|image_start|>"], 500, 501, 502, 503, ct["<|img_thumbnail|>"], ct["<|image_end|>"]}
	if !slices.Equal(got, want) {
		t.Errorf("the prompt's token ids (images left out)\n got %v\nwant %v", got, want)
	}
}
