package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun"
	"github.com/gpurun/gpurun/cmd/gpurun/internal/benchreport"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// badModel writes a file that starts like a GGUF and fails to load.
func badModel(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bad.gguf")
	if err := os.WriteFile(path, []byte("GGUF\x03\x00\x00\x00garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDraftCheckedFirst: a --draft that does not exist, or beside
// --lookup, is the error of run, chat, serve and bench before the model
// (here one that would fail to load) is loaded.
func TestDraftCheckedFirst(t *testing.T) {
	model := badModel(t)
	missing := filepath.Join(t.TempDir(), "no-draft.gguf")
	for _, cmd := range [][]string{
		{"run", model, "-p", "x"},
		{"chat", model},
		{"serve", model, "--addr", "127.0.0.1:0"},
		{"bench", model, "--backend", "cpu"},
	} {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--draft", missing}, "--draft: stat " + missing},
			{[]string{"--draft", model, "--lookup", "2"}, "--draft and --lookup"},
		} {
			args := append(slices.Clone(cmd), tc.args...)
			_, _, err := runCLI(t, "", args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "malformed") {
				t.Errorf("gpurun %s: error %v, want %q before loading the model", strings.Join(args, " "), err, tc.want)
			}
		}
	}
}

// TestLoadErrorNamesPathOnce: a file that fails to load is named once in
// the error, not by each layer.
func TestLoadErrorNamesPathOnce(t *testing.T) {
	model := badModel(t)
	task := convertStories(t, "int8")
	for _, args := range [][]string{
		{"run", model, "-p", "x"},
		{"inspect", model},
		{"run", task, "-p", "x", "--draft", model},
	} {
		_, _, err := runCLI(t, "", args...)
		if err == nil || strings.Count(err.Error(), model) != 1 || !strings.Contains(err.Error(), "gguf: malformed file") {
			t.Errorf("gpurun %s: error %v, want the path once and the reason", strings.Join(args, " "), err)
		}
	}
}

// TestTempAlias: --temp (llama.cpp's spelling) is --temperature: --temp 0
// decodes greedily (llama.cpp's golden ids) and a bad value is reported
// under the flag's name.
func TestTempAlias(t *testing.T) {
	task := convertStories(t, "f32")
	c := testmodels.StoriesCases(t)[0]
	res := runJSON(t, "-m", task, "--backend", "cpu", "-p", c.Prompt, "--temp", "0", "--max-tokens", "8")
	if !slices.Equal(res.GeneratedIDs, c.GeneratedIDs[:8]) {
		t.Errorf("--temp 0 generated %v, golden %v", res.GeneratedIDs, c.GeneratedIDs[:8])
	}
	if _, _, err := runCLI(t, "", "run", task, "-p", "x", "--temp", "-1"); err == nil || !strings.Contains(err.Error(), "--temperature -1: want") {
		t.Errorf("--temp -1: error %v", err)
	}
}

// TestDevicePlaceholder: --device's help names its value DEVICE, not
// "gpurun devices".
func TestDevicePlaceholder(t *testing.T) {
	for _, cmd := range []string{"run", "chat", "serve"} {
		out := mustRun(t, "", cmd, "--help")
		if !strings.Contains(out, "--device DEVICE ") || strings.Contains(out, "--device gpurun") {
			var line string
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, "--device") {
					line = l
				}
			}
			t.Errorf("%s --help: %q", cmd, line)
		}
	}
}

// TestChatSpeculationStats: chat with --lookup prints the speculative
// counts after each reply, as run does, without --metrics; --metrics
// adds the reply's rates.
func TestChatSpeculationStats(t *testing.T) {
	task := convertStories(t, "f32")
	for _, metrics := range []bool{false, true} {
		args := []string{"chat", task, "--backend", "cpu", "--lookup", "2", "--temperature", "0", "--max-tokens", "24"}
		if metrics {
			args = append(args, "--metrics")
		}
		_, stderr, err := runCLI(t, "Once upon a time\n/exit\n", args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr)
		}
		if !strings.Contains(stderr, "[speculative]") || strings.Contains(stderr, "[chat]") != metrics {
			t.Errorf("chat %v: stderr\n%s", args[2:], stderr)
		}
	}
}

// TestBenchCommandHasModels: the report's command holds the models given
// as arguments, so that it reproduces the run.
func TestBenchCommandHasModels(t *testing.T) {
	task := convertStories(t, "int8")
	rep := benchJSON(t, task, "--backend", "cpu", "--tests", "pp4", "--reps", "1", "--warmup", "0")
	if len(rep.Command) < 3 || rep.Command[len(rep.Command)-1] != task || !slices.Contains(rep.Command, "--tests=pp4") {
		t.Errorf("command %q, want the flags and %s", rep.Command, task)
	}
}

// TestBenchCompareNoMatch: --compare against a report with no matching
// result says so (on stderr and in the report) instead of printing an
// empty table.
func TestBenchCompareNoMatch(t *testing.T) {
	task := convertStories(t, "int8")
	dir := t.TempDir()
	rep := benchJSON(t, task, "--backend", "cpu", "--tests", "pp4", "--reps", "1", "--warmup", "0", "--report", dir)
	// The baseline: the same report with another test.
	rep.Results[0].Test.Name = "pp8"
	old := filepath.Join(dir, "old.json")
	f, err := os.Create(old)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteJSON(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	stdout, stderr, err := runCLI(t, "", "bench", "--from", filepath.Join(dir, "report.json"), "--compare", old)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "no result matches the baseline's") || !strings.Contains(stderr, "pp8") {
		t.Errorf("stderr %q, want the unmatched configurations", stderr)
	}
	_, compared, _ := strings.Cut(stdout, "## Compared with")
	compared, _, _ = strings.Cut(compared, "\n## ")
	if !strings.Contains(compared, "nothing to compare") || strings.Contains(compared, "| "+strings.Join(benchreport.CompareHeader, " | ")+" |") {
		t.Errorf("comparison section:\n%s", compared)
	}
}

// TestConvertChatTemplate: convert --chat-template stores the file's
// template in the model (the model's chat template when it runs), and a
// missing file is an error naming the flag.
func TestConvertChatTemplate(t *testing.T) {
	dir := testmodels.Dir(t)
	tpl := filepath.Join(testmodels.Root(t), "testdata", "tools", "chat.jinja")
	out := filepath.Join(t.TempDir(), "s.tflite")
	args := []string{"convert", filepath.Join(dir, "stories260K.bin"), "--tokenizer", filepath.Join(dir, "tok512.model"), "-o", out, "-q"}
	mustRun(t, "", append(args, "--chat-template", tpl)...)
	want, err := os.ReadFile(tpl)
	if err != nil {
		t.Fatal(err)
	}
	m, err := gpurun.Open(t.Context(), out, gpurun.WithBackend("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.ChatTemplate() != string(want) {
		t.Errorf("the model's chat template is %q, want the file's", m.ChatTemplate())
	}
	if _, _, err := runCLI(t, "", append(args, "--chat-template", tpl+".missing")...); err == nil || !strings.Contains(err.Error(), "--chat-template") {
		t.Errorf("a missing template: error %v", err)
	}
}
