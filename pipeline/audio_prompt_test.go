package pipeline_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
)

// audioGolden is golden.json of testdata/audio/qwen2a.
type audioGolden struct {
	Prompt string `json:"prompt"`
	Chunks []struct {
		Type     string `json:"type"`
		TokenIDs []int  `json:"token_ids"`
		PosStart int    `json:"pos_start"`
		NPos     int    `json:"n_pos"`
	} `json:"chunks"`
	NonCausal    bool        `json:"non_causal_audio_decode"`
	LastLogits   []float64   `json:"last_logits"`
	GreedyIDs    []int       `json:"greedy_ids"`
	GreedyLogits [][]float64 `json:"greedy_logits"`
}

func loadAudioGolden(t *testing.T) audioGolden {
	t.Helper()
	var g audioGolden
	testmodels.DecodeJSON(t, filepath.Join(qwen2aDir, "golden.json"), &g)
	return g
}

// TestAudioQwen2APromptGolden: the golden prompt as llama.cpp mtmd
// evaluates it on the tiny lfm2 text model (text chunk, the two 30 s
// chunks' 750 embeddings each decoded causally as one step, text chunk),
// then 16 greedy steps, on the CPU backend: the last prompt logits and
// every greedy step's logits equal llama.cpp's within 2e-5 and the ids
// are its ids; the chunks' embeddings swapped move the logits past that.
func TestAudioQwen2APromptGolden(t *testing.T) {
	g := loadAudioGolden(t)
	if g.NonCausal {
		t.Fatal("golden: non-causal audio decode")
	}
	const tol = 2e-5
	ids, rows := audioPrompt(t, g, false)
	if !slices.Equal(ids, g.GreedyIDs) {
		t.Errorf("greedy ids\n got %v\nwant %v", ids, g.GreedyIDs)
	}
	if len(rows) != len(g.GreedyLogits) {
		t.Fatalf("%d logit rows, golden %d", len(rows), len(g.GreedyLogits))
	}
	worst := 0.0
	for i := range rows {
		worst = max(worst, testmodels.MaxAbsDiff(rows[i], g.GreedyLogits[i]))
	}
	if d := testmodels.MaxAbsDiff(rows[0], g.LastLogits); d > tol || worst > tol {
		t.Errorf("logits differ from llama.cpp's by %g (last prompt) and %g (any greedy step); tolerance %g", d, worst, tol)
	} else {
		t.Logf("max |diff|: last prompt logits %.3g, greedy steps %.3g", d, worst)
	}
	if _, rows := audioPrompt(t, g, true); !(testmodels.MaxAbsDiff(rows[0], g.LastLogits) > tol) {
		t.Errorf("swapped audio chunks are within %g of llama.cpp's logits", testmodels.MaxAbsDiff(rows[0], g.LastLogits))
	} else {
		t.Logf("swapped audio chunks move the logits by %.3g", testmodels.MaxAbsDiff(rows[0], g.LastLogits))
	}
}

