//go:build !js

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cdpage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/gpurun/gpurun/cmd/gpurun-web/page"
	"github.com/gpurun/gpurun/gpu/backend/cpu"
	"github.com/gpurun/gpurun/internal/ci"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/chat"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the mid-generation screenshot to docs/browser.png")

// browserCase is one model the page loads from the test server, with the
// prompt and llama.cpp's greedy ids for it.
type browserCase struct {
	name      string // as the server offers it
	file, tok string
	prompt    string // text, through the page's tokenizer
	promptIDs []int  // used as given when set
	want      []int  // llama.cpp's greedy ids (a prefix of them)
}

// genResult is what gpurunPage.generate resolves with.
type genResult struct {
	IDs              []int   `json:"ids"`
	StopReason       string  `json:"stopReason"`
	PromptTokens     int     `json:"promptTokens"`
	TTFTMs           float64 `json:"ttftMs"`
	DecodeTokPerSec  float64 `json:"decodeTokPerSec"`
	PrefillTokPerSec float64 `json:"prefillTokPerSec"`
	FirstTokenMs     float64 `json:"firstTokenMs"`
	SincePageLoadMs  float64 `json:"sincePageLoadMs"`
}

// tokens is how many greedy tokens each model generates in the browser.
const tokens = 6

// testCache is the KV cache of the test's loads: room for the prompts and
// tokens, and few prefill programs to compile (each costs seconds on
// SwiftShader).
const testCache = 32

func browserCases(t *testing.T) []browserCase {
	st := testmodels.StoriesCases(t)[0]
	cases := []browserCase{{
		name: "stories260K.bin", file: testmodels.Path(t, "stories260K.bin"), tok: testmodels.Path(t, "tok512.bin"),
		prompt: st.Prompt, want: st.GeneratedIDs[:tokens],
	}}
	if got, want := len(st.PromptIDs), 5; got != want {
		t.Fatalf("stories golden: %d prompt ids, the test expects %d", got, want)
	}
	for _, arch := range []string{"llama", "gemma"} {
		g := testmodels.Arch(t, arch)
		cases = append(cases, browserCase{
			name: arch + ".gguf", file: testmodels.Path(t, "arch", arch+".gguf"),
			promptIDs: g.PromptIDs, want: g.GreedyIDs[:tokens],
		})
	}
	return cases
}

// chatText is the user's message of the chat check.
const chatText = "Tell me a story about a cat."

// nativeIDs runs the case through the same loader natively, on the CPU
// backend's reference math (as a one-message chat with chatMode).
func nativeIDs(t *testing.T, c browserCase, chatMode bool) []int {
	t.Helper()
	data, err := os.ReadFile(c.file)
	if err != nil {
		t.Fatal(err)
	}
	var tok []byte
	if c.tok != "" {
		if tok, err = os.ReadFile(c.tok); err != nil {
			t.Fatal(err)
		}
	}
	b := cpu.New(cpu.Options{})
	defer b.Close()
	m, source, err := loadModel(context.Background(), data, tok, b, 0)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	defer m.Close()
	prompt := pipeline.Prompt{Text: c.prompt, IDs: c.promptIDs}
	g := pipeline.GenerateOptions{MaxTokens: tokens}
	if chatMode {
		tpl, err := chatTemplate(m, source)
		if err != nil {
			t.Fatal(err)
		}
		if prompt, err = chatPrompt(m, tpl, []chat.Message{{Role: chat.User, Content: chatText}}, &g); err != nil {
			t.Fatal(err)
		}
	}
	var ids []int
	for tk, err := range m.NewSession().Generate(context.Background(), prompt, g) {
		if err != nil {
			t.Fatalf("%s native: %v", c.name, err)
		}
		if tk.ID >= 0 {
			ids = append(ids, tk.ID)
		}
	}
	return ids
}

func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	ci.Missing(t, "chromium (bash .ci/setup installs it)")
	return ""
}

