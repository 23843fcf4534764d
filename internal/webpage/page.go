// Package webpage serves gpurun's browser page: index.html (embedded), the Go
// distribution's wasm_exec.js, the gpurun-web wasm and, optionally, model
// files the server offers for the page to load.
//
// The wasm is not committed: Build compiles it (GOOS=js GOARCH=wasm go
// build ./cmd/gpurun-web) from the module's source, a checkout or, for an
// installed gpurun, the module cache (see Source), which the tests and a
// static deployment do alike:
//
//	GOOS=js GOARCH=wasm go build -o site/gpurun.wasm ./cmd/gpurun-web
//	cp "$(go env GOROOT)/lib/wasm/wasm_exec.js" internal/webpage/index.html site/
//
// (any static file server then serves site/).
package webpage

import (
	"bytes"
	"compress/gzip"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
)

//go:embed index.html
var indexHTML []byte

// Package is the import path Build compiles.
const Package = "github.com/gpurun/gpurun/cmd/gpurun-web"

// Build compiles gpurun-web for GOOS=js GOARCH=wasm into out with the go
// command on PATH, from within the gpurun module (dir: a directory inside
// it, "" for the current one).
func Build(ctx context.Context, dir, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, Package)
	cmd.Dir = dir
	// GOFLAGS from the environment could ask for -mod=vendor, which a module
	// cache directory cannot give (-mod=readonly is the default; no VCS
	// stamp: a module cache directory has none).
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm", "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=readonly -buildvcs=false")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("page: building the wasm (GOOS=js GOARCH=wasm go build %s): %w\n%s", Package, err, b)
	}
	return nil
}

// WasmExecJS is the path of the Go distribution's wasm_exec.js, the glue
// the page needs to run a Go wasm (lib/wasm since Go 1.24, misc/wasm
// before).
func WasmExecJS() (string, error) {
	root := runtime.GOROOT()
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		root = strings.TrimSpace(string(out))
	}
	for _, p := range []string{filepath.Join(root, "lib", "wasm", "wasm_exec.js"), filepath.Join(root, "misc", "wasm", "wasm_exec.js")} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("page: no wasm_exec.js under GOROOT %s", root)
}

// Config says what Handler serves.
type Config struct {
	// Wasm is the built gpurun-web (see Build).
	Wasm string
	// WasmExec is wasm_exec.js (see WasmExecJS).
	WasmExec string
	// Models maps a name to a file the server offers the page
	// (GET /models/NAME, listed by GET /models.json); a name ending in
	// ".tokenizer" is the tokenizer of the model of the same name without
	// that suffix.
	Models map[string]string
}

// Handler serves the page at /, its assets, and the offered models.
func Handler(c Config) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(indexHTML)
	})
	mux.HandleFunc("GET /wasm_exec.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		http.ServeFile(w, r, c.WasmExec)
	})
	var (
		gzOnce sync.Once
		gz     []byte
		gzErr  error
	)
	mux.HandleFunc("GET /gpurun.wasm", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/wasm")
		w.Header().Add("Vary", "Accept-Encoding")
		if !acceptsGzip(r) {
			http.ServeFile(w, r, c.Wasm)
			return
		}
		// The wasm compresses about 4:1 (10.6 MB to 2.7 MB); compress it once.
		gzOnce.Do(func() { gz, gzErr = gzipFile(c.Wasm) })
		if gzErr != nil {
			http.Error(w, gzErr.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Length", strconv.Itoa(len(gz)))
		w.Write(gz)
	})
	mux.HandleFunc("GET /models.json", func(w http.ResponseWriter, r *http.Request) {
		// Modified (Unix milliseconds) with Size names a version of a
		// file: the page keeps what it downloaded under both, so a file
		// changed on the server is downloaded again.
		type entry struct {
			Name      string `json:"name"`
			Size      int64  `json:"size"`
			Modified  int64  `json:"modified"`
			Tokenizer string `json:"tokenizer,omitempty"`
			TokSize   int64  `json:"tokenizerSize,omitempty"`
			TokMod    int64  `json:"tokenizerModified,omitempty"`
		}
		stat := func(p string) (size, mod int64) {
			if fi, err := os.Stat(p); err == nil {
				return fi.Size(), fi.ModTime().UnixMilli()
			}
			return 0, 0
		}
		list := []entry{}
		for name, p := range c.Models {
			if strings.HasSuffix(name, ".tokenizer") {
				continue
			}
			e := entry{Name: name}
			e.Size, e.Modified = stat(p)
			if tp, ok := c.Models[name+".tokenizer"]; ok {
				e.Tokenizer = name + ".tokenizer"
				e.TokSize, e.TokMod = stat(tp)
			}
			list = append(list, e)
		}
		sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(list)
	})
	mux.HandleFunc("GET /models/{name}", func(w http.ResponseWriter, r *http.Request) {
		p, ok := c.Models[path.Base(r.PathValue("name"))]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		http.ServeFile(w, r, p)
	})
	return mux
}

// acceptsGzip reports whether the request's Accept-Encoding lists gzip
// (with a non-zero q).
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for part := range strings.SplitSeq(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if strings.EqualFold(strings.TrimSpace(name), "gzip") && strings.ReplaceAll(strings.TrimSpace(params), " ", "") != "q=0" {
				return true
			}
		}
	}
	return false
}

func gzipFile(p string) ([]byte, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("page: %w", err)
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	zw.Write(data)
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("page: gzip: %w", err)
	}
	return buf.Bytes(), nil
}
