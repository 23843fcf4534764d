package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/gpurun/gpurun/cmd/gpurun/internal/benchreport"
	"github.com/gpurun/gpurun/internal/browser"
	"github.com/gpurun/gpurun/pipeline"
)

// browserBackend is bench's --backend name for gpurun in the browser:
// gpurun-web's page in headless Chromium, on the page's WebGPU adapter.
const browserBackend = "browser"

// browserGen is what the page's gpurun.generate resolves with.
type browserGen struct {
	PromptTokens     int     `json:"promptTokens"`
	PrefillTokens    int     `json:"prefillTokens"`
	GeneratedTokens  int     `json:"generatedTokens"`
	TTFTMs           float64 `json:"ttftMs"`
	PrefillTokPerSec float64 `json:"prefillTokPerSec"`
	DecodeTokPerSec  float64 `json:"decodeTokPerSec"`
}

// benchBrowser runs the tests on every model file in gpurun-web's page in
// headless Chromium (WebGPU on SwiftShader where there is no GPU), as
// fresh greedy generations like the native rows, and returns their rows
// (backend "browser", device the page's WebGPU adapter) and the device.
// Synthetic models are not offered to the page: their rows say so.
func benchBrowser(ctx context.Context, log io.Writer, bar *progressbar.ProgressBar, rf *benchModelFlags, bf *benchFlags,
	tests []benchreport.Test, sources []benchSource) ([]benchreport.Result, *benchreport.Device) {
	runsPer := int64(bf.warmup + bf.reps)
	var out []benchreport.Result
	fail := func(base benchreport.Result, err error) {
		fmt.Fprintf(log, "bench: %s in the browser: %v\n", base.Model, err)
		for _, t := range tests {
			r := base
			r.Test, r.Error, r.Runs = t, err.Error(), []benchreport.Run{}
			out = append(out, r)
		}
		bar.Add64(runsPer * int64(len(tests)))
	}
	bases := make([]benchreport.Result, len(sources))
	models := map[string]string{}
	for i, src := range sources {
		bases[i] = benchreport.Result{Model: src.name, Source: src.file, Weights: src.weight, Activations: benchreport.PolicyModel,
			Backend: browserBackend, Runs: []benchreport.Run{}}
		if src.file == "" {
			continue
		}
		if st, err := os.Stat(src.file); err == nil {
			bases[i].ModelBytes = st.Size()
		}
		name := filepath.Base(src.file)
		models[name] = src.file
		if rf.tokenizer != "" {
			models[name+".tokenizer"] = rf.tokenizer
		}
	}
	failAll := func(err error) ([]benchreport.Result, *benchreport.Device) {
		for _, b := range bases {
			fail(b, err)
		}
		return out, nil
	}
	path, err := browser.Find()
	if err != nil {
		return failAll(err)
	}
	bar.Describe("building gpurun-web for the browser")
	page, err := browser.Serve(ctx, models)
	if err != nil {
		return failAll(err)
	}
	defer page.Close()
	br, err := browser.Start(ctx, path)
	if err != nil {
		return failAll(err)
	}
	defer br.Close()
	tab, err := br.NewTab(false)
	if err != nil {
		return failAll(err)
	}
	defer tab.Close()
	if err := tab.Open(page.URL); err != nil {
		return failAll(err)
	}
	adapter, err := tab.Adapter()
	if err == nil && adapter == "" {
		err = fmt.Errorf("the page has no WebGPU adapter (navigator.gpu)")
	}
	if err != nil {
		return failAll(err)
	}
	dev := &benchreport.Device{Backend: browserBackend, Name: adapter, Type: "browser", Driver: br.Version()}
	run := 0
	for i, src := range sources {
		base := bases[i]
		base.Device = adapter
		if src.file == "" {
			fail(base, fmt.Errorf("synthetic models are not offered to the browser (give a model file)"))
			continue
		}
		bar.Describe(fmt.Sprintf("loading %s in the browser", src.name))
		type loadInfo struct {
			Backend     string `json:"backend"`
			Vocab       int    `json:"vocab"`
			MaxCache    int    `json:"maxCache"`
			KVCache     string `json:"kvCache"`     // the KV cache's type, as the native rows give it
			Activations string `json:"activations"` // the activations' type
			Timestamps  bool   `json:"timestamps"`  // the page's device keeps timestamps (gpurun.timeDecode works)
		}
		start := time.Now()
		info, err := browser.Eval[loadInfo](tab, fmt.Sprintf("gpurunPage.loadServed(%q, 'webgpu', %d, %d)", filepath.Base(src.file), rf.maxCache, rf.steps))
		if err != nil {
			fail(base, fmt.Errorf("load: %w", err))
			continue
		}
		base.LoadSeconds = time.Since(start).Seconds()
		base.MaxCache = info.MaxCache
		base.KVCache, base.ActivationDType = info.KVCache, info.Activations
		for _, t := range tests {
			res := base
			res.Test = t
			bar.Describe(fmt.Sprintf("%s in the browser, %s", src.name, t.Name))
			done := 0
			err := func() error {
				if t.MaxCache != 0 && info.MaxCache != t.MaxCache {
					return fmt.Errorf("%s needs a %d-token KV cache, the page loaded the model with %d (--max-cache)", t.Name, t.MaxCache, info.MaxCache)
				}
				if t.PromptTokens+t.GenerateTokens > info.MaxCache {
					return fmt.Errorf("%s: %d prompt + %d generated tokens exceed the KV cache of %d (raise --max-cache)", t.Name, t.PromptTokens, t.GenerateTokens, info.MaxCache)
				}
				for r := -bf.warmup; r < bf.reps; r++ {
					run++
					ids, _ := json.Marshal(benchPrompt(t.PromptTokens, info.Vocab, run))
					g, err := browser.Eval[browserGen](tab, fmt.Sprintf("gpurun.generate('', {promptIds: %s, maxTokens: %d, ignoreStop: true})", ids, t.GenerateTokens))
					if err != nil {
						return err
					}
					bar.Add(1)
					done++
					if g.PrefillTokens != t.PromptTokens || g.GeneratedTokens != t.GenerateTokens {
						return fmt.Errorf("run %d prefilled %d of %d prompt tokens and generated %d of %d", run, g.PrefillTokens, t.PromptTokens, g.GeneratedTokens, t.GenerateTokens)
					}
					if r >= 0 {
						res.Runs = append(res.Runs, benchreport.Run{PromptTokens: g.PromptTokens, GeneratedTokens: g.GeneratedTokens,
							TimeToFirstTokenMS: g.TTFTMs, PrefillTokensPerSec: g.PrefillTokPerSec, DecodeTokensPerSec: g.DecodeTokPerSec})
					}
				}
				if bf.profile {
					run++
					ids, _ := json.Marshal(benchPrompt(t.PromptTokens, info.Vocab, run))
					steps, err := browser.Eval[[]pipeline.StepProfile](tab, fmt.Sprintf("gpurun.profile(%s)", ids))
					if err != nil {
						return fmt.Errorf("profile: %w", err)
					}
					if res.Kernels, err = stepKernels(steps, t); err != nil {
						return err
					}
				}
				return nil
			}()
			if err != nil {
				fmt.Fprintf(log, "bench: %s in the browser, %s: %v\n", src.name, t.Name, err)
				bar.Add64(runsPer - int64(done))
				res.Runs, res.Error = []benchreport.Run{}, err.Error()
			} else {
				res.Summarize()
				if steps := decodeSteps(t); steps > 0 && info.Timestamps {
					// The page's device time per decode step, for its
					// host time beside native's (the native rows' decodeDevice).
					run++
					ids, _ := json.Marshal(benchPrompt(t.PromptTokens, info.Vocab, run))
					type decodeTime struct {
						DeviceMs float64 `json:"deviceMs"`
						StepsMs  float64 `json:"stepsMs"`
						Steps    int     `json:"steps"`
					}
					d, err := browser.Eval[decodeTime](tab, fmt.Sprintf("gpurun.timeDecode(%s, %d)", ids, steps))
					if err == nil && d.Steps > 0 {
						res.SetDecodeDevice(d.DeviceMs/float64(d.Steps), d.StepsMs/float64(d.Steps))
					} else if err != nil {
						fmt.Fprintf(log, "bench: %s in the browser, %s: device time of the decode steps: %v\n", src.name, t.Name, err)
					}
				}
			}
			out = append(out, res)
		}
		if bf.coldLoad && len(tests) > 0 {
			bar.Describe(fmt.Sprintf("%s in the browser: two visits", src.name))
			benchVisits(log, br, page.URL, src.name, filepath.Base(src.file), rf, info.Vocab, tests[0].PromptTokens)
		}
	}
	return out, dev
}

