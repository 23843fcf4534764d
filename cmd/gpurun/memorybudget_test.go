package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurun/gpurun"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestInspectMemoryBudget: inspect gives, per KV cache type, the longest
// context whose cache alone fits --memory-budget (stories260K: 1280
// bytes a position in f32, 640 in f16) and the longest with the weights
// and activations as serve --memory-limit counts them, in the JSON and
// the text; --memory-budget 0 leaves them out, a bad size is an error.
func TestInspectMemoryBudget(t *testing.T) {
	bin := filepath.Join(testmodels.Dir(t), "stories260K.bin")
	s := inspectJSON(t, bin, "--memory-budget", "4MiB")
	kv := s.KVCache
	if kv == nil || kv.BudgetBytes != 4<<20 || kv.WeightBytes != 1040128 || len(kv.Types) != 2 || kv.ModelContext != 512 {
		t.Fatalf("kv summary %+v, want a 4 MiB budget, 1040128 bytes of weights, f32 and f16, a 512-position context", kv)
	}
	for _, tc := range []struct {
		typ   string
		alone int
	}{{"f32", 4 << 20 / 1280}, {"f16", 4 << 20 / 640}} {
		var got *kvBytes
		for i := range kv.Types {
			if kv.Types[i].Type == tc.typ {
				got = &kv.Types[i]
			}
		}
		if got == nil || got.BudgetKVPositions != tc.alone {
			t.Errorf("%s: %+v, want %d positions alone", tc.typ, got, tc.alone)
			continue
		}
		// With the weights: the longest cache Open's estimate fits, less
		// than what the cache alone would take.
		at, _ := gpurun.EstimateMemory(s.Config, kv.WeightBytes, got.BudgetPositions, tc.typ, tc.typ)
		past, _ := gpurun.EstimateMemory(s.Config, kv.WeightBytes, got.BudgetPositions+1, tc.typ, tc.typ)
		if got.BudgetPositions < 1 || got.BudgetPositions >= tc.alone || at.Total() > 4<<20 || past.Total() <= 4<<20 {
			t.Errorf("%s: %d positions with the weights (%d bytes, %d one more)", tc.typ, got.BudgetPositions, at.Total(), past.Total())
		}
	}
	text := mustRun(t, "", "inspect", bin, "--memory-budget", "4MiB")
	if !strings.Contains(text, "Largest context in 4.0 MiB") || !strings.Contains(text, "3276 positions alone") || !strings.Contains(text, "trained context is 512 positions") {
		t.Errorf("text without the budget's lines:\n%s", text)
	}
	if s := inspectJSON(t, bin, "--memory-budget", "0"); s.KVCache == nil || s.KVCache.BudgetBytes != 0 || s.KVCache.Types[0].BudgetPositions != 0 {
		t.Errorf("--memory-budget 0: %+v", s.KVCache)
	}
	for _, bad := range []string{"2XB", "-1GiB", "GiB", "1e30GiB"} {
		if _, _, err := runCLI(t, "", "inspect", bin, "--memory-budget", bad); err == nil || !strings.Contains(err.Error(), "want bytes or a number with a unit") {
			t.Errorf("--memory-budget %s: %v", bad, err)
		}
	}
}

// TestServeMemoryLimit: serve (as run and chat) refuses a model whose
// weights, KV cache and activations need more than --memory-limit before
// it serves, with what they need and what the limit has, and serves one
// within it; the same cache fits a larger limit.
func TestServeMemoryLimit(t *testing.T) {
	task := storiesTask(t)
	_, _, err := runCLI(t, "", "serve", task, "--addr", "127.0.0.1:0", "--backend", "cpu", "--activations", "f32", "--max-cache", "512", "--memory-limit", "1MiB")
	// An f32 cache on the CPU: 5 layers x K,V x 4 heads x 8 dims x 4 bytes x 512.
	for _, want := range []string{"does not fit in memory", "it needs ", "KV cache 640.0 KiB", "the memory limit has 1.0 MiB"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("serve --memory-limit 1MiB: %v, want an error saying %q", err, want)
		}
	}
	_, _, err = runCLI(t, "", "run", task, "-p", "x", "--max-tokens", "2", "--backend", "cpu", "--memory-limit", "64MiB")
	if err != nil {
		t.Errorf("run --memory-limit 64MiB: %v", err)
	}
	if _, _, err := runCLI(t, "", "serve", task, "--memory-limit", "lots"); err == nil || !strings.Contains(err.Error(), `--memory-limit`) {
		t.Errorf("serve --memory-limit lots: %v", err)
	}
}
