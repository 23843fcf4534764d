package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/gputest"
)

type testCase struct {
	Name             string    `json:"name"`
	GenerationPrompt bool      `json:"generation_prompt"`
	Messages         []Message `json:"messages"`
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestTemplatesMatchJinja2: the Gemma, Llama 2, Llama 3, ChatML and
// Phi-2-instruct-style templates render every conversation of
// testdata/cases.json to exactly the text Python's jinja2 renders with
// transformers' settings (testdata/expected.json, written by
// testdata/gen.py), and refuse the same conversations.
func TestTemplatesMatchJinja2(t *testing.T) {
	var cases []testCase
	readJSON(t, "testdata/cases.json", &cases)
	var expected map[string]map[string]json.RawMessage
	readJSON(t, "testdata/expected.json", &expected)
	files, _ := filepath.Glob("testdata/templates/*.jinja")
	if len(files) != len(expected) || len(files) < 6 {
		t.Fatalf("%d templates, %d in expected.json", len(files), len(expected))
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".jinja")
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		tpl, err := Parse(string(src), "<s>", "</s>")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, c := range cases {
			raw, ok := expected[name][c.Name]
			if !ok {
				t.Fatalf("%s: no expected text for %q", name, c.Name)
			}
			got, err := tpl.Render(c.Messages, c.GenerationPrompt)
			var want string
			if json.Unmarshal(raw, &want) != nil {
				var e struct{ Error string }
				if err := json.Unmarshal(raw, &e); err != nil {
					t.Fatal(err)
				}
				if err == nil || !errors.Is(err, ErrTemplate) || !strings.Contains(err.Error(), e.Error) {
					t.Errorf("%s / %s: got %q, %v; want the error %q", name, c.Name, got, err, e.Error)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s / %s: %v", name, c.Name, err)
			} else if got != want {
				t.Errorf("%s / %s:\n got %q\nwant %q", name, c.Name, got, want)
			}
		}
	}
}

// TestExpectedIsCurrent: testdata/expected.json is what gen.py writes now
// (python3 with jinja2 is required in CI).
func TestExpectedIsCurrent(t *testing.T) {
	cmd := exec.Command("python3", "gen.py")
	cmd.Dir = "testdata"
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if gputest.InCI() {
			t.Fatalf("python3 gen.py: %v\n%s", err, stderr.String())
		}
		t.Skipf("python3 with jinja2 not available: %v %s", err, stderr.String())
	}
	want, err := os.ReadFile("testdata/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, want) {
		t.Error("testdata/expected.json is stale: run (cd pipeline/chat/testdata && python3 gen.py > expected.json)")
	}
}

func TestPlainAndMarkers(t *testing.T) {
	msgs := []Message{{System, "Be brief."}, {User, "Hi"}, {Assistant, "Hello."}, {User, "Bye"}}
	got, _ := Plain().Render(msgs, true)
	if want := "Be brief.\n\nUser: Hi\nAssistant: Hello.\nUser: Bye\nAssistant:"; got != want {
		t.Errorf("plain: %q, want %q", got, want)
	}
	src, _ := os.ReadFile("testdata/templates/gemma.jinja")
	tpl, _ := Parse(string(src), "<bos>", "<eos>")
	if m := tpl.EndOfTurn(); len(m) != 1 || m[0] != "<end_of_turn>" {
		t.Errorf("gemma end of turn %v", m)
	}
	if _, err := Parse("{% for %}", "", ""); !errors.Is(err, ErrTemplate) {
		t.Errorf("a broken template: %v", err)
	}
}
