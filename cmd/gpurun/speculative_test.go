package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestRunSpeculative: run --lookup and run --draft (the model in int8 as
// its draft) give llama.cpp's golden greedy ids, report the drafts in the
// JSON result, and bad combinations are clear errors.
func TestRunSpeculative(t *testing.T) {
	task := convertStories(t, "f32")
	draft := convertStories(t, "int8")
	c := testmodels.StoriesCases(t)[0]
	n := fmt.Sprint(len(c.GeneratedIDs))
	for _, args := range [][]string{
		{"--lookup", "2"},
		{"--lookup", "3", "--draft-tokens", "8"},
		{"--draft", draft, "--draft-tokens", "3"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			res := runJSON(t, append([]string{"-m", task, "--backend", "cpu", "-p", c.Prompt, "--temperature", "0", "--max-tokens", n}, args...)...)
			if !slices.Equal(res.GeneratedIDs, c.GeneratedIDs) {
				t.Errorf("generated %v\ngolden %v", res.GeneratedIDs, c.GeneratedIDs)
			}
			m := res.Metrics
			if m.DraftTokens == 0 || m.AcceptedTokens > m.DraftTokens || m.TargetSteps+m.AcceptedTokens != m.GeneratedTokens-1 {
				t.Errorf("metrics %+v", m)
			}
		})
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--lookup", "2", "--draft", draft}, "--draft and --lookup"},
		{[]string{"--lookup", "99"}, "--lookup 99"},
		{[]string{"--lookup", "2", "--draft-tokens", "0"}, "--draft-tokens 0"},
		{[]string{"--draft", task + ".missing"}, "--draft"},
	} {
		_, stderr, err := runCLI(t, "", append([]string{"run", "-m", task, "-p", "x", "--max-tokens", "2"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error()+stderr, tc.want) {
			t.Errorf("%v: error %v, stderr %q, want %q", tc.args, err, stderr, tc.want)
		}
	}
}

// TestBenchSpeculative: bench --lookup on a repetitive prompt and bench
// --draft report each run's drafts, and the acceptance and tokens per
// model step over the runs, in JSON the schema takes; the counts agree
// with the tokens generated.
func TestBenchSpeculative(t *testing.T) {
	dir := testmodels.Dir(t)
	model := filepath.Join(dir, "stories260K.bin")
	tok := filepath.Join(dir, "tok512.model")
	for _, args := range [][]string{
		{"--lookup", "2", "--prompt-repeat", "8"},
		{"--draft", model, "--draft-tokens", "3"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			rep := benchJSON(t, append([]string{"-m", model, "--tokenizer", tok, "--backend", "cpu", "--tests", "pp32+tg32", "--reps", "2", "--warmup", "0"}, args...)...)
			if len(rep.Results) != 1 || rep.Results[0].Error != "" {
				t.Fatalf("results %+v", rep.Results)
			}
			res := rep.Results[0]
			if res.Speculation == "" || res.Acceptance == nil || res.TokensPerStep == nil || len(res.Runs) != 2 {
				t.Fatalf("result %+v", res)
			}
			for _, r := range res.Runs {
				if r.DraftTokens == 0 || r.TargetSteps+r.AcceptedTokens != r.GeneratedTokens-1 {
					t.Errorf("run %+v", r)
				}
			}
			if res.TokensPerStep.Median <= 1 {
				t.Errorf("tokens per step %+v", res.TokensPerStep)
			}
		})
	}
}
