package main

import (
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/badsampling"
)

// TestBadSamplingFlags runs the shared table of invalid sampling values
// (internal/badsampling, also run through the Go API and the HTTP API)
// through the flags of every command taking them: the sampling flags of
// run and chat, the counts of bench and serve. Each is an error naming the
// flag and the value, before the model (which does not exist) is opened.
func TestBadSamplingFlags(t *testing.T) {
	const model = "/nonexistent/model.gguf"
	flags := map[badsampling.Param][][]string{
		badsampling.Temperature: {{"run", "-p", "x"}, {"chat"}},
		badsampling.TopP:        {{"run", "-p", "x"}, {"chat"}},
		badsampling.TopK:        {{"run", "-p", "x"}, {"chat"}},
		badsampling.Count:       {{"bench"}, {"bench"}, {"bench"}, {"serve"}, {"run", "-p", "x"}, {"chat"}, {"bench"}},
	}
	names := map[badsampling.Param][]string{
		badsampling.Temperature: {"temperature", "temperature"},
		badsampling.TopP:        {"top-p", "top-p"},
		badsampling.TopK:        {"top-k", "top-k"},
		badsampling.Count:       {"generate", "prompt-len", "reps", "parallel", "steps-per-submit", "steps-per-submit", "steps-per-submit"},
	}
	for _, c := range badsampling.Cases() {
		for i, cmd := range flags[c.Param] {
			flag := names[c.Param][i]
			t.Run(c.Name+"/"+cmd[0]+"/"+flag, func(t *testing.T) {
				args := append([]string{cmd[0], model}, cmd[1:]...)
				args = append(args, "--"+flag+"="+c.Text())
				_, _, err := runCLI(t, "", args...)
				want := "--" + flag + " " + c.Text() + ": want "
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("gpurun %s: %v, want an error containing %q", strings.Join(args, " "), err, want)
				}
			})
		}
	}
}
