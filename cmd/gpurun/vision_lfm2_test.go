package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestRunImageLFM2: `run --mmproj --image` with an lfm2 (LFM2-VL)
// projector, detected from the file, lays the prompt out as llama.cpp
// mtmd does (<|image_start|> <|img_thumbnail|>, the image's 77 positions,
// <|image_end|>) and generates its greedy ids (testdata/vision/lfm2), on
// the CPU, WebGPU and Vulkan backends.
func TestRunImageLFM2(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "vision", "lfm2")
	var g struct {
		GreedyIDs []int `json:"greedy_ids"`
	}
	testmodels.DecodeJSON(t, filepath.Join(dir, "golden.json"), &g)
	for _, backend := range []string{"cpu", "webgpu", "vulkan"} {
		t.Run(backend, func(t *testing.T) {
			requireBackend(t, backend)
			out := mustRun(t, "", "run", filepath.Join(dir, "text-lfm2.gguf"), "--backend", backend, "--max-cache", "128", "--temperature", "0",
				"--max-tokens", "16", "--json", "-p", "Look: <__media__> What is it?",
				"--mmproj", filepath.Join(dir, "mmproj-lfm2.gguf"), "--image", filepath.Join(dir, "image.png"))
			lines := strings.Split(strings.TrimSpace(out), "\n")
			var res runResult
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.GeneratedIDs, g.GreedyIDs) {
				t.Errorf("ids\n got %v\nwant %v", res.GeneratedIDs, g.GreedyIDs)
			}
			p := res.PromptIDs
			if len(p) != 95 || p[6] != 510 || p[7] != 509 || p[8] != -1 || p[84] != -1 || p[85] != 511 {
				t.Errorf("prompt ids %v, want the image's 77 positions as -1 after 510 509 and before 511", p)
			}
		})
	}
}