// audioPrompt runs the golden prompt's chunks with programs of its own
// (the audio chunks in swapped order when swap) and returns the greedy
// ids and the logits of every greedy step.
func audioPrompt(t *testing.T, g audioGolden, swap bool) ([]int, [][]float32) {
	t.Helper()
	clip, wav, _ := loadQwen2A(t)
	be := cpu.New(cpu.Options{Threads: 1})
	enc, err := pipeline.NewAudioEncoder(be, clip)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	runs, err := enc.EncodeWAV(ctx, wav)
	if err != nil {
		t.Fatal(err)
	}
	if swap {
		runs[0], runs[1] = runs[1], runs[0]
	}
	ck, err := gguf.Load(filepath.Join(qwen2aDir, "text-audio.gguf"))
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
		opts.MaxLen = 2048
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
	pos, run := 0, 0
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
		case "audio":
			embd := runs[run]
			run++
			n := len(embd) / enc.Width()
			if n != c.NPos {
				t.Fatalf("%d audio positions, golden %d", n, c.NPos)
			}
			p := compile(arch.BuildOptions{Tokens: n, Embeddings: true})
			if err := p.SetInput(embd); err != nil {
				t.Fatal(err)
			}
			if err := p.Run(ctx, make([]int32, n), pos); err != nil {
				t.Fatal(err)
			}
			pos += n
		default:
			t.Fatalf("chunk type %q", c.Type)
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

// TestAudioQwen2ASession: a session on the text model with the qwen2a
// projector (Options.MMProj) lays the prompt out as llama.cpp does
// (<|audio_bos|>, 2 x 750 audio positions, <|audio_eos|>) and generates
// llama.cpp's greedy ids, on the CPU and, when given, on WebGPU and
// Vulkan; audio for a model without an audio projector, images for one
// with it, and a bad WAV file are clear errors.
func TestAudioQwen2ASession(t *testing.T) {
	g := loadAudioGolden(t)
	_, wav, _ := loadQwen2A(t)
	ck, err := gguf.Load(filepath.Join(qwen2aDir, "text-audio.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	for _, c := range g.Chunks {
		if c.Type == "text" {
			want = append(want, c.TokenIDs...)
		} else {
			want = append(want, slices.Repeat([]int{-1}, c.NPos)...)
		}
	}
	prompt := pipeline.Prompt{Text: g.Prompt, Audio: [][]byte{wav}}
	for _, name := range []string{"cpu", "webgpu", "vulkan"} {
		t.Run(name, func(t *testing.T) {
			if name != "cpu" && testing.Short() {
				t.Skip("GPU backends: not in -short")
			}
			var be gpu.Backend
			if name != "cpu" {
				be = openBackend(t, name)
			}
			m := load(t, ck, pipeline.Options{Backend: be, MaxCache: 2048, MMProj: filepath.Join(qwen2aDir, "mmproj-qwen2a.gguf")})
			s := m.NewSession()
			got := collect(t, s, prompt, pipeline.GenerateOptions{MaxTokens: len(g.GreedyIDs)})
			if !slices.Equal(got, g.GreedyIDs) {
				t.Errorf("greedy ids\n got %v\nwant %v", got, g.GreedyIDs)
			}
			last := s.LastPrompt()
			if len(last) != len(want) {
				t.Fatalf("prompt of %d positions, want %d", len(last), len(want))
			}
			for i := range want {
				if (want[i] < 0) != (last[i] < 0) || want[i] >= 0 && want[i] != last[i] {
					t.Fatalf("prompt\n got %v\nwant %v (audio positions -1)", last, want)
				}
			}
			if name != "cpu" {
				return
			}
			for what, tc := range map[string]struct {
				p    pipeline.Prompt
				want error
			}{
				"image":   {pipeline.Prompt{Text: g.Prompt, Images: [][]byte{wav}}, pipeline.ErrNoVision},
				"bad wav": {pipeline.Prompt{Text: g.Prompt, Audio: [][]byte{wav[:20]}}, pipeline.ErrPrompt},
				"markers": {pipeline.Prompt{Text: "no marker", Audio: [][]byte{wav}}, pipeline.ErrPrompt},
			} {
				var err error
				for _, e := range m.NewSession().Generate(context.Background(), tc.p, pipeline.GenerateOptions{MaxTokens: 1}) {
					if e != nil {
						err = e
					}
				}
				if !errors.Is(err, tc.want) {
					t.Errorf("%s: err %v, want %v", what, err, tc.want)
				}
			}
			text := load(t, ck, pipeline.Options{MaxCache: 2048})
			var err error
			for _, e := range text.NewSession().Generate(context.Background(), prompt, pipeline.GenerateOptions{MaxTokens: 1}) {
				if e != nil {
					err = e
				}
			}
			if !errors.Is(err, pipeline.ErrNoAudio) {
				t.Errorf("audio for a text-only model: err %v, want ErrNoAudio", err)
			}
		})
	}
}