// browserVisit is what a visit of benchVisits measures.
type browserVisit struct {
	FromStore       bool    `json:"fromStore"`
	FetchMs         float64 `json:"fetchMs"`
	LoadServedMs    float64 `json:"loadServedMs"`
	SincePageLoadMs float64 `json:"sincePageLoadMs"`
}

// benchVisits measures the page's time to first token from page load on
// a first visit (the browser's model store emptied: the model is
// downloaded) and on a second one (read from the Origin Private File
// System), each a fresh tab of the same browser profile, on WebGPU (the
// page compiles its kernels on each visit) with a prompt of promptTokens
// ids (at least 1) and one generated token, and writes them to log: the
// page's cold and warm start beside the native rows' cold and warm loads
// (--cold-load).
func benchVisits(log io.Writer, br *browser.Browser, url, model, name string, rf *benchModelFlags, vocab, promptTokens int) {
	var visits []browserVisit
	for i := range 2 {
		v, err := func() (browserVisit, error) {
			tab, err := br.NewTab(false)
			if err != nil {
				return browserVisit{}, err
			}
			defer tab.Close()
			if err := tab.Open(url); err != nil {
				return browserVisit{}, err
			}
			if i == 0 {
				if _, err := browser.Eval[bool](tab, "gpurunPage.forget().then(() => true)"); err != nil {
					return browserVisit{}, fmt.Errorf("forgetting the stored models: %w", err)
				}
			}
			ids, _ := json.Marshal(benchPrompt(max(promptTokens, 1), vocab, i))
			return browser.Eval[browserVisit](tab, fmt.Sprintf(`(async () => {
				const info = await gpurunPage.loadServed(%q, "webgpu", %d, %d);
				const r = await gpurunPage.generate("", {maxTokens: 1, promptIds: %s, ignoreStop: true});
				return {sincePageLoadMs: r.sincePageLoadMs, fromStore: info.fromStore, fetchMs: info.fetchMs, loadServedMs: info.loadServedMs};
			})()`, name, rf.maxCache, rf.steps, ids))
		}()
		if err != nil {
			fmt.Fprintf(log, "bench: %s in the browser, visit %d: %v\n", model, i+1, err)
			return
		}
		visits = append(visits, v)
	}
	where := map[bool]string{true: "read from the Origin Private File System", false: "downloaded"}
	fmt.Fprintf(log, "bench: %s in the browser, time to first token from page load: first visit %.0f ms (model %s in %.0f ms, loaded in %.0f ms), second visit %.0f ms (model %s in %.0f ms, loaded in %.0f ms)\n",
		model, visits[0].SincePageLoadMs, where[visits[0].FromStore], visits[0].FetchMs, visits[0].LoadServedMs,
		visits[1].SincePageLoadMs, where[visits[1].FromStore], visits[1].FetchMs, visits[1].LoadServedMs)
}
