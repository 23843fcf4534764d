package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestRunActivations: --activations (else the file's policy from convert
// --activations) picks the KV cache type that run --json and bench report,
// auto meaning f16 on the GPU backends and f32 on the CPU; with an f16
// cache the greedy ids are still llama.cpp's (made with an f16 cache).
func TestRunActivations(t *testing.T) {
	dir := testmodels.Dir(t)
	autoTask := convertStories(t, "f32") // llama2.c imports with policy auto
	f32Task := filepath.Join(t.TempDir(), "stories260K-acts-f32.task")
	mustRun(t, "", "convert", filepath.Join(dir, "stories260K.bin"), "--tokenizer", filepath.Join(dir, "tok512.model"),
		"--quant", "f32", "--activations", "f32", "-o", f32Task, "-q")
	c := testmodels.StoriesCases(t)[0]
	tests := []struct {
		task, backend, flag, want string
	}{
		{autoTask, "cpu", "", "f32"},
		{autoTask, "cpu", "f16", "f16"},
		{autoTask, "vulkan", "", "f16"},
		{autoTask, "webgpu", "", "f16"},
		{autoTask, "vulkan", "f32", "f32"},
		{f32Task, "vulkan", "", "f32"},
		{f32Task, "cpu", "auto", "f32"},
		{f32Task, "webgpu", "auto", "f16"},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(tc.task)+"/"+tc.backend+"/"+tc.flag, func(t *testing.T) {
			requireBackend(t, tc.backend)
			args := []string{"-m", tc.task, "--backend", tc.backend, "-p", c.Prompt, "--temperature", "0", "--max-tokens", "32"}
			if tc.flag != "" {
				args = append(args, "--activations", tc.flag)
			}
			res := runJSON(t, args...)
			if res.KVCache != tc.want {
				t.Errorf("kv_cache %q, want %q", res.KVCache, tc.want)
			}
			if !slices.Equal(res.GeneratedIDs, c.GeneratedIDs[:32]) {
				t.Errorf("generated %v\ngolden %v", res.GeneratedIDs, c.GeneratedIDs[:32])
			}
		})
	}
	t.Run("bench", func(t *testing.T) {
		rep := benchJSON(t, "-m", autoTask, "--backend", "cpu", "--activations", "f16", "--prompt-len", "4", "--generate", "2", "--reps", "1")
		if kv := rep.Results[0].KVCache; kv != "f16" {
			t.Errorf("bench kv_cache %q, want f16", kv)
		}
	})
	t.Run("unknown policy", func(t *testing.T) {
		_, _, err := runCLI(t, "", "run", "-m", autoTask, "--backend", "cpu", "-p", "x", "--activations", "bf16")
		if err == nil || !strings.Contains(err.Error(), "--activations bf16: want one of auto, f32, f16") {
			t.Errorf("error %v, want one naming the flag and its values", err)
		}
	})
}