// eval evaluates a JS expression in the tab, awaiting a promise.
func eval[T any](tab context.Context, expr string) (T, error) {
	return chromedp.Run(tab, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}

// TestBrowser builds gpurun-web, serves its page from a loopback test server
// and drives headless Chromium through the DevTools protocol: each model
// loads from the server and generates greedily, on the page's WebGPU
// adapter (SwiftShader) and on the CPU fallback of a page without
// navigator.gpu, and the ids must equal llama.cpp's and the native run's.
func TestBrowser(t *testing.T) {
	browser := chromium(t)
	cases := browserCases(t)
	dir := t.TempDir()
	wasm := filepath.Join(dir, "gpurun.wasm")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	start := time.Now()
	if err := page.Build(ctx, "", wasm); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(wasm)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("wasm built in %v: %d bytes", time.Since(start).Round(time.Millisecond), fi.Size())
	wasmExec, err := page.WasmExecJS()
	if err != nil {
		t.Fatal(err)
	}
	models := map[string]string{}
	for _, c := range cases {
		models[c.name] = c.file
		if c.tok != "" {
			models[c.name+".tokenizer"] = c.tok
		}
	}
	srv := httptest.NewServer(page.Handler(page.Config{Wasm: wasm, WasmExec: wasmExec, Models: models}))
	defer srv.Close()

	native := map[string][]int{}
	chatWant := nativeIDs(t, cases[0], true)
	for _, c := range cases {
		native[c.name] = nativeIDs(t, c, false)
		if !slices.Equal(native[c.name], c.want) {
			t.Fatalf("%s: native ids %v, llama.cpp's %v", c.name, native[c.name], c.want)
		}
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", false),
		// WebGPU headless on Linux without a GPU: Dawn on SwiftShader's
		// Vulkan.
		chromedp.Flag("enable-unsafe-webgpu", true),
		chromedp.Flag("enable-features", "Vulkan"),
		chromedp.Flag("use-vulkan", "swiftshader"),
		chromedp.Flag("use-angle", "swiftshader"),
		chromedp.Flag("disable-vulkan-surface", true),
		chromedp.WindowSize(900, 760),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()

	for _, mode := range []struct {
		name    string
		noGPU   bool   // the page loses navigator.gpu
		backend string // what the page must report
	}{
		{"webgpu", false, "webgpu"},
		{"cpu-fallback", true, "cpu"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			tab, closeTab := chromedp.NewContext(bctx)
			defer closeTab()
			var (
				mu   sync.Mutex
				logs []string
			)
			if err := chromedp.Listen(tab, func(ev any) {
				if e, ok := ev.(*runtime.EventConsoleAPICalled); ok {
					var parts []string
					for _, a := range e.Args {
						parts = append(parts, string(a.Value))
					}
					mu.Lock()
					logs = append(logs, strings.Join(parts, " "))
					mu.Unlock()
				}
			}); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if t.Failed() {
					mu.Lock()
					t.Logf("page console:\n%s", strings.Join(logs, "\n"))
					mu.Unlock()
				}
			}()
			if mode.noGPU {
				if _, err := chromedp.Call(tab, cdpage.AddScriptToEvaluateOnNewDocument, cdpage.AddScriptToEvaluateOnNewDocumentParams{Source: "delete Navigator.prototype.gpu"}); err != nil {
					t.Fatal(err)
				}
			}
			if err := chromedp.Do(tab, chromedp.Navigate(srv.URL+"/")); err != nil {
				t.Fatal(err)
			}
			if _, err := eval[chromedp.Void](tab, "gpurunPage.ready().then(() => null)"); err != nil {
				t.Fatalf("page start: %v", err)
			}
			adapter, err := eval[*string](tab, "gpurunPage.adapter()")
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case mode.noGPU && adapter != nil:
				t.Fatalf("the page without navigator.gpu found adapter %q", *adapter)
			case !mode.noGPU && adapter == nil:
				t.Fatal("navigator.gpu.requestAdapter found no adapter: the WebGPU flags no longer work headless")
			case adapter != nil:
				t.Logf("page's WebGPU adapter: %s", *adapter)
			}
			for _, c := range cases {
				type loadInfo struct {
					Backend string `json:"backend"`
					Device  string `json:"device"`
				}
				info, err := eval[loadInfo](tab, fmt.Sprintf("gpurunPage.loadServed(%q, 'auto', %d)", c.name, testCache))
				if err != nil {
					t.Fatalf("%s: load: %v", c.name, err)
				}
				promptIDs, _ := json.Marshal(c.promptIDs)
				prompt, _ := json.Marshal(c.prompt)
				r, err := eval[genResult](tab, fmt.Sprintf("gpurunPage.generate(%s, {maxTokens: %d, promptIds: %s})", prompt, tokens, promptIDs))
				if err != nil {
					t.Fatalf("%s: generate: %v", c.name, err)
				}
				if info.Backend != mode.backend {
					t.Fatalf("%s loaded on %s (%s), want %s", c.name, info.Backend, info.Device, mode.backend)
				}
				if !slices.Equal(r.IDs, c.want) || !slices.Equal(r.IDs, native[c.name]) {
					t.Errorf("%s on %s: ids %v, llama.cpp's %v, native %v", c.name, info.Device, r.IDs, c.want, native[c.name])
				}
				t.Logf("%s on %s (%s): %v, first token %.0f ms after the call (%.0f ms after page load), decode %.1f tok/s",
					c.name, info.Backend, info.Device, r.IDs, r.FirstTokenMs, r.SincePageLoadMs, r.DecodeTokPerSec)
			}
			// A chat turn through the page's template rendering (stories
			// has no template: gpurun chat's plain format) and tokenizer,
			// on the CPU only: rendering does not depend on the backend,
			// and a WebGPU load costs seconds of shader compilation.
			if !mode.noGPU {
				screenshotAndStop(t, tab)
				return
			}
			// A file over the wasm32 limit is refused before anything is
			// read, by the page and by gpurun.load itself (a Blob-like
			// object whose slice must never be called).
			for _, call := range []string{"gpurunPage.load(huge)", "gpurun.load(huge)"} {
				msg, err := eval[string](tab, fmt.Sprintf(`(async () => {
					const huge = {size: 5 * 2**30, slice() { throw new Error("read a refused file"); }};
					try { await %s; return "loaded"; } catch (e) { return String(e); }
				})()`, call))
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(msg, "4 GiB") || strings.Contains(msg, "read a refused file") {
					t.Errorf("%s of a 5 GiB file: %q, want the wasm32 limit stated", call, msg)
				}
			}
			if _, err := eval[chromedp.Void](tab, fmt.Sprintf("gpurunPage.loadServed(%q, 'auto', %d).then(() => null)", cases[0].name, 2*testCache)); err != nil {
				t.Fatal(err)
			}
			r, err := eval[genResult](tab, fmt.Sprintf("gpurun.chat([{role: 'user', content: %q}], {maxTokens: %d})", chatText, tokens))
			if err != nil {
				t.Fatalf("chat: %v", err)
			}
			if !slices.Equal(r.IDs, chatWant) {
				t.Errorf("chat reply ids %v (%s), native %v", r.IDs, r.StopReason, chatWant)
			}
		})
	}
}

