//go:build !js

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/browser"
	"github.com/gpurun/gpurun/internal/ci"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/chat"
)

var (
	updateScreenshot = flag.Bool("update-screenshot", false, "write the mid-generation screenshot to docs/browser.png")
	secondVisitGPU   = flag.Bool("second-visit-webgpu", false, "run TestBrowser/second-visit on the page's WebGPU (each visit compiles the kernels: minutes on SwiftShader) rather than its CPU fallback")
)

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

// chatTurns are the user's messages of the chat check, one turn each.
var chatTurns = []string{"Tell me a story about a cat.", "And then?"}

// nativeIDs runs the case through the same loader natively, on the CPU
// backend's reference math: its prompt, or with msgs the conversation
// rendered with the model's template (as gpurun.chat does). It returns the
// ids and the text of their pieces.
func nativeIDs(t *testing.T, c browserCase, msgs []chat.Message) ([]int, string) {
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
	m, source, err := loadModel(context.Background(), data, tok, pipeline.Options{Backend: b})
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	defer m.Close()
	prompt := pipeline.Prompt{Text: c.prompt, IDs: c.promptIDs}
	g := pipeline.GenerateOptions{MaxTokens: tokens}
	if msgs != nil {
		tpl, err := chatTemplate(m, source)
		if err != nil {
			t.Fatal(err)
		}
		if prompt, err = chatPrompt(m, tpl, msgs, &g); err != nil {
			t.Fatal(err)
		}
	}
	var ids []int
	var text strings.Builder
	for tk, err := range m.NewSession().Generate(context.Background(), prompt, g) {
		if err != nil {
			t.Fatalf("%s native: %v", c.name, err)
		}
		if tk.ID >= 0 {
			ids = append(ids, tk.ID)
		}
		text.WriteString(tk.Piece)
	}
	return ids, text.String()
}

