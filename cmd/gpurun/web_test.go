package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestServeWeb: serve --web builds the wasm, then serves the page, the wasm
// and the model it was given (its tokenizer paired with it), and stops
// when its context ends.
func TestServeWeb(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var log strings.Builder
	done := make(chan error, 1)
	go func() {
		done <- serveWeb(ctx, &log, ln, testmodels.Path(t, "stories260K.bin"), testmodels.Path(t, "tok512.bin"))
	}()
	base := "http://" + ln.Addr().String()
	get := func(path string) (*http.Response, []byte) {
		t.Helper()
		for {
			resp, err := http.Get(base + path)
			if err == nil {
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				return resp, b
			}
			select {
			case err := <-done:
				t.Fatalf("serve --web ended: %v\n%s", err, log.String())
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	if resp, body := get("/"); resp.StatusCode != 200 || !strings.Contains(string(body), "gpurun in the browser") {
		t.Fatalf("GET /: %d", resp.StatusCode)
	}
	if resp, body := get("/gpurun.wasm"); resp.StatusCode != 200 || len(body) < 1<<20 {
		t.Fatalf("GET /gpurun.wasm: %d, %d bytes", resp.StatusCode, len(body))
	}
	_, body := get("/models.json")
	var list []struct{ Name, Tokenizer string }
	if err := json.Unmarshal(body, &list); err != nil || len(list) != 1 || list[0].Name != "stories260K.bin" || list[0].Tokenizer != "stories260K.bin.tokenizer" {
		t.Fatalf("models.json: %s (%v)", body, err)
	}
	if resp, body := get("/models/stories260K.bin.tokenizer"); resp.StatusCode != 200 || len(body) == 0 {
		t.Fatalf("tokenizer: %d", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve --web: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve --web did not stop")
	}
}
