package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/gpurun/gpurun/internal/webpage"
)

// serveWeb is `gpurun serve --web`: it builds gpurun-web for the browser
// from the module's source (the checkout it runs in, or else this binary's
// version in the Go module cache: see webpage.Source) and serves the page on ln, offering model (and its
// tokenizer) for the page to load; the page can also open any file the user
// picks. The models run in the browser, not in this process.
func serveWeb(ctx context.Context, errOut io.Writer, ln net.Listener, model, tokenizer string) error {
	return serveWebVersion(ctx, errOut, ln, model, tokenizer, webpage.BinaryVersion())
}

// serveWebVersion is serveWeb for gpurun's module at version (the tests
// name a version their module proxy holds).
func serveWebVersion(ctx context.Context, errOut io.Writer, ln net.Listener, model, tokenizer, version string) error {
	dir, err := os.MkdirTemp("", "gpurun-web-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	wasm := filepath.Join(dir, "gpurun.wasm")
	start := time.Now()
	src, err := webpage.Source(ctx, version)
	if err != nil {
		return fmt.Errorf("--web: %w", err)
	}
	fmt.Fprintf(errOut, "building the page's wasm (GOOS=js GOARCH=wasm go build ./cmd/gpurun-web in %s)...\n", src)
	if err := webpage.Build(ctx, src, wasm); err != nil {
		return fmt.Errorf("--web: %w", err)
	}
	wasmExec, err := webpage.WasmExecJS()
	if err != nil {
		return fmt.Errorf("--web: %w", err)
	}
	models := map[string]string{}
	if model != "" {
		fi, err := os.Stat(model)
		if err != nil {
			return fmt.Errorf("model %w", err)
		}
		if fi.IsDir() {
			return fmt.Errorf("--web: the page loads one file (a model file, .task, GGUF or llama2.c .bin), not the directory %s", model)
		}
		name := filepath.Base(model)
		models[name] = model
		if tokenizer != "" {
			models[name+".tokenizer"] = tokenizer
		}
	}
	srv := &http.Server{Handler: webpage.Handler(webpage.Config{Wasm: wasm, WasmExec: wasmExec, Models: models}), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(errOut, "wasm built in %v; serving the browser page on http://%s/\n", time.Since(start).Round(time.Millisecond), ln.Addr())
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shut)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	fmt.Fprintln(errOut, "server stopped")
	return nil
}
