package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestRunImage: `run --mmproj --image` with llama.cpp's raw prompt
// marker generates llama.cpp mtmd's greedy ids for the vision set; an
// image without --mmproj and a marker without an image are errors.
func TestRunImage(t *testing.T) {
	var g struct {
		GreedyIDs []int `json:"greedy_ids"`
	}
	testmodels.DecodeJSON(t, testmodels.Path(t, "vision", "golden.json"), &g)
	text := testmodels.Path(t, "vision", "text-gemma3.gguf")
	mmproj := testmodels.Path(t, "vision", "mmproj-gemma3.gguf")
	img := testmodels.Path(t, "vision", "image.png")
	args := []string{"run", text, "--backend", "cpu", "--max-cache", "128", "--temperature", "0", "--max-tokens", "16", "--json",
		"-p", "Look: <__media__> What is it?"}
	out := mustRun(t, "", append(args, "--mmproj", mmproj, "--image", img)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var res runResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.GeneratedIDs, g.GreedyIDs) {
		t.Errorf("ids\n got %v\nwant %v", res.GeneratedIDs, g.GreedyIDs)
	}
	if _, _, err := runCLI(t, "", append(args, "--image", img)...); err == nil || !strings.Contains(err.Error(), "--mmproj") {
		t.Errorf("an image without --mmproj: err %v", err)
	}
	if _, _, err := runCLI(t, "", append(args, "--mmproj", mmproj)...); err != nil {
		t.Errorf("a marker without an image is plain text: err %v", err)
	}
	if _, _, err := runCLI(t, "", append(args, "--mmproj", mmproj, "--image", img, "--image", img)...); err == nil || !strings.Contains(err.Error(), "markers for 2 images") {
		t.Errorf("two images, one marker: err %v", err)
	}
}
