package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gpurun/gpurun"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/checkpoint"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/internal/lora"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/internal/tuning"
)

// TestVariants serves the tiny llama bare and with two LoRA adapters
// (pipeline.FromCheckpointVariants: one copy of the base weights) and
// sends the three requests at once, twice over: each gets the text of
// llama.cpp's greedy ids with its adapters (testdata/lora), and
// /v1/models lists the three ids. The variants share their decode rounds
// (AlwaysBatch): some round must have run rows of different adapters.
func TestVariants(t *testing.T) {
	for _, name := range []string{"cpu", "vulkan", "webgpu"} {
		t.Run(name, func(t *testing.T) { variantsCase(t, name) })
	}
}

func variantsCase(t *testing.T, backend string) {
	ck, err := gguf.Load(testmodels.Path(t, "arch", "llama.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(testmodels.Root(t), "testdata", "lora")
	adapter := func(name string, scale float32) []lora.Applied {
		a, err := checkpoint.LoadLoRA(filepath.Join(dir, name+".gguf"), &ck.Config)
		if err != nil {
			t.Fatal(err)
		}
		return []lora.Applied{{Adapter: a, Scale: scale}}
	}
	var be gpu.Backend = cpu.New(cpu.Options{})
	if backend != "cpu" {
		var err error
		be, err = gpurun.OpenBackend(context.Background(), backend, gpurun.BackendOptions{})
		if err != nil && !errors.Is(err, gpu.ErrNoDevice) {
			t.Fatalf("%s: %v", backend, err)
		}
		gputest.NoDevice(t, backend, err)
	}
	t.Cleanup(func() { be.Close() })
	// f32 activations: llama.cpp's goldens are f32 runs.
	models, err := pipeline.FromCheckpointVariants(context.Background(), ck, pipeline.Options{Backend: be, MaxCache: 64, Activations: "f32"}.WithTuning(tuning.Options{AlwaysBatch: true, GatherRows: 3}),
		[][]lora.Applied{nil, adapter("llama_r4", 1), adapter("llama_r16", 0.5)})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range models {
		t.Cleanup(func() { m.Close() })
	}
	s, err := New(Config{Model: models[0], ModelID: "llama", Variants: map[string]*pipeline.Model{"llama:r4": models[1], "llama:r16": models[2]}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)

	ids := []string{"llama", "llama:r4", "llama:r16"}
	goldens := []testmodels.ArchGolden{testmodels.Arch(t, "llama")}
	for _, name := range []string{"llama_r4", "llama_r16_half"} {
		var g testmodels.ArchGolden
		testmodels.DecodeJSON(t, filepath.Join(dir, name+".golden.json"), &g)
		goldens = append(goldens, g)
	}
	// Each round sends the three at once. The model is so small that one
	// request's generation can end before the next one's arrives (a CI
	// run saw 8 rounds of 552 one-row steps), so until a round has mixed
	// adapters the batcher waits for three rows (GatherRows, at most 2 s
	// a round); a few more rounds run if none did (at most 8).
	for round := 0; round < 2 || models[0].Rounds().Mixed == 0 && round < 8; round++ {
		var wg sync.WaitGroup
		for i, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				g := goldens[i]
				want, err := models[i].Decode(g.GreedyIDs)
				if err != nil {
					t.Error(err)
					return
				}
				prompt := strings.Trim(strings.ReplaceAll(fmt.Sprint(g.PromptIDs), " ", ","), "[]")
				req := fmt.Sprintf(`{"model":%q,"prompt":[%s],"temperature":0,"max_tokens":%d}`, id, prompt, len(g.GreedyIDs))
				resp, data := post(t, ts.URL+"/v1/completions", req)
				var c completion
				if resp.StatusCode != 200 || json.Unmarshal(data, &c) != nil || len(c.Choices) != 1 {
					t.Errorf("round %d, %s: status %d: %s", round, id, resp.StatusCode, data)
					return
				}
				// Decoding the ids alone drops a leading space (the start of
				// a SentencePiece text); the continuation keeps it.
				if c.Model != id || strings.TrimPrefix(c.Choices[0].Text, " ") != strings.TrimPrefix(want, " ") {
					t.Errorf("round %d, %s: model %q text\n got %q\nwant %q", round, id, c.Model, c.Choices[0].Text, want)
				}
			}()
		}
		wg.Wait()
	}
	st := models[0].Rounds()
	t.Logf("rounds %+v", st)
	if st.Mixed == 0 {
		t.Errorf("no decode round ran rows of different adapters: %+v", st)
	}
	resp, data := get(t, ts.URL+"/v1/models")
	if resp.StatusCode != 200 || !strings.Contains(string(data), `"id":"llama"`) || !strings.Contains(string(data), `"id":"llama:r16"`) || !strings.Contains(string(data), `"id":"llama:r4"`) {
		t.Errorf("/v1/models: %s", data)
	}
	resp, _ = get(t, ts.URL+"/v1/models/llama:r4")
	if resp.StatusCode != 200 {
		t.Errorf("/v1/models/llama:r4: %d", resp.StatusCode)
	}
	resp, data = post(t, ts.URL+"/v1/completions", `{"model":"llama:nope","prompt":"x"}`)
	// The error lists what is served: the model and its adapters.
	if resp.StatusCode != 404 || !strings.Contains(string(data), "model_not_found") ||
		!strings.Contains(string(data), `\"llama\", \"llama:r16\", \"llama:r4\"`) {
		t.Errorf("unknown adapter: %d %s", resp.StatusCode, data)
	}
}

func get(t testing.TB, url string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, data
}
