package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBench: every measured run generates exactly --generate tokens (stop
// tokens are ignored while benchmarking) and reports positive speeds.
func TestBench(t *testing.T) {
	task := convertStories(t, "int8")
	var rep benchReport
	out := mustRun(t, "", "bench", "-m", task, "--backend", "cpu", "--prompt-len", "40", "--generate", "48", "--reps", "3", "--json")
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rep.Runs) != 3 {
		t.Fatalf("%d runs, want 3", len(rep.Runs))
	}
	for i, r := range rep.Runs {
		if r.GeneratedTokens != 48 || r.PrefillTokens != 40 || r.PrefillTokensPerSec <= 0 || r.DecodeTokensPerSec <= 0 || r.TimeToFirstTokenMS <= 0 {
			t.Errorf("run %d: %+v", i, r)
		}
	}
	text := mustRun(t, "", "bench", "-m", task, "--backend", "cpu", "--prompt-len", "8", "--generate", "4", "--reps", "1")
	if !strings.Contains(text, "median") {
		t.Errorf("plain report lacks the median row:\n%s", text)
	}
	for _, args := range [][]string{
		{"bench", "--synthetic", "no-such-model"},
		{"bench", "-m", task, "--prompt-len", "1000", "--generate", "1000"},
		{"bench", "-m", task, "--reps", "0"},
	} {
		if _, _, err := runCLI(t, "", args...); err == nil {
			t.Errorf("gpurun %v: want an error", args)
		}
	}
}

// TestBenchProfile: --profile adds one profiled prefill and decode step
// whose kernels carry device time, and the matrix kernels their work; the
// CPU backend, which has no profiler, fails with a clear error.
func TestBenchProfile(t *testing.T) {
	requireBackend(t, "vulkan")
	task := convertStories(t, "int8")
	out := mustRun(t, "", "bench", "-m", task, "--backend", "vulkan", "--prompt-len", "9", "--generate", "2", "--reps", "1", "--profile", "--json")
	var rep benchReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rep.Profile) != 2 || rep.Profile[0].Step != "prefill" || rep.Profile[0].Tokens != 9 || rep.Profile[1].Step != "decode" || rep.Profile[1].Pos != 9 {
		t.Fatalf("profile steps: %+v", rep.Profile)
	}
	for _, st := range rep.Profile {
		var matrix bool
		for _, k := range st.Kernels {
			if strings.HasPrefix(k.Kernel, "matvec") || strings.HasPrefix(k.Kernel, "matmul") {
				matrix = true
				if k.Bytes <= 0 || k.FLOPs <= 0 || k.GBps <= 0 {
					t.Errorf("%s %s: no work counted: %+v", st.Step, k.Kernel, k)
				}
			}
		}
		if !matrix || st.TotalMS <= 0 {
			t.Errorf("%s: no matrix kernel or no device time: %+v", st.Step, st)
		}
	}
	if _, _, err := runCLI(t, "", "bench", "-m", task, "--backend", "cpu", "--prompt-len", "4", "--generate", "1", "--reps", "1", "--profile"); err == nil {
		t.Error("--profile on the CPU backend: want an error")
	}
}
