// Package browser drives gpurun-web's page (cmd/gpurun-web) in headless
// Chromium over the DevTools protocol, through chromedp: WebGPU runs on
// SwiftShader, Chromium's software Vulkan, so it works on a machine with no
// GPU. The browser test of cmd/gpurun-web and `gpurun bench --backend
// browser` use it.
package browser

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	cdpage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/gpurun/gpurun/internal/webpage"
)

// Env names the Chromium binary to use instead of the first of Names on
// the PATH.
const Env = "GPURUN_CHROMIUM"

// Names are the binaries Find looks for on the PATH, in order.
var Names = []string{"chromium", "chromium-browser", "google-chrome"}

// ErrNoChromium: no Chromium to drive.
var ErrNoChromium = errors.New("browser: no Chromium found")

// Find returns the Chromium binary: $GPURUN_CHROMIUM, or the first of
// Names on the PATH.
func Find() (string, error) {
	if p := os.Getenv(Env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: %s=%s: %w", ErrNoChromium, Env, p, err)
		}
		return p, nil
	}
	for _, name := range Names {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: none of %s on the PATH (Debian: apt-get install chromium; or set %s)", ErrNoChromium, strings.Join(Names, ", "), Env)
}

// Page is gpurun-web's page served on a loopback port.
type Page struct {
	URL  string
	Wasm string // the built wasm
	srv  *http.Server
	dir  string
}

// Serve builds the page's wasm (webpage.BuildPage: go build, from the
// checkout or this binary's version in the module cache) and serves the page on 127.0.0.1, offering models (name ->
// path, as webpage.Config.Models).
func Serve(ctx context.Context, models map[string]string) (*Page, error) {
	dir, err := os.MkdirTemp("", "gpurun-browser-")
	if err != nil {
		return nil, err
	}
	p := &Page{Wasm: filepath.Join(dir, "gpurun.wasm"), dir: dir}
	if _, err := webpage.BuildPage(ctx, webpage.BinaryVersion(), p.Wasm); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("browser: %w", err)
	}
	wasmExec, err := webpage.WasmExecJS()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("browser: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("browser: %w", err)
	}
	p.URL = "http://" + ln.Addr().String() + "/"
	p.srv = &http.Server{Handler: webpage.Handler(webpage.Config{Wasm: p.Wasm, WasmExec: wasmExec, Models: models}), ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(ln)
	return p, nil
}

// Close stops the server and removes the wasm.
func (p *Page) Close() {
	p.srv.Close()
	os.RemoveAll(p.dir)
}

// Browser is a headless Chromium with WebGPU on SwiftShader.
type Browser struct {
	ctx    context.Context
	cancel []context.CancelFunc
}

// Start launches Chromium at path (from Find). It lives until Close or
// until ctx is done.
func Start(ctx context.Context, path string) (*Browser, error) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", false),
		// WebGPU headless on Linux without a GPU: Dawn on SwiftShader's
		// Vulkan.
		chromedp.Flag("enable-unsafe-webgpu", true),
		chromedp.Flag("enable-features", "Vulkan"),
		chromedp.Flag("use-vulkan", "swiftshader"),
		chromedp.Flag("use-angle", "swiftshader"),
		chromedp.Flag("disable-vulkan-surface", true),
		// Timestamp queries at full resolution (Chromium otherwise rounds
		// them to 100 µs): gpurun.profile's device times.
		chromedp.Flag("enable-webgpu-developer-features", true),
		chromedp.WindowSize(900, 760),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	if err := chromedp.Do(bctx); err != nil {
		cancelBrowser()
		cancelAlloc()
		return nil, fmt.Errorf("browser: starting %s: %w", path, err)
	}
	return &Browser{ctx: bctx, cancel: []context.CancelFunc{cancelBrowser, cancelAlloc}}, nil
}

// Close ends the browser.
func (b *Browser) Close() {
	for _, c := range b.cancel {
		c()
	}
}

// Version is the browser's product string ("Chrome/131.0.6778.85"), ""
// when it cannot say.
func (b *Browser) Version() string {
	v, err := chromedp.CallBrowser(b.ctx, cdpbrowser.GetVersion, cdp.Empty{})
	if err != nil {
		return ""
	}
	return v.Product
}

// Tab is one page of the browser, its console kept.
type Tab struct {
	ctx   context.Context
	close context.CancelFunc
	mu    sync.Mutex
	logs  []string
}

// NewTab opens a tab; with noGPU its pages lose navigator.gpu (gpurun-web
// then runs on its CPU backend).
func (b *Browser) NewTab(noGPU bool) (*Tab, error) {
	ctx, cancel := chromedp.NewContext(b.ctx)
	t := &Tab{ctx: ctx, close: cancel}
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*runtime.EventConsoleAPICalled); ok {
			var parts []string
			for _, a := range e.Args {
				parts = append(parts, string(a.Value))
			}
			t.mu.Lock()
			t.logs = append(t.logs, strings.Join(parts, " "))
			t.mu.Unlock()
		}
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("browser: %w", err)
	}
	if noGPU {
		if _, err := chromedp.Call(ctx, cdpage.AddScriptToEvaluateOnNewDocument, cdpage.AddScriptToEvaluateOnNewDocumentParams{Source: "delete Navigator.prototype.gpu"}); err != nil {
			cancel()
			return nil, fmt.Errorf("browser: %w", err)
		}
	}
	return t, nil
}

// Context is the tab's chromedp context, for actions of the caller's.
func (t *Tab) Context() context.Context { return t.ctx }

// Close closes the tab.
func (t *Tab) Close() { t.close() }

// Console is what the tab's pages logged.
func (t *Tab) Console() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.logs...)
}

// Open navigates to gpurun-web's page at url and waits for gpurun to start.
func (t *Tab) Open(url string) error {
	if err := chromedp.Do(t.ctx, chromedp.Navigate(url)); err != nil {
		return fmt.Errorf("browser: %w", err)
	}
	if _, err := Eval[chromedp.Void](t, "gpurunPage.ready().then(() => null)"); err != nil {
		return fmt.Errorf("browser: page start: %w", err)
	}
	return nil
}

// Adapter is the page's WebGPU adapter ("google swiftshader"), "" when it
// has none.
func (t *Tab) Adapter() (string, error) {
	a, err := Eval[*string](t, "gpurunPage.adapter()")
	if err != nil || a == nil {
		return "", err
	}
	return *a, nil
}

// Eval evaluates a JavaScript expression in the tab, awaiting a promise,
// into a T (from JSON).
func Eval[T any](t *Tab, expr string) (T, error) {
	return chromedp.Run(t.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}
