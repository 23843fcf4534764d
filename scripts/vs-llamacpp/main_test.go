package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fake writes an executable shell script that prints the next of outs on
// each call (a counter file beside it remembers which).
func fake(t *testing.T, dir, name string, outs []string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("#!/bin/sh\nn=$(cat \"$0.n\" 2>/dev/null || echo 0)\necho $((n+1)) > \"$0.n\"\ncase $n in\n")
	for i, o := range outs {
		b.WriteString(string(rune('0'+i)) + ") cat <<'EOF'\n" + o + "\nEOF\n;;\n")
	}
	b.WriteString("*) echo 'too many calls' >&2; exit 3;;\nesac\n")
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(b.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func llamaJSON(pp, tg string) string {
	return `[{"n_prompt": 512, "n_gen": 0, "avg_ts": ` + pp + `, "samples_ts": [1]},
	{"n_prompt": 0, "n_gen": 128, "avg_ts": ` + tg + `}]`
}

func gpurunJSON(pp, tg string) string {
	return `{"results": [
	{"test": {"name": "pp512", "kind": "pp"}, "prefill_tokens_per_sec": {"median": ` + pp + `, "n": 1}},
	{"test": {"name": "tg128", "kind": "tg"}, "decode_tokens_per_sec": {"median": ` + tg + `, "n": 1}}]}`
}

func TestTable(t *testing.T) {
	dir := t.TempDir()
	lb := fake(t, dir, "llama-bench", []string{llamaJSON("500", "100"), llamaJSON("400", "300"), llamaJSON("600", "200")})
	gr := fake(t, dir, "gpurun", []string{gpurunJSON("250", "90"), gpurunJSON("300", "210"), gpurunJSON("900", "190")})
	var out, log bytes.Buffer
	err := run([]string{"-llama-bench", lb, "-gpurun", gr, "-rounds", "3", "m.gguf"}, &out, &log)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	// Medians: llama.cpp tg 200, pp 500; gpurun tg 190, pp 300.
	for _, want := range []string{
		"| m.gguf | tg128 | 200.0 | 190.0 | 0.95x | 100.0 300.0 200.0 ; 90.0 210.0 190.0 |",
		"| m.gguf | pp512 | 500.0 | 300.0 | 0.60x | 500.0 400.0 600.0 ; 250.0 300.0 900.0 |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	bad := fake(t, dir, "llama-bench", []string{"not json"})
	empty := fake(t, dir, "empty", []string{"[]"})
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no files", []string{"-llama-bench", "x", "-gpurun", "y"}, "no GGUF files"},
		{"no llama-bench", []string{"-llama-bench", "", "-gpurun", "y", "m.gguf"}, "-llama-bench"},
		{"no tests", []string{"-llama-bench", "x", "-gpurun", "y", "-pp", "0", "-tg", "0", "m.gguf"}, "at least one test"},
		{"bad json", []string{"-llama-bench", bad, "-gpurun", "y", "m.gguf"}, "reading its JSON"},
		{"empty json", []string{"-llama-bench", empty, "-gpurun", "y", "m.gguf"}, "no results"},
		{"missing binary", []string{"-llama-bench", filepath.Join(dir, "nope"), "-gpurun", "y", "m.gguf"}, "llama-bench on m.gguf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, log bytes.Buffer
			err := run(tc.args, &out, &log)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{4, 1}, 2.5}, {[]float64{5, 1, 3}, 3}} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
