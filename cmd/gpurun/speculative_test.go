package main

import (
	"fmt"
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
