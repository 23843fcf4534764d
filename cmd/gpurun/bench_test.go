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
