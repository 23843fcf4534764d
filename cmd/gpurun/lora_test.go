package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestRunLoRA: run --lora FILE[:SCALE] (GGUF adapters and PEFT
// directories, repeated) reproduces llama.cpp's greedy ids with the same
// adapters (testdata/lora); a wrong adapter is an error naming it.
func TestRunLoRA(t *testing.T) {
	dir := filepath.Join(testmodels.Root(t), "testdata", "lora")
	for _, tc := range []struct {
		golden, base string
		lora         []string
		unmerged     bool
	}{
		{"llama_two", "arch/llama.gguf", []string{"llama_r4.peft", "llama_r16.gguf:0.5"}, false},
		{"llama_two", "arch/llama.gguf", []string{"llama_r4.peft", "llama_r16.gguf:0.5"}, true},
		{"qwen2_r16", "arch2/qwen2.gguf", []string{"qwen2_r16.peft/adapter_config.json:1"}, false},
		{"llama-q8_0_r4", "arch/llama-q8_0.gguf", []string{"llama_r4.gguf"}, true},
	} {
		name := tc.golden
		if tc.unmerged {
			name += "/unmerged"
		}
		t.Run(name, func(t *testing.T) {
			var g testmodels.ArchGolden
			testmodels.DecodeJSON(t, filepath.Join(dir, tc.golden+".golden.json"), &g)
			args := []string{testmodels.Path(t, tc.base), "--backend", "cpu", "--prompt-ids", idList(g.PromptIDs),
				"--temperature", "0", "--max-tokens", fmt.Sprint(len(g.GreedyIDs))}
			for _, l := range tc.lora {
				args = append(args, "--lora", filepath.Join(dir, l))
			}
			if tc.unmerged {
				args = append(args, "--lora-unmerged")
			}
			res := runJSON(t, args...)
			if fmt.Sprint(res.GeneratedIDs) != fmt.Sprint(g.GreedyIDs) {
				t.Errorf("greedy ids %v\nllama.cpp  %v", res.GeneratedIDs, g.GreedyIDs)
			}
		})
	}
	// convert --lora writes the merged model; it runs without adapters,
	// and unmerged adapters apply to it as to the checkpoint.
	var g testmodels.ArchGolden
	testmodels.DecodeJSON(t, filepath.Join(dir, "llama_r4.golden.json"), &g)
	out := filepath.Join(t.TempDir(), "llama_r4.tflite")
	mustRun(t, "", "convert", "-q", testmodels.Path(t, "arch", "llama.gguf"), "--lora", filepath.Join(dir, "llama_r4.gguf"), "-o", out)
	res := runJSON(t, out, "--backend", "cpu", "--prompt-ids", idList(g.PromptIDs), "--temperature", "0", "--max-tokens", fmt.Sprint(len(g.GreedyIDs)))
	if fmt.Sprint(res.GeneratedIDs) != fmt.Sprint(g.GreedyIDs) {
		t.Errorf("converted: greedy ids %v\nllama.cpp  %v", res.GeneratedIDs, g.GreedyIDs)
	}
	var g2 testmodels.ArchGolden
	testmodels.DecodeJSON(t, filepath.Join(dir, "llama_two.golden.json"), &g2)
	res = runJSON(t, out, "--backend", "cpu", "--prompt-ids", idList(g2.PromptIDs), "--temperature", "0", "--max-tokens", fmt.Sprint(len(g2.GreedyIDs)),
		"--lora", filepath.Join(dir, "llama_r16.gguf:0.5"), "--lora-unmerged")
	if fmt.Sprint(res.GeneratedIDs) != fmt.Sprint(g2.GreedyIDs) {
		t.Errorf("converted with r4, r16 unmerged: greedy ids %v\nllama.cpp  %v", res.GeneratedIDs, g2.GreedyIDs)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", out, "--prompt-ids", "1", "--lora", filepath.Join(dir, "llama_r4.gguf")}, "not to a tflite model file: merge them with gpurun convert --lora"},
		{[]string{"run", testmodels.Path(t, "arch", "phi2.gguf"), "--prompt-ids", "1", "--lora", filepath.Join(dir, "llama_r4.gguf")},
			`llama_r4.gguf: lora: adapter does not fit the model: adapter for architecture "llama", model is "phi2"`},
		{[]string{"run", testmodels.Path(t, "arch", "llama.gguf"), "--prompt-ids", "1", "--lora", ":2"}, "--lora :2: lora: malformed adapter: empty adapter path"},
		{[]string{"bench", testmodels.Path(t, "arch", "phi2.gguf"), "--backend", "cpu", "--tests", "tg2", "--lora", filepath.Join(dir, "qwen2_r16.peft")},
			"qwen2_r16.peft: lora: adapter does not fit the model"},
	} {
		_, errOut, err := runCLI(t, "", tc.args...)
		if err == nil || !strings.Contains(err.Error()+errOut, tc.want) {
			t.Errorf("gpurun %s: err %v, want %q\n%s", strings.Join(tc.args, " "), err, tc.want, errOut)
		}
	}
}

// TestServeAdapters: serve --adapter offers the model with each adapter as
// MODEL:NAME beside the bare model, and a request naming one gets the
// greedy text run gives with that adapter (which TestRunLoRA ties to
// llama.cpp's ids).
func TestServeAdapters(t *testing.T) {
	dir := filepath.Join(testmodels.Root(t), "testdata", "lora")
	base := testmodels.Path(t, "arch", "llama.gguf")
	url := startServe(t, base, "--backend", "cpu", "--name", "llama",
		"--adapter", "r4="+filepath.Join(dir, "llama_r4.gguf"), "--adapter", "r16="+filepath.Join(dir, "llama_r16.gguf")+":0.5")
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || fmt.Sprint(list.Data) != "[{llama} {llama:r16} {llama:r4}]" {
		t.Fatalf("/v1/models: %v %+v", err, list)
	}
	g := testmodels.Arch(t, "llama")
	for _, tc := range []struct {
		model string
		lora  []string
	}{
		{"llama", nil},
		{"llama:r4", []string{"--lora", filepath.Join(dir, "llama_r4.gguf")}},
		{"llama:r16", []string{"--lora", filepath.Join(dir, "llama_r16.gguf:0.5")}},
	} {
		want := runJSON(t, append([]string{base, "--backend", "cpu", "--prompt-ids", idList(g.PromptIDs), "--temperature", "0", "--max-tokens", "12"}, tc.lora...)...)
		req := fmt.Sprintf(`{"model":%q,"prompt":[%s],"temperature":0,"max_tokens":12}`, tc.model, idList(g.PromptIDs))
		resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(req))
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			Model   string `json:"model"`
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
		}
		err = json.NewDecoder(resp.Body).Decode(&c)
		resp.Body.Close()
		if err != nil || c.Model != tc.model || len(c.Choices) != 1 || c.Choices[0].Text != want.Text {
			t.Errorf("%s: %v %+v, want text %q", tc.model, err, c, want.Text)
		}
	}
}
