package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// runCLI runs gpurun in-process with args and stdin, returning stdout and stderr.
func runCLI(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRoot()
	root.SetArgs(args)
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// mustRun is runCLI failing the test on an error.
func mustRun(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := runCLI(t, stdin, args...)
	if err != nil {
		t.Fatalf("gpurun %s: %v\nstderr: %s", strings.Join(args, " "), err, errOut)
	}
	return out
}

func TestUnknownCommandAndMissingArgs(t *testing.T) {
	for _, args := range [][]string{
		{"frobnicate"},
		{"convert"},
		{"convert", "x.bin"},
		{"run"},
		{"run", "-m", "does-not-exist.task", "-p", "hi"},
		{"inspect", "does-not-exist.task"},
		{"tokenize"},
		{"run", "-m", "x", "-p", "a", "--prompt-ids", "1"},
		{"run", "-m", "x", "--backend", "nope", "-p", "a"},
	} {
		if _, _, err := runCLI(t, "", args...); err == nil {
			t.Errorf("gpurun %v: want an error", args)
		}
	}
}