func chromium(t *testing.T) string {
	p, err := browser.Find()
	if errors.Is(err, browser.ErrNoChromium) {
		ci.Missing(t, "chromium (bash .ci/setup installs it)")
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// eval evaluates a JS expression in the tab, awaiting a promise.
func eval[T any](tab *browser.Tab, expr string) (T, error) { return browser.Eval[T](tab, expr) }

// TestBrowser builds gpurun-web, serves its page from a loopback test server
// and drives headless Chromium through the DevTools protocol: each model
// loads from the server and generates greedily, on the page's WebGPU
// adapter (SwiftShader) and on the CPU fallback of a page without
// navigator.gpu, and the ids must equal llama.cpp's and the native run's.
func TestBrowser(t *testing.T) {
	chromiumPath := chromium(t)
	cases := browserCases(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// A GGUF large enough for the page's wasm memory to tell whether the
	// weights passed through it whole.
	bigShape := testmodels.LlamaShape{Layers: 16, Dim: 256, FFN: 1024, Heads: 4}
	big := testmodels.LlamaGGUF(t, bigShape)
	models := map[string]string{bigName: big}
	for _, c := range cases {
		models[c.name] = c.file
		if c.tok != "" {
			models[c.name+".tokenizer"] = c.tok
		}
	}
	start := time.Now()
	srv, err := browser.Serve(ctx, models)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	fi, err := os.Stat(srv.Wasm)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("wasm built in %v: %d bytes", time.Since(start).Round(time.Millisecond), fi.Size())

	native := map[string][]int{}
	for _, c := range cases {
		native[c.name], _ = nativeIDs(t, c, nil)
		if !slices.Equal(native[c.name], c.want) {
			t.Fatalf("%s: native ids %v, llama.cpp's %v", c.name, native[c.name], c.want)
		}
	}

	br, err := browser.Start(ctx, chromiumPath)
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()

	for _, mode := range []struct {
		name    string
		noGPU   bool   // the page loses navigator.gpu
		backend string // what the page must report
	}{
		{"webgpu", false, "webgpu"},
		{"cpu-fallback", true, "cpu"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			tab, err := br.NewTab(mode.noGPU)
			if err != nil {
				t.Fatal(err)
			}
			defer tab.Close()
			defer func() {
				if t.Failed() {
					t.Logf("page console:\n%s", strings.Join(tab.Console(), "\n"))
				}
			}()
			if err := tab.Open(srv.URL); err != nil {
				t.Fatal(err)
			}
			adapter, err := tab.Adapter()
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case mode.noGPU && adapter != "":
				t.Fatalf("the page without navigator.gpu found adapter %q", adapter)
			case !mode.noGPU && adapter == "":
				t.Fatal("navigator.gpu.requestAdapter found no adapter: the WebGPU flags no longer work headless")
			case adapter != "":
				t.Logf("page's WebGPU adapter: %s", adapter)
			}
			checkStreamed(t, tab, mode.noGPU, bigShape.Bytes())
			type loadInfo struct {
				Backend           string `json:"backend"`
				Device            string `json:"device"`
				KVCache           string `json:"kvCache"`
				Activations       string `json:"activations"`
				CompiledPipelines int    `json:"compiledPipelines"`
			}
			compiled := 0
			for _, c := range cases {
				info, err := eval[loadInfo](tab, fmt.Sprintf("gpurunPage.loadServed(%q, 'auto', %d)", c.name, testCache))
				if err != nil {
					t.Fatalf("%s: load: %v", c.name, err)
				}
				compiled += info.CompiledPipelines
				promptIDs, _ := json.Marshal(c.promptIDs)
				prompt, _ := json.Marshal(c.prompt)
				r, err := eval[genResult](tab, fmt.Sprintf("gpurunPage.generate(%s, {maxTokens: %d, promptIds: %s})", prompt, tokens, promptIDs))
				if err != nil {
					t.Fatalf("%s: generate: %v", c.name, err)
				}
				if info.Backend != mode.backend {
					t.Fatalf("%s loaded on %s (%s), want %s", c.name, info.Backend, info.Device, mode.backend)
				}
				// bench --backend browser fills its KV cache column from these.
				if !slices.Contains([]string{"f32", "f16"}, info.KVCache) || !slices.Contains([]string{"f32", "f16"}, info.Activations) {
					t.Errorf("%s: load info gives KV cache %q and activations %q, want f32 or f16", c.name, info.KVCache, info.Activations)
				}
				if !slices.Equal(r.IDs, c.want) || !slices.Equal(r.IDs, native[c.name]) {
					t.Errorf("%s on %s: ids %v, llama.cpp's %v, native %v", c.name, info.Device, r.IDs, c.want, native[c.name])
				}
				t.Logf("%s on %s (%s): %v, first token %.0f ms after the call (%.0f ms after page load), decode %.1f tok/s",
					c.name, info.Backend, info.Device, r.IDs, r.FirstTokenMs, r.SincePageLoadMs, r.DecodeTokPerSec)
			}
			// Loading a model again on the same backend compiles nothing:
			// the page keeps its device and the kernels compiled for it
			// (on WebGPU the loads compile them, awaited, not the first
			// generation).
			again, err := eval[loadInfo](tab, fmt.Sprintf("gpurunPage.loadServed(%q, 'auto', %d)", cases[0].name, testCache))
			if err != nil {
				t.Fatalf("%s again: load: %v", cases[0].name, err)
			}
			t.Logf("the loads compiled %d pipelines, loading %s again %d", compiled, cases[0].name, again.CompiledPipelines)
			// Every kernel compiles on the browser's WGSL compiler (Tint
			// checks what naga does not, such as uniformity).
			for _, line := range tab.Console() {
				if strings.Contains(line, "rejected the compute pipeline") {
					t.Errorf("page console: %s", line)
				}
			}
			if !mode.noGPU && (compiled == 0 || again.CompiledPipelines != 0) {
				t.Errorf("on WebGPU the loads compiled %d pipelines and loading %s again %d, want some and then none", compiled, cases[0].name, again.CompiledPipelines)
			}
			// Two chat turns in the chat view, through the page's template
			// rendering (stories has no template: gpurun chat's plain
			// format) and tokenizer, on the CPU only: rendering does not
			// depend on the backend, and a WebGPU load costs seconds of
			// shader compilation.
			if !mode.noGPU {
				checkStepsAhead(t, tab, cases[0])
				checkWindows(t, tab, cases[0])
				checkTimeDecode(t, tab)
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
			checkChatView(t, tab, cases[0])
		})
	}
	t.Run("second-visit", func(t *testing.T) { checkSecondVisit(t, br, srv.URL, cases[0], !*secondVisitGPU) })
}

// checkChatView holds the page's chat view to the native pipeline: each
// user message typed and sent (Enter) renders the whole conversation with
// the model's template, whose reply streams into the view and must have
// the ids and text of the native run of that conversation.
func checkChatView(t *testing.T, tab *browser.Tab, c browserCase) {
	ctx := tab.Context()
	var msgs []chat.Message
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.ID("chattemp"), "0"), chromedp.SetValue(chromedp.ID("chatmax"), fmt.Sprint(tokens))); err != nil {
		t.Fatal(err)
	}
	for i, text := range chatTurns {
		msgs = append(msgs, chat.Message{Role: chat.User, Content: text})
		wantIDs, wantText := nativeIDs(t, c, msgs)
		if _, err := eval[chromedp.Void](tab, "gpurunPage.lastChat = undefined"); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("msg"), text+"\r")); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void]("gpurunPage.lastChat !== undefined && !document.getElementById('send').disabled", chromedp.WithPollingTimeout(2*time.Minute))); err != nil {
			t.Fatalf("turn %d: waiting for the reply: %v", i+1, err)
		}
		type chatResult struct {
			IDs   []int  `json:"ids"`
			Reply string `json:"reply"`
		}
		r, err := eval[chatResult](tab, "gpurunPage.lastChat")
		if err != nil {
			t.Fatal(err)
		}
		bubbles, err := eval[[]string](tab, `[...document.querySelectorAll("#chatlog .msg")].map((d) => d.className + ": " + d.textContent)`)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(r.IDs, wantIDs) || r.Reply != wantText {
			t.Errorf("turn %d: reply %v %q, native %v %q", i+1, r.IDs, r.Reply, wantIDs, wantText)
		}
		if len(bubbles) != 2*(i+1) || bubbles[2*i] != "msg user: "+text || bubbles[2*i+1] != "msg assistant: "+r.Reply {
			t.Errorf("turn %d: the chat view shows %q", i+1, bubbles)
		}
		msgs = append(msgs, chat.Message{Role: chat.Assistant, Content: r.Reply})
	}
}

