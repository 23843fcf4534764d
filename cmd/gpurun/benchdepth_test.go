package main

import (
	"strings"
	"testing"

	"github.com/gpurun/gpurun/cmd/gpurun/internal/benchreport"
)

// TestBenchTestNames: the test-name parser, names at a depth (@dD)
// included: what each name means, and a clear error for each bad one.
func TestBenchTestNames(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		kind                  string
		prompt, gen, depth, c int
	}{
		{"pp512", benchreport.KindPrompt, 512, 1, 0, 0},
		{"tg128", benchreport.KindGenerate, 1, 129, 0, 0},
		{"pp128+tg32", benchreport.KindCombined, 128, 32, 0, 0},
		{"mediapipe", benchreport.KindMediaPipe, 1024, 256, 0, 1280},
		{"tg32@d4096", benchreport.KindGenerate, 1, 33, 4096, 0},
		{"pp512@d32768", benchreport.KindPrompt, 512, 1, 32768, 0},
		{"pp16+tg8@d1", benchreport.KindCombined, 16, 8, 1, 0},
	} {
		got, err := parseTest(tc.name)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		want := benchreport.Test{Name: tc.name, Kind: tc.kind, PromptTokens: tc.prompt, GenerateTokens: tc.gen, Depth: tc.depth, MaxCache: tc.c}
		if got != want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, want)
		}
	}
	for _, tc := range []struct{ name, want string }{
		{"tg32@", "after @ want dD"},
		{"tg32@d", "after @ want dD"},
		{"tg32@4096", "after @ want dD"},
		{"tg32@dx", "after @ want dD"},
		{"tg32@d-5", "after @ want dD"},
		{"tg32@d+5", "after @ want dD"},
		{"tg32@d0", "depth 0 outside 1.."},
		{"tg32@d99999999", "depth 99999999 outside 1.."},
		{"tg32@d4096@d8", "after @ want dD"},
		{"mediapipe@d512", "mediapipe's protocol has no depth"},
		{"tg@d4096", "unknown test"},
		{"tgx@d4096", "unknown test"},
		{"tg0@d4096", "unknown test"},
		{"tg+5", "unknown test"},
		{"pp+5+tg3", "unknown test"},
		{"pp8+tg", "unknown test"},
		{"d4096", "unknown test"},
	} {
		_, err := parseTest(tc.name)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s: error %v, want one naming the test and saying %q", tc.name, err, tc.want)
		}
	}
}

// TestBenchDepth: tests at a depth run on the CPU with both fills: the
// results carry the depth and the fill, each run's prompt and generated
// tokens are the test's (the depth's positions filled before it, not
// counted), the protocol says how the depth was filled, the decode table
// counts the depth's positions, and the Markdown has the memory table.
// A depth the cache cannot hold, and what runs no depth, fail before
// anything loads.
func TestBenchDepth(t *testing.T) {
	task := convertStories(t, "int8")
	for _, fill := range []string{benchreport.DepthRandom, benchreport.DepthPrefill} {
		rep := benchJSON(t, "-m", task, "--backend", "cpu", "--activations", "f32", "--tests", "tg4,tg4@d200", "--depth-fill", fill,
			"--max-cache", "256", "--reps", "1", "--warmup", "0")
		if len(rep.Results) != 2 {
			t.Fatalf("%s: %d results", fill, len(rep.Results))
		}
		deep := rep.Results[1]
		if deep.Error != "" || deep.Test.Depth != 200 || deep.Test.DepthFill != fill || deep.Test.Name != "tg4@d200" {
			t.Errorf("%s: result %+v, want tg4@d200 at depth 200 filled by %s", fill, deep.Test, fill)
		}
		if rep.Results[0].Test.Depth != 0 || rep.Results[0].Test.DepthFill != "" {
			t.Errorf("%s: tg4 has depth %d, fill %q", fill, rep.Results[0].Test.Depth, rep.Results[0].Test.DepthFill)
		}
		for _, r := range rep.Results {
			if len(r.Runs) != 1 || r.Runs[0].PromptTokens != 1 || r.Runs[0].GeneratedTokens != 5 || r.DecodeTokensPerSec == nil {
				t.Errorf("%s %s: runs %+v", fill, r.Test.Name, r.Runs)
			}
		}
		if !strings.Contains(rep.Protocol.Description, "T@dD") {
			t.Errorf("%s: protocol %q says nothing of the depth", fill, rep.Protocol.Description)
		}
		rows := rep.DecodeBytesRows()
		if len(rows) != 1 || rows[0].Test != "tg4@d200" || rows[0].Ref != "tg4" || rows[0].Positions != 200+1+2.5 {
			t.Errorf("%s: decode table %+v, want tg4@d200 at 203.5 positions against tg4", fill, rows)
		}
	}
	md := mustRun(t, "", "bench", "-m", task, "--backend", "cpu", "--activations", "f32", "--tests", "tg2@d100", "--depth-fill", "random",
		"--max-cache", "128", "--reps", "1", "--warmup", "0")
	// stories260K: 5 layers of 4 kv heads of 8 f32 values for K and V: 1280 bytes a position.
	if !strings.Contains(md, "## Memory") || !strings.Contains(md, "| 1.25 | 128 | 0.16 |") || !strings.Contains(md, "random keys and values") {
		t.Errorf("Markdown without the memory table's row (1.25 KiB a position, 128 positions, 0.16 MiB) or the depth protocol:\n%s", md)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tests", "tg32@d4096", "--max-cache", "2048"}, "test tg32@d4096 needs a KV cache of 4130 positions (depth 4096 + prompt 1 + generated 33), --max-cache is 2048"},
		{[]string{"--tests", "tg32@d4096"}, "give --max-cache 4130 or more"},
		{[]string{"--tests", "tg4@d10", "--depth-fill", "zeros"}, `--depth-fill "zeros": want prefill or random`},
		{[]string{"--tests", "tg4", "--depth-fill", "random"}, "--depth-fill without a test at a depth"},
		{[]string{"--tests", "tg4@d10", "--profile"}, "--profile profiles steps at depth 0"},
		{[]string{"--tests", "tg4@d10", "--backend", "cpu,browser"}, "--backend browser runs no tests at a depth"},
		{[]string{"--tests", "tg4@d10", "--depth-fill", "random", "--draft", task}, "--draft with --depth-fill random"},
	} {
		_, _, err := runCLI(t, "", append([]string{"bench", "-m", task}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("bench %v: error %v, want one saying %q", tc.args, err, tc.want)
		}
	}
}
