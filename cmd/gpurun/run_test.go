package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// convertStories writes stories260K + tok512.model as a .task with quant.
func convertStories(t *testing.T, quant string) string {
	t.Helper()
	dir := testmodels.Dir(t)
	out := filepath.Join(t.TempDir(), "stories260K-"+quant+".task")
	mustRun(t, "", "convert", filepath.Join(dir, "stories260K.bin"), "--tokenizer", filepath.Join(dir, "tok512.model"), "--quant", quant, "-o", out, "-q")
	return out
}

// runJSON runs `gpurun run ... --json` and decodes the last stdout line.
func runJSON(t *testing.T, args ...string) runResult {
	t.Helper()
	out := mustRun(t, "", append([]string{"run", "--json"}, args...)...)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	var res runResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("last line of stdout is not the JSON result: %v\n%s", err, out)
	}
	if !strings.HasPrefix(out, res.Text) {
		t.Errorf("streamed text %q does not start with the result text %q", out, res.Text)
	}
	return res
}

// requireBackend skips a GPU backend that cannot open on a machine without a
// Vulkan driver, and fails under CI, where lavapipe is installed.
func requireBackend(t *testing.T, name string) {
	t.Helper()
	if name == "cpu" {
		return
	}
	b, err := gpurun.OpenBackend(context.Background(), name, gpurun.BackendOptions{})
	if err == nil {
		b.Close()
		return
	}
	if !errors.Is(err, gpu.ErrNoDevice) {
		t.Fatalf("%s: %v", name, err)
	}
	gputest.NoDevice(t, name, err)
}

// TestRunGolden: the f32 .task reproduces llama.cpp's prompt ids and 64
// greedy ids for every golden case, from text and from --prompt-ids, on
// every backend.
func TestRunGolden(t *testing.T) {
	task := convertStories(t, "f32")
	for _, backend := range []string{"cpu", "vulkan", "webgpu"} {
		t.Run(backend, func(t *testing.T) {
			requireBackend(t, backend)
			for _, c := range testmodels.StoriesCases(t) {
				res := runJSON(t, "-m", task, "--backend", backend, "-p", c.Prompt, "--temperature", "0", "--max-tokens", fmt.Sprint(len(c.GeneratedIDs)))
				if !slices.Equal(res.PromptIDs, c.PromptIDs) {
					t.Errorf("%s: prompt ids %v, golden %v", c.Name, res.PromptIDs, c.PromptIDs)
				}
				if !slices.Equal(res.GeneratedIDs, c.GeneratedIDs) {
					t.Errorf("%s: generated %v\ngolden %v", c.Name, res.GeneratedIDs, c.GeneratedIDs)
				}
				if res.Metrics.GeneratedTokens != len(c.GeneratedIDs) || res.Metrics.PromptTokens != len(c.PromptIDs) {
					t.Errorf("%s: metrics %+v", c.Name, res.Metrics)
				}
				ids := strings.Trim(strings.ReplaceAll(fmt.Sprint(c.PromptIDs), " ", ","), "[]")
				res = runJSON(t, "-m", task, "--backend", backend, "--prompt-ids", ids, "--temperature", "0", "--max-tokens", "8")
				if !slices.Equal(res.PromptIDs, c.PromptIDs) || !slices.Equal(res.GeneratedIDs, c.GeneratedIDs[:8]) {
					t.Errorf("%s --prompt-ids: prompt %v generated %v", c.Name, res.PromptIDs, res.GeneratedIDs)
				}
			}
		})
	}
}

// TestRunInt8Backends: int8 weights give the GPU backends the same greedy ids
// as the CPU backend.
func TestRunInt8Backends(t *testing.T) {
	task := convertStories(t, "int8")
	c := testmodels.StoriesCases(t)[0]
	args := []string{"-m", task, "-p", c.Prompt, "--temperature", "0", "--max-tokens", "64"}
	want := runJSON(t, append(args, "--backend", "cpu")...).GeneratedIDs
	for _, backend := range []string{"vulkan", "webgpu"} {
		t.Run(backend, func(t *testing.T) {
			requireBackend(t, backend)
			if got := runJSON(t, append(args, "--backend", backend)...).GeneratedIDs; !slices.Equal(got, want) {
				t.Errorf("int8 on %s: %v\ncpu: %v", backend, got, want)
			}
		})
	}
}

func TestRunErrors(t *testing.T) {
	task := convertStories(t, "f32")
	long := strings.Repeat("1,", 40) + "1"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"prompt longer than the cache", []string{"--max-cache", "16", "--prompt-ids", long}, "longer than the KV cache"},
		{"id outside the vocabulary", []string{"--prompt-ids", "1,999"}, "outside the vocabulary"},
		{"bad id list", []string{"--prompt-ids", "1,x"}, "bad id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runCLI(t, "", append([]string{"run", "-m", task, "--backend", "cpu"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}