// checkSecondVisit loads stories260K from the server on two visits of the
// page (two tabs of one browser profile) after forgetting what the page
// stored: the first downloads it into the Origin Private File System, the
// second reads it from there, with the same ids; the test logs each
// visit's time to the first token from page load. The Forget button then
// empties the store. The visits run on the page's CPU fallback (noGPU), or
// on WebGPU with -second-visit-webgpu (kernels compile on each visit,
// which takes long on SwiftShader for CI).
func checkSecondVisit(t *testing.T, br *browser.Browser, url string, c browserCase, noGPU bool) {
	type visitResult struct {
		FromStore       bool    `json:"fromStore"`
		FetchMs         float64 `json:"fetchMs"`
		LoadServedMs    float64 `json:"loadServedMs"`
		IDs             []int   `json:"ids"`
		SincePageLoadMs float64 `json:"sincePageLoadMs"`
	}
	var visits []visitResult
	for i := range 2 {
		tab, err := br.NewTab(noGPU)
		if err != nil {
			t.Fatal(err)
		}
		defer tab.Close()
		if err := tab.Open(url); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if _, err := eval[chromedp.Void](tab, "gpurunPage.forget().then(() => null)"); err != nil {
				t.Fatal(err)
			}
		}
		promptIDs, _ := json.Marshal(c.promptIDs)
		prompt, _ := json.Marshal(c.prompt)
		v, err := eval[visitResult](tab, fmt.Sprintf(`(async () => {
			const info = await gpurunPage.loadServed(%q, "auto", %d);
			const r = await gpurunPage.generate(%s, {maxTokens: %d, promptIds: %s});
			return {...r, fromStore: info.fromStore, fetchMs: info.fetchMs, loadServedMs: info.loadServedMs};
		})()`, c.name, testCache, prompt, tokens, promptIDs))
		if err != nil {
			t.Fatalf("visit %d: %v", i+1, err)
		}
		visits = append(visits, v)
		if v.FromStore != (i == 1) || !slices.Equal(v.IDs, c.want) {
			t.Errorf("visit %d: model from the store %v, ids %v, want %v and llama.cpp's %v", i+1, v.FromStore, v.IDs, i == 1, c.want)
		}
		if i == 1 {
			stored, err := eval[[]struct{ Name string }](tab, "gpurunPage.storedModels()")
			if err != nil {
				t.Fatal(err)
			}
			if err := chromedp.Do(tab.Context(), chromedp.Click(chromedp.ID("forget"))); err != nil {
				t.Fatal(err)
			}
			if _, err := chromedp.Run(tab.Context(), chromedp.Poll[chromedp.Void](`document.getElementById("forget").hidden`, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
				t.Errorf("the Forget button stays: %v", err)
			}
			after, err := eval[[]struct{ Name string }](tab, "gpurunPage.storedModels()")
			if err != nil {
				t.Fatal(err)
			}
			if len(stored) != 2 || len(after) != 0 {
				t.Errorf("stored %v before Forget (want the model and its tokenizer), %v after (want none)", stored, after)
			}
		}
	}
	backend := map[bool]string{true: "the CPU fallback", false: "WebGPU"}[noGPU]
	t.Logf("%s, time to first token from page load (indicative): first visit %.0f ms (download %.0f ms, load %.0f ms), second visit %.0f ms (read from the Origin Private File System %.0f ms, load %.0f ms)", backend,
		visits[0].SincePageLoadMs, visits[0].FetchMs, visits[0].LoadServedMs, visits[1].SincePageLoadMs, visits[1].FetchMs, visits[1].LoadServedMs)
}

