package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestServedModels: serve's model arguments: paths named by their files,
// ID=PATH, a directory of models (ids from the file names; a Hugging Face
// directory inside is one model), and duplicate ids refused.
func TestServedModels(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a.gguf", "b.tflite", "notes.txt", ".hidden.gguf", "hf/config.json", "empty/x.txt"} {
		p := filepath.Join(dir, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		flagged, args []string
		want          string
		multi         bool
		err           string
	}{
		{args: []string{"m/x.gguf"}, want: "x=m/x.gguf"},
		{flagged: []string{"mine=m/x.gguf"}, want: "mine=m/x.gguf"},
		{flagged: []string{"p=m/x.gguf"}, args: []string{"m/y.bin"}, want: "p=m/x.gguf y=m/y.bin", multi: true},
		{args: []string{dir}, want: "a=" + dir + "/a.gguf b=" + dir + "/b.tflite hf=" + dir + "/hf", multi: true},
		{args: []string{filepath.Join(dir, "hf")}, want: "hf=" + dir + "/hf"},
		{args: []string{"m/x.gguf", "n/x.gguf"}, err: `two models named "x"`},
		{args: []string{filepath.Join(dir, "empty")}, err: "no model files"},
	} {
		got, multi, err := servedModels(tc.flagged, tc.args)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v %v: err %v, want %q", tc.flagged, tc.args, err, tc.err)
			}
			continue
		}
		var s []string
		for _, m := range got {
			s = append(s, m.id+"="+m.path)
		}
		if err != nil || strings.Join(s, " ") != tc.want || multi != tc.multi {
			t.Errorf("%v %v: %v %v %v; want %s %v", tc.flagged, tc.args, s, multi, err, tc.want, tc.multi)
		}
	}
}

// TestServeMultiModels: gpurun serve with two models (one as -m ID=PATH,
// one positional) and --models-mb fitting one (with its 1 MiB prefix
// cache) lists both, loads each on
// its request, evicting the other (/api/ps), answers an unknown model
// with a 404 naming both, and unloads after a request's keep_alive 0.
func TestServeMultiModels(t *testing.T) {
	url := startServe(t, "-m", "tiny="+testmodels.Path(t, "stories260K.bin"), "--tokenizer", testmodels.Path(t, "tok512.model"),
		testmodels.Path(t, "arch", "llama.gguf"), "--models-mb", "3", "--prefix-cache-mb", "1", "--max-cache", "64")
	getList := func(path, key, field string) []string {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]json.RawMessage
		var list []map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(v[key], &list); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range list {
			out = append(out, m[field].(string))
		}
		return out
	}
	if got := getList("/v1/models", "data", "id"); !slices.Equal(got, []string{"tiny", "llama"}) {
		t.Fatalf("/v1/models: %v", got)
	}
	post := func(body string) (int, string) {
		resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, b.String()
	}
	for _, model := range []string{"tiny", "llama", "tiny"} {
		if code, body := post(`{"model":"` + model + `","prompt":"Once","max_tokens":4,"temperature":0}`); code != 200 {
			t.Fatalf("%s: %d %s", model, code, body)
		}
		if got := getList("/api/ps", "models", "name"); !slices.Equal(got, []string{model}) {
			t.Errorf("after a request for %s, /api/ps: %v", model, got)
		}
	}
	if code, body := post(`{"model":"llama","prompt":"Once","max_tokens":4,"temperature":0,"keep_alive":0}`); code != 200 {
		t.Fatalf("keep_alive 0: %d %s", code, body)
	}
	if got := getList("/api/ps", "models", "name"); len(got) != 0 {
		t.Errorf("after keep_alive 0, /api/ps: %v", got)
	}
	if code, body := post(`{"model":"nope","prompt":"Once"}`); code != 404 || !strings.Contains(body, `\"tiny\", \"llama\"`) {
		t.Errorf("unknown model: %d %s", code, body)
	}
}