// screenshotAndStop drives the page's controls: the stories model runs from
// the Generate button, the test captures the page while tokens stream, and
// the Stop button must end the generation as cancelled.
func screenshotAndStop(t *testing.T, tab context.Context) {
	if _, err := eval[chromedp.Void](tab, `gpurunPage.loadServed("stories260K.bin", "auto").then(() => null)`); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(tab,
		chromedp.SetValue(chromedp.ID("max"), "400"),
		chromedp.Click(chromedp.ID("gen")),
	); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(tab, chromedp.Poll[chromedp.Void](`document.getElementById("stats").textContent.match(/^(\d+) tokens…/)?.[1] >= 24`, chromedp.WithPollingTimeout(2*time.Minute))); err != nil {
		t.Fatalf("waiting for streamed tokens: %v", err)
	}
	png, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(tab, chromedp.Click(chromedp.ID("stop"))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(tab, chromedp.Poll[chromedp.Void](`document.getElementById("gen").disabled === false`, chromedp.WithPollingTimeout(time.Minute))); err != nil {
		t.Fatalf("waiting for the generation to stop: %v", err)
	}
	stats, err := chromedp.Run(tab, chromedp.Text(chromedp.ID("stats")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stats, "(cancelled)") {
		t.Errorf("after Stop the page says %q, want a cancelled generation", stats)
	}
	out := filepath.Join(t.TempDir(), "browser.png")
	if *updateScreenshot {
		out = filepath.Join(testmodels.Root(t), "docs", "browser.png")
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot (%d bytes): %s", len(png), out)
}