// bigName is the test's large GGUF, as the server offers it.
const bigName = "synthetic.gguf"

// checkStreamed loads the large GGUF first in a fresh tab and checks how
// much the page's wasm memory grew (a WebAssembly.Memory only grows, so
// this is the load's peak): on WebGPU the weights stream tensor by tensor
// into GPU buffers and must never sit whole in wasm memory (under a
// quarter of the file), on the CPU backend they are held there once (under
// the file's size and a margin: never twice).
func checkStreamed(t *testing.T, tab *browser.Tab, cpuOnly bool, modelBytes int64) {
	t.Helper()
	start := time.Now()
	defer func() { t.Logf("the streaming check took %v", time.Since(start).Round(time.Millisecond)) }()
	before, err := eval[int64](tab, "gpurunPage.wasmMemoryBytes()")
	if err != nil {
		t.Fatal(err)
	}
	type loadInfo struct {
		Backend         string `json:"backend"`
		WasmMemoryBytes int64  `json:"wasmMemoryBytes"`
	}
	info, err := eval[loadInfo](tab, fmt.Sprintf("gpurunPage.loadServed(%q, 'auto', 4)", bigName))
	if err != nil {
		t.Fatalf("%s: load: %v", bigName, err)
	}
	progress, err := eval[float64](tab, `document.getElementById("progress").value`)
	if err != nil {
		t.Fatal(err)
	}
	grew := info.WasmMemoryBytes - before
	limit := modelBytes / 4
	if cpuOnly {
		limit = modelBytes + 32<<20
	}
	t.Logf("%s (%.1f MiB) on %s: wasm memory %.1f -> %.1f MiB (+%.1f MiB, limit +%.1f MiB), progress bar at %.2f",
		bigName, float64(modelBytes)/(1<<20), info.Backend, float64(before)/(1<<20), float64(info.WasmMemoryBytes)/(1<<20),
		float64(grew)/(1<<20), float64(limit)/(1<<20), progress)
	if grew > limit {
		t.Errorf("loading %s (%d bytes) on %s grew wasm memory by %d bytes, over %d", bigName, modelBytes, info.Backend, grew, limit)
	}
	if progress != 1 {
		t.Errorf("the progress bar ends at %v, want 1", progress)
	}
}

// checkTimeDecode times stories260K's decode steps on the page's device
// (gpurun.timeDecode, the bench's device time per step): timestamp queries
// through the page's WebGPU (an empty pass writes each) must give the
// steps asked for and a device time within the call's wall time, which
// ticks taken for nanoseconds or timestamps of another pass would break.
// checkStepsAhead generates with two decode steps a submission: the same
// step list is submitted again and again, from the second time on as the
// command buffer the page encoded while the device ran the one before
// (internal/webgpu's replayAhead), and the ids must still be llama.cpp's,
// in a first generation and in one that follows it.
func checkStepsAhead(t *testing.T, tab *browser.Tab, c browserCase) {
	if _, err := eval[chromedp.Void](tab, fmt.Sprintf("gpurunPage.loadServed(%q, 'auto', %d, 2).then(() => null)", c.name, testCache)); err != nil {
		t.Fatal(err)
	}
	prompt, _ := json.Marshal(c.prompt)
	promptIDs, _ := json.Marshal(c.promptIDs)
	for run := range 2 {
		r, err := eval[genResult](tab, fmt.Sprintf("gpurunPage.generate(%s, {maxTokens: %d, promptIds: %s})", prompt, tokens, promptIDs))
		if err != nil {
			t.Fatalf("%s, two steps a submission: generate: %v", c.name, err)
		}
		if !slices.Equal(r.IDs, c.want) {
			t.Errorf("%s, two steps a submission, run %d: ids %v, llama.cpp's %v", c.name, run, r.IDs, c.want)
		}
	}
}

