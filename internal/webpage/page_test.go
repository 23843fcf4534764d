package webpage

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

func TestHandler(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	wasm := bytes.Repeat([]byte("\x00asm wasm bytes "), 1000)
	srv := httptest.NewServer(Handler(Config{
		Wasm:     write("gpurun.wasm", string(wasm)),
		WasmExec: write("wasm_exec.js", "// glue"),
		Models: map[string]string{
			"m.bin":           write("m.bin", "model bytes"),
			"m.bin.tokenizer": write("tok.bin", "tok"),
			"x.gguf":          write("x.gguf", "GGUF..."),
		},
	}))
	defer srv.Close()
	get := func(path string, hdr ...string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		tr := &http.Transport{DisableCompression: true}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	for _, tc := range []struct {
		path, ctype string
		status      int
		body        []byte
	}{
		{"/", "text/html; charset=utf-8", 200, indexHTML},
		{"/wasm_exec.js", "text/javascript", 200, []byte("// glue")},
		{"/gpurun.wasm", "application/wasm", 200, wasm},
		{"/models/m.bin", "application/octet-stream", 200, []byte("model bytes")},
		{"/models/m.bin.tokenizer", "application/octet-stream", 200, []byte("tok")},
		{"/models/other.bin", "", 404, nil},
		{"/models/..%2fgpurun.wasm", "", 404, nil},
		{"/index.html", "", 404, nil},
	} {
		resp, body := get(tc.path)
		if resp.StatusCode != tc.status {
			t.Errorf("GET %s: status %d, want %d", tc.path, resp.StatusCode, tc.status)
			continue
		}
		if tc.status != 200 {
			continue
		}
		if got := resp.Header.Get("Content-Type"); got != tc.ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", tc.path, got, tc.ctype)
		}
		if !bytes.Equal(body, tc.body) {
			t.Errorf("GET %s: %d bytes differ from the %d served", tc.path, len(body), len(tc.body))
		}
	}

	resp, body := get("/gpurun.wasm", "Accept-Encoding", "br, gzip")
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("wasm with Accept-Encoding gzip: Content-Encoding %q", resp.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if plain, err := io.ReadAll(zr); err != nil || !bytes.Equal(plain, wasm) {
		t.Fatalf("gzipped wasm does not decompress to the file (%v)", err)
	}
	if resp, _ := get("/gpurun.wasm", "Accept-Encoding", "gzip;q=0"); resp.Header.Get("Content-Encoding") != "" {
		t.Error("gzip;q=0 still got gzip")
	}

	_, body = get("/models.json")
	var list []struct {
		Name      string `json:"name"`
		Size      int64  `json:"size"`
		Modified  int64  `json:"modified"`
		Tokenizer string `json:"tokenizer"`
		TokSize   int64  `json:"tokenizerSize"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("models.json: %v: %s", err, body)
	}
	if len(list) != 2 || list[0].Name != "m.bin" || list[0].Size != 11 || list[0].Tokenizer != "m.bin.tokenizer" || list[0].TokSize != 3 || list[0].Modified <= 0 || list[1].Name != "x.gguf" || list[1].Tokenizer != "" {
		t.Errorf("models.json = %+v", list)
	}
}
