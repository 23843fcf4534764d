package main

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// webTestVersion is the version of gpurun the test's module proxy offers.
const webTestVersion = "v0.0.1-webtest"

// TestServeWebInstalled: serve --web works for a gpurun installed with `go
// install github.com/gpurun/gpurun/cmd/gpurun@REV`, with no checkout: run
// outside any module, it builds the page from its version's source in an
// empty module cache (GOPATH in a temp dir) that the go command fills from
// a module proxy (a file:// GOPROXY holding this working tree's
// non-test files as that version, then the module cache's own download
// directory for the dependencies: no network), and serves the page, the Go
// distribution's wasm_exec.js and a wasm. A build in a checkout run
// elsewhere gets a clear error instead.
func TestServeWebInstalled(t *testing.T) {
	root := goOut(t, "", "list", "-m", "-f", "{{.Dir}}")
	cache := goOut(t, "", "env", "GOMODCACHE")
	tmp := t.TempDir()
	proxy := filepath.Join(tmp, "proxy")
	writeModuleProxy(t, root, proxy)
	gopath := filepath.Join(tmp, "gopath")
	t.Setenv("GOPATH", gopath)
	t.Setenv("GOMODCACHE", filepath.Join(gopath, "pkg", "mod"))
	t.Setenv("GOPROXY", "file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(filepath.Join(cache, "cache", "download")))
	t.Setenv("GONOSUMDB", "github.com/gpurun/gpurun")
	t.Setenv("GOFLAGS", "-modcacherw")
	t.Cleanup(func() { exec.Command("go", "clean", "-modcache").Run() })
	work := filepath.Join(tmp, "elsewhere")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(work)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := serveWebVersion(t.Context(), io.Discard, ln, "", "", "(devel)"); err == nil || !strings.Contains(err.Error(), "built from a checkout") {
		t.Fatalf("a checkout's build outside the checkout: %v, want the built-from-a-checkout error", err)
	}

	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var log syncBuffer
	done := make(chan error, 1)
	go func() { done <- serveWebVersion(ctx, &log, ln, "", "", webTestVersion) }()
	base := "http://" + ln.Addr().String()
	get := func(path string) []byte {
		t.Helper()
		for {
			resp, err := http.Get(base + path)
			if err == nil {
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
				}
				return b
			}
			select {
			case err := <-done:
				t.Fatalf("serve --web ended: %v\n%s", err, log.String())
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	if body := get("/"); !strings.Contains(string(body), "gpurun in the browser") {
		t.Fatal("GET /: not the page")
	}
	if body := get("/wasm_exec.js"); !strings.Contains(string(body), "Go") {
		t.Fatal("GET /wasm_exec.js: not the Go glue")
	}
	if body := get("/gpurun.wasm"); len(body) < 1<<20 || !bytes.HasPrefix(body, []byte("\x00asm")) {
		t.Fatalf("GET /gpurun.wasm: %d bytes, not a wasm module", len(body))
	}
	want := filepath.Join(gopath, "pkg", "mod", "github.com", "gpurun", "gpurun@"+webTestVersion)
	if !strings.Contains(log.String(), want) {
		t.Fatalf("the wasm was not built from the module cache (%s):\n%s", want, log.String())
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

// goOut runs the go command in dir and returns its trimmed output.
func goOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

// writeModuleProxy writes a GOPROXY directory offering the module in root
// (its files git tracks or would track, less tests and testdata) as
// webTestVersion.
func writeModuleProxy(t *testing.T, root, proxy string) {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-co", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dir := filepath.Join(proxy, "github.com", "gpurun", "gpurun", "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasSuffix(name, "_test.go") || name == "testdata" || strings.HasPrefix(name, "testdata/") || strings.Contains(name, "/testdata/") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, name))
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		w, err := zw.Create("github.com/gpurun/gpurun@" + webTestVersion + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"list":                   []byte(webTestVersion + "\n"),
		webTestVersion + ".info": []byte(`{"Version":"` + webTestVersion + `","Time":"2026-01-01T00:00:00Z"}`),
		webTestVersion + ".mod":  mod,
		webTestVersion + ".zip":  buf.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader in two
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