func checkTimeDecode(t *testing.T, tab *browser.Tab) {
	type loadInfo struct {
		Timestamps   bool `json:"timestamps"`
		SubgroupSize int  `json:"subgroupSize"`
	}
	info, err := eval[loadInfo](tab, fmt.Sprintf("gpurunPage.loadServed(\"stories260K.bin\", \"auto\", %d)", testCache))
	if err != nil {
		t.Fatal(err)
	}
	if !info.Timestamps {
		t.Fatal("the page's WebGPU device keeps no timestamps (Chromium offers timestamp-query on SwiftShader)")
	}
	// Chromium offers subgroups on SwiftShader (sizes 4 to 4), so the
	// goldens above ran the subgroup kernels (matvec_sg).
	if info.SubgroupSize != 4 {
		t.Errorf("the page's WebGPU device reports subgroup size %d, want 4 (Chromium's subgroups on SwiftShader)", info.SubgroupSize)
	}
	type decodeTime struct {
		Steps       int     `json:"steps"`
		Submissions int     `json:"submissions"`
		DeviceMs    float64 `json:"deviceMs"`
		StepsMs     float64 `json:"stepsMs"`
		WallMs      float64 `json:"wallMs"`
	}
	d, err := eval[decodeTime](tab, "gpurun.timeDecode([1, 403, 407], 20)")
	if err != nil {
		t.Fatalf("timeDecode: %v", err)
	}
	t.Logf("page's timed decode: %d steps in %d submissions, device %.1f ms (%.2f ms a step), wall of the submissions %.1f ms, of the call %.1f ms", d.Steps, d.Submissions, d.DeviceMs, d.DeviceMs/float64(max(d.Steps, 1)), d.StepsMs, d.WallMs)
	if d.Steps != 20 || d.Submissions != 5 || d.DeviceMs <= 0 || d.DeviceMs > d.StepsMs || d.StepsMs > d.WallMs {
		t.Errorf("timed decode: %d steps in %d submissions (want 20 in 5: a window's 1+2+4+8+5), device %.2f ms, submissions' wall %.2f ms, call's %.2f ms: want 0 < device <= submissions' <= call's", d.Steps, d.Submissions, d.DeviceMs, d.StepsMs, d.WallMs)
	}
}

// screenshotAndStop drives the page's controls: a short chat turn on
// WebGPU fills the chat view, the stories model runs from the Generate
// button, the test captures the whole page while tokens stream, and the
// Stop button must end the generation as cancelled.
func screenshotAndStop(t *testing.T, tab *browser.Tab) {
	ctx := tab.Context()
	if _, err := eval[chromedp.Void](tab, `gpurunPage.loadServed("stories260K.bin", "auto").then(() => null)`); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.ID("chattemp"), "0"), chromedp.SetValue(chromedp.ID("chatmax"), "16"),
		chromedp.SendKeys(chromedp.ID("msg"), chatTurns[0]+"\r")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void]("gpurunPage.lastChat !== undefined && !document.getElementById('send').disabled", chromedp.WithPollingTimeout(2*time.Minute))); err != nil {
		t.Fatalf("waiting for the chat reply: %v", err)
	}
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("max"), "400"),
		chromedp.Click(chromedp.ID("gen")),
	); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](`document.getElementById("stats").textContent.match(/^(\d+) tokens…/)?.[1] >= 24`, chromedp.WithPollingTimeout(2*time.Minute))); err != nil {
		t.Fatalf("waiting for streamed tokens: %v", err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("stop"))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](`document.getElementById("gen").disabled === false`, chromedp.WithPollingTimeout(time.Minute))); err != nil {
		t.Fatalf("waiting for the generation to stop: %v", err)
	}
	stats, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("stats")))
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
