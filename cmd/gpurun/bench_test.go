package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gpurun/gpurun"

	"github.com/gpurun/gpurun/cmd/gpurun/internal/benchreport"
	"github.com/gpurun/gpurun/cmd/gpurun/internal/benchreport/reporttest"
	"github.com/gpurun/gpurun/internal/browser"
	"github.com/gpurun/gpurun/internal/convert"
	"github.com/gpurun/gpurun/internal/synthetic"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// benchJSON runs bench with --json and reads the report, checking it
// against the schema.
func benchJSON(t *testing.T, args ...string) *benchreport.Report {
	t.Helper()
	out := mustRun(t, "", append([]string{"bench", "--json"}, args...)...)
	if err := reporttest.Validate(reporttest.Schema(t), []byte(out)); err != nil {
		t.Fatalf("bench --json does not match the schema: %v\n%s", err, out)
	}
	rep, err := benchreport.ReadJSON(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestBench sweeps two activation policies under three tests on the CPU:
// every result is there in sweep order, each measured run prefilled and
// generated exactly what its test says (stop tokens are ignored), the
// figures each test measures are summarized and the others absent, and the
// environment is filled in. --report writes the same JSON, Markdown that
// parses back to the same numbers, and HTML with one bar per configuration
// in headless chromium; --compare relates a second run to the first.
func TestBench(t *testing.T) {
	task := convertStories(t, "int8")
	dir := t.TempDir()
	rep := benchJSON(t, "-m", task, "--backend", "cpu", "--activations", "f32,f16", "--tests", "pp16,tg8,pp8+tg4",
		"--reps", "3", "--report", dir)
	if len(rep.Results) != 6 {
		t.Fatalf("%d results, want 2 policies x 3 tests", len(rep.Results))
	}
	st, err := os.Stat(task)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rep.Results {
		wantTest := []string{"pp16", "tg8", "pp8+tg4"}[i%3]
		wantAct := []string{"f32", "f16"}[i/3]
		if r.Error != "" || r.Test.Name != wantTest || r.Activations != wantAct || r.KVCache != wantAct || r.Backend != "cpu" ||
			r.Weights != "int8" || r.Model != "stories260K-int8" || r.Arch != "llama" || r.ModelBytes != st.Size() || r.PeakRSSBytes <= 0 {
			t.Errorf("result %d: %+v", i, r)
		}
		if len(r.Runs) != 3 {
			t.Fatalf("result %d: %d runs, want 3", i, len(r.Runs))
		}
		if r.DecodeStep != nil {
			t.Errorf("result %d: the CPU backend keeps no timestamps, yet a decode step split %+v", i, *r.DecodeStep)
		}
		for _, run := range r.Runs {
			if run.PromptTokens != r.Test.PromptTokens || run.GeneratedTokens != r.Test.GenerateTokens || run.TimeToFirstTokenMS <= 0 || run.PrefillTokensPerSec <= 0 {
				t.Errorf("%s: run %+v", r.Key(), run)
			}
			if r.Test.GenerateTokens > 1 && run.DecodeTokensPerSec <= 0 {
				t.Errorf("%s: no decode speed in %+v", r.Key(), run)
			}
		}
		ttft, prefill, decode := r.Test.Metrics()
		if (r.TimeToFirstTokenMS != nil) != ttft || (r.PrefillTokensPerSec != nil) != prefill || (r.DecodeTokensPerSec != nil) != decode {
			t.Errorf("%s: statistics %v %v %v, want %v %v %v", r.Key(), r.TimeToFirstTokenMS, r.PrefillTokensPerSec, r.DecodeTokensPerSec, ttft, prefill, decode)
		}
		for _, s := range []*benchreport.Stat{r.TimeToFirstTokenMS, r.PrefillTokensPerSec, r.DecodeTokensPerSec} {
			if s != nil && (s.N != 3 || s.Min > s.Median || s.Median > s.Max || s.Min <= 0) {
				t.Errorf("%s: statistic %+v", r.Key(), *s)
			}
		}
	}
	tg := rep.Results[1].Test
	if tg.PromptTokens != 1 || tg.GenerateTokens != 9 || tg.Kind != benchreport.KindGenerate {
		t.Errorf("tg8 is %+v, want a one-token prompt and 8 decode steps", tg)
	}
	env := rep.Environment
	if env.GoVersion == "" || env.CPU == "" || env.CPUs < 1 || env.Revision == "" || env.PeakRSSBytes <= 0 ||
		len(env.Devices) != 1 || env.Devices[0].Backend != "cpu" || rep.Protocol.Reps != 3 || rep.Protocol.Warmup != 1 ||
		rep.Incomplete || (runtime.GOOS == "linux" && len(env.LoadAverage) != 2) {
		t.Errorf("environment %+v, protocol %+v", env, rep.Protocol)
	}

	// --report DIR: the same JSON, Markdown and HTML.
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	rep.WriteJSON(&again)
	if !bytes.Equal(data, again.Bytes()) {
		t.Errorf("report.json differs from the --json output")
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	reporttest.CheckResultsTable(t, rep, string(md))
	reporttest.Check(t, rep, filepath.Join(dir, "report.html"))

	// --compare: the same tests again, one of them dropped, against the
	// first run; the ratios are this run's medians over those.
	cur := benchJSON(t, "-m", task, "--backend", "cpu", "--activations", "f32,f16", "--tests", "pp16,tg8", "--reps", "2",
		"--compare", filepath.Join(dir, "report.json"))
	b := cur.Baseline
	if b == nil || len(b.Changes) != 4 || b.Path != filepath.Join(dir, "report.json") || b.Revision != rep.Environment.Revision {
		t.Fatalf("baseline %+v", b)
	}
	for i, c := range b.Changes {
		r, o := cur.Results[i], rep.Results[i/2*3+i%2]
		if c.Key != r.Key() || c.Key != o.Key() {
			t.Errorf("change %d is %s, want %s", i, c.Key, r.Key())
		}
		want, got := o.PrefillTokensPerSec, c.PrefillTokensPerSec
		cs := r.PrefillTokensPerSec
		if r.Test.Kind == benchreport.KindGenerate {
			want, got, cs = o.DecodeTokensPerSec, c.DecodeTokensPerSec, r.DecodeTokensPerSec
		}
		if got == nil || got.Old != want.Median || got.Ratio != cs.Median/want.Median {
			t.Errorf("%s: ratio %+v against old %+v, new %+v", c.Key, got, want, cs)
		}
	}
	// --from renders a report without measuring: the same JSON; against
	// itself every ratio is 1 and within the spread.
	dir2 := t.TempDir()
	if out := mustRun(t, "", "bench", "--from", filepath.Join(dir, "report.json"), "--json", "--report", dir2); out != string(data) {
		t.Errorf("bench --from --json changed the report")
	}
	reporttest.CheckResultsTable(t, rep, mustRun(t, "", "bench", "--from", filepath.Join(dir2, "report.json")))
	self := benchJSON(t, "--from", filepath.Join(dir, "report.json"), "--compare", filepath.Join(dir, "report.json"))
	if self.Baseline == nil || len(self.Baseline.Changes) != 6 {
		t.Fatalf("self comparison %+v", self.Baseline)
	}
	for _, c := range self.Baseline.Changes {
		for _, r := range []*benchreport.Ratio{c.TimeToFirstTokenMS, c.PrefillTokensPerSec, c.DecodeTokensPerSec} {
			if r != nil && (r.Ratio != 1 || r.Verdict != benchreport.Same) {
				t.Errorf("%s against itself: %+v", c.Key, r)
			}
		}
	}
	if _, _, err := runCLI(t, "", "bench", "--from", filepath.Join(dir, "report.json"), "--tests", "pp8"); err == nil || !strings.Contains(err.Error(), "--tests") {
		t.Errorf("--from with --tests: %v", err)
	}

	text, stderr, err := runCLI(t, "", "bench", "-m", task, "--backend", "cpu", "--tests", "pp4", "--reps", "1", "--warmup", "0",
		"--compare", filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	// stderr is not a terminal here: no progress bar.
	if strings.ContainsAny(stderr, "\r█") {
		t.Errorf("a progress bar on a stderr that is not a terminal: %q", stderr)
	}
	if !strings.Contains(text, "| model | weights |") || !strings.Contains(text, "No result of this run has a match") {
		t.Errorf("a run sharing no test with the baseline:\n%s", text)
	}
}

// TestBenchMediaPipe: the mediapipe test prefills 1024 tokens and
// generates 256 in a 1280-token cache; a model or cache shorter than that
// cannot run it.
func TestBenchMediaPipe(t *testing.T) {
	// A small random Llama with a 2048-token context.
	cfg, _ := synthetic.ByName("llama-110m")
	cfg.Dim, cfg.HiddenDim, cfg.Layers, cfg.Heads, cfg.KVHeads, cfg.HeadDim, cfg.RopeDims = 64, 128, 2, 4, 4, 16, 16
	cfg.VocabSize, cfg.MaxSeqLen = 512, 2048
	ck, err := synthetic.Checkpoint(cfg, synthetic.Options{Quant: synthetic.QuantInt8, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	small := filepath.Join(t.TempDir(), "small.tflite")
	if err := convert.WriteFile(small, ck.Config, ck.Tensors, nil, nil); err != nil {
		t.Fatal(err)
	}
	rep := benchJSON(t, small, "--backend", "cpu", "--tests", "mediapipe", "--reps", "1", "--warmup", "0")
	r := rep.Results[0]
	if r.Error != "" || r.MaxCache != 1280 || len(r.Runs) != 1 || r.Runs[0].PromptTokens != 1024 || r.Runs[0].GeneratedTokens != 256 ||
		r.TimeToFirstTokenMS == nil || r.PrefillTokensPerSec == nil || r.DecodeTokensPerSec == nil {
		t.Errorf("%+v", r)
	}
	for _, args := range [][]string{
		{small, "--max-cache", "1024"},
		{convertStories(t, "int4")}, // trained on 512 positions
	} {
		_, _, err := runCLI(t, "", append([]string{"bench", "--backend", "cpu", "--tests", "mediapipe"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "1280-token KV cache") {
			t.Errorf("mediapipe %v: %v", args, err)
		}
	}
}

// TestBenchSynthetic sweeps the weight types of a synthetic shape; each is
// its own configuration with its own model bytes.
func TestBenchSynthetic(t *testing.T) {
	rep := benchJSON(t, "--synthetic", "llama-110m", "--synthetic-quant", "int8,int4", "--backend", "cpu", "--tests", "pp2",
		"--reps", "1", "--warmup", "0")
	if len(rep.Results) != 2 {
		t.Fatalf("%d results", len(rep.Results))
	}
	a, b := rep.Results[0], rep.Results[1] // weights vary fastest after the backend
	if a.Weights != "int8" || b.Weights != "int4" || a.Source != "synthetic" || a.Model != "llama-110m" || a.Error != "" || b.Error != "" ||
		a.ModelBytes <= b.ModelBytes || b.ModelBytes < 50<<20 {
		t.Errorf("results %+v\n%+v", a, b)
	}
}

// TestBenchBackends: one invocation over every backend, rendered.
func TestBenchBackends(t *testing.T) {
	requireBackend(t, "vulkan")
	requireBackend(t, "webgpu")
	task := convertStories(t, "f16")
	dir := t.TempDir()
	rep := benchJSON(t, "-m", task, "--backend", "cpu,vulkan,webgpu", "--tests", "pp8,tg4", "--reps", "2", "--report", dir)
	if len(rep.Results) != 6 || len(rep.Environment.Devices) != 3 {
		t.Fatalf("%d results on %d devices", len(rep.Results), len(rep.Environment.Devices))
	}
	for i, r := range rep.Results {
		if want := []string{"cpu", "vulkan", "webgpu"}[i/2]; r.Backend != want || r.Error != "" || r.Device == "" {
			t.Errorf("result %d: %+v", i, r)
		}
		// The GPU backends hold at least the weights on the device (the
		// file adds a tokenizer and headers: half its size is a safe floor).
		if gpuBackend := r.Backend != "cpu"; gpuBackend != (r.DeviceMemoryBytes >= r.ModelBytes/2) || (!gpuBackend && r.DeviceMemoryBytes != 0) {
			t.Errorf("result %d on %s: device memory %d bytes for a %d-byte model", i, r.Backend, r.DeviceMemoryBytes, r.ModelBytes)
		}
		// GPU configurations are loaded cold (empty pipeline cache), then
		// warm; the CPU backend has no pipelines and loads once.
		if gpuBackend := r.Backend != "cpu"; gpuBackend != (r.LoadColdSeconds > 0) || r.LoadSeconds <= 0 {
			t.Errorf("result %d on %s: load %gs, cold load %gs", i, r.Backend, r.LoadSeconds, r.LoadColdSeconds)
		}
		if r.Backend != "vulkan" && (r.PipelineCacheBytes != 0 || r.PipelineCacheHits != 0) {
			t.Errorf("result %d on %s: a pipeline cache (%d bytes, %d hits) on a backend without one", i, r.Backend, r.PipelineCacheBytes, r.PipelineCacheHits)
		}
	}
	reporttest.Check(t, rep, filepath.Join(dir, "report.html"))
}

func TestBenchErrors(t *testing.T) {
	task := convertStories(t, "int8")
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"schema_version": 99}`), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench"}, "model is required"},
		{[]string{"bench", "--synthetic", "no-such-model"}, "--synthetic no-such-model: want one of"},
		{[]string{"bench", "--synthetic", "llama-110m", "--synthetic-quant", "int3"}, "synthetic-quant"},
		{[]string{"bench", "-m", task, "--prompt-len", "1000", "--generate", "1000"}, "nothing could be measured"},
		{[]string{"bench", "-m", task, "--reps", "0"}, "--reps 0: want"},
		{[]string{"bench", "-m", task, "--tests", "pp0"}, "unknown test"},
		{[]string{"bench", "-m", task, "--tests", "pp8,tgx"}, "unknown test"},
		{[]string{"bench", "-m", task, "--tests", "pp8,pp8"}, "twice"},
		{[]string{"bench", "-m", task, "--tests", "pp8", "--generate", "3"}, "not both"},
		{[]string{"bench", "-m", task, "--backend", "cpu,metal"}, "--backend metal: want one of"},
		{[]string{"bench", "-m", task, "--activations", "f32,bf16"}, "activation policy"},
		{[]string{"bench", "-m", task, "--compare", bad}, "schema version"},
		{[]string{"bench", "-m", task, "--compare", "does-not-exist.json"}, "--compare"},
		{[]string{"bench", "-m", "does-not-exist.task"}, "does-not-exist"},
		{[]string{"bench", "--from", bad}, "schema version"},
	} {
		_, _, err := runCLI(t, "", tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("gpurun %v: error %v, want one saying %q", tc.args, err, tc.want)
		}
	}
}

// TestBenchProfile: --profile adds to each result the kernels of the steps
// its test measures (pp: prefill, tg: decode, combined: both), each with
// device time and the matrix kernels with their work, in the JSON and
// Markdown reports; the CPU backend, which has no profiler, fails with a
// clear error. The prompts run in 8-token chunks (--prefill-chunk): the
// profile times the first chunk, runs the rest, then times the decode step.
func TestBenchProfile(t *testing.T) {
	requireBackend(t, "vulkan")
	task := convertStories(t, "int8")
	dir := t.TempDir()
	rep := benchJSON(t, "-m", task, "--backend", "vulkan", "--tests", "pp9,tg2,pp9+tg2", "--reps", "1", "--warmup", "0", "--profile", "--report", dir,
		"--prefill-chunk", "8")
	if len(rep.Results) != 3 {
		t.Fatalf("%d results, want 3", len(rep.Results))
	}
	for i, r := range rep.Results {
		if r.Error != "" {
			t.Fatalf("%s: %s", r.Test.Name, r.Error)
		}
		steps := map[string]bool{}
		matrix := map[string]bool{}
		for _, k := range r.Kernels {
			step, kernel, ok := strings.Cut(k.Name, " ")
			if !ok || k.Calls <= 0 || k.TimeMS < 0 {
				t.Errorf("%s: kernel %+v", r.Test.Name, k)
			}
			steps[step] = true
			if strings.HasPrefix(kernel, "matvec") || strings.HasPrefix(kernel, "matmul") {
				matrix[step] = true
				if k.Bytes <= 0 || k.Flops <= 0 {
					t.Errorf("%s %s: no work counted: %+v", r.Test.Name, k.Name, k)
				}
			}
		}
		// A test that decodes splits its decode step into device and host
		// time (the device's from a timed rerun of its decode steps).
		if d := r.DecodeStep; (d != nil) != (i > 0) {
			t.Errorf("%s: decode step %+v", r.Test.Name, d)
		} else if d != nil && (d.DeviceMS <= 0 || d.WallMS != 1000/r.DecodeTokensPerSec.Median || d.HostMS != d.WallMS-d.DeviceMS || d.TimedWallMS < d.DeviceMS) {
			t.Errorf("%s: decode step %+v at %v tok/s", r.Test.Name, *d, r.DecodeTokensPerSec.Median)
		}
		want := [][]string{{"prefill"}, {"decode"}, {"prefill", "decode"}}[i]
		if len(steps) != len(want) {
			t.Errorf("%s: steps %v, want %v", r.Test.Name, steps, want)
		}
		for _, s := range want {
			if !steps[s] || !matrix[s] {
				t.Errorf("%s: step %s missing or without a matrix kernel: %+v", r.Test.Name, s, r.Kernels)
			}
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(md), "## Kernels: "); n != 3 {
		t.Errorf("report.md has %d kernel tables, want 3", n)
	}
	if !strings.Contains(string(md), "## Decode step: device and host") {
		t.Errorf("report.md has no decode step table")
	}
	if _, _, err := runCLI(t, "", "bench", "-m", task, "--backend", "cpu", "--tests", "pp4", "--reps", "1", "--profile"); err == nil {
		t.Error("--profile on the CPU backend: want an error")
	}
}

// TestBenchCPUMath: the CPU backend runs with gpurun's default math unless
// --cpu-math says otherwise, and the report's device says which.
func TestBenchCPUMath(t *testing.T) {
	task := convertStories(t, "int8")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, gpurun.DefaultCPUMath.String() + " math"},
		{[]string{"--cpu-math", "exact"}, "exact math"},
		{[]string{"--cpu-math", "dynamic"}, "dynamic math"},
	} {
		rep := benchJSON(t, append([]string{"-m", task, "--backend", "cpu", "--tests", "tg2", "--reps", "1", "--warmup", "0"}, tc.args...)...)
		if len(rep.Results) != 1 || !strings.Contains(rep.Results[0].Device, tc.want) {
			t.Errorf("%v: results %+v, want a device with %q", tc.args, rep.Results, tc.want)
		}
	}
}

// TestBenchDecodeBytes: every result carries what a decode step reads
// (stories260K: 5 layers, 4 kv heads of 8 dims, an f32 cache on the CPU:
// 1280 bytes of K and V per position; weights: everything but the
// embedding table's other rows), and two prompt lengths of one
// configuration give one row of the decode table, its prompt run in
// chunks of at most 8 tokens (--prefill-chunk).
func TestBenchDecodeBytes(t *testing.T) {
	task := convertStories(t, "int8")
	rep := benchJSON(t, "-m", task, "--backend", "cpu", "--activations", "f32", "--tests", "pp4+tg3,pp40+tg3",
		"--reps", "1", "--warmup", "0", "--prefill-chunk", "8")
	st, err := os.Stat(task)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rep.Results {
		if r.Error != "" || r.KVBytesPerPosition != 2*5*4*8*4 || r.DecodeWeightBytes <= 0 || r.DecodeWeightBytes >= st.Size() {
			t.Errorf("result %d: %s, decode bytes %d weights + %d per position (file %d bytes)", i, r.Error, r.DecodeWeightBytes, r.KVBytesPerPosition, st.Size())
		}
		if len(r.Runs) != 1 || r.Runs[0].PromptTokens != r.Test.PromptTokens {
			t.Errorf("result %d: runs %+v", i, r.Runs)
		}
	}
	rows := rep.DecodeBytesRows()
	if len(rows) != 1 || rows[0].Test != "pp40+tg3" || rows[0].Ref != "pp4+tg3" || rows[0].Predicted >= 1 || rows[0].Measured <= 0 {
		t.Errorf("decode table %+v, want pp40+tg3 against pp4+tg3", rows)
	}
	if _, _, err := runCLI(t, "", "bench", "-m", task, "--prefill-chunk", "0"); err == nil {
		t.Error("--prefill-chunk 0 accepted")
	}
}

// TestBenchDecodeBytesMoE: a mixture of experts reports its active bytes
// per token: of the tiny qwen3moe (llama.cpp's tensor list, all F32), every
// tensor but the embedding's other rows and, of the expert tensors, the
// share of the 2 experts of 4 a token uses.
func TestBenchDecodeBytesMoE(t *testing.T) {
	g := testmodels.Arch2(t, "qwen3moe")
	var want int64
	for name, dims := range g.Tensors {
		n := int64(4)
		for _, d := range dims {
			n *= int64(d)
		}
		switch {
		case name == "token_embd.weight":
			n /= int64(dims[1]) // one row of [embd, vocab]
		case strings.Contains(name, "_exps."):
			n = n / int64(g.Dims.NExpert) * int64(g.Dims.NExpertUsed)
		}
		want += n
	}
	rep := benchJSON(t, "-m", testmodels.Path(t, "arch2", "qwen3moe.gguf"), "--backend", "cpu", "--tests", "pp4+tg3",
		"--reps", "1", "--warmup", "0")
	for i, r := range rep.Results {
		if r.Error != "" || r.DecodeWeightBytes != want {
			t.Errorf("result %d: %s, decode weight bytes %d, want %d", i, r.Error, r.DecodeWeightBytes, want)
		}
	}
}

// TestBenchBrowserWithoutChromium: --backend browser beside a native
// backend, with no Chromium to drive, measures the native rows and lists
// the browser's as not measured, saying why (the browser rows themselves
// run in cmd/gpurun-web's TestBrowser's driver, internal/browser).
func TestBenchBrowserWithoutChromium(t *testing.T) {
	task := convertStories(t, "int8")
	t.Setenv(browser.Env, filepath.Join(t.TempDir(), "no-chromium"))
	rep := benchJSON(t, "-m", task, "--backend", "cpu,browser", "--tests", "pp4", "--reps", "1", "--warmup", "0")
	if len(rep.Results) != 2 {
		t.Fatalf("%d results, want a cpu and a browser row", len(rep.Results))
	}
	cpuRow, browserRow := rep.Results[0], rep.Results[1]
	if cpuRow.Backend != "cpu" || cpuRow.Error != "" || len(cpuRow.Runs) != 1 {
		t.Errorf("cpu row: backend %s, error %q, %d runs", cpuRow.Backend, cpuRow.Error, len(cpuRow.Runs))
	}
	if browserRow.Backend != "browser" || !strings.Contains(browserRow.Error, "no Chromium") || len(browserRow.Runs) != 0 {
		t.Errorf("browser row: backend %s, error %q, %d runs", browserRow.Backend, browserRow.Error, len(browserRow.Runs))
	}
}

// TestBenchCPUProfile: --cpuprofile writes a Go CPU profile of the run
// (gzipped protobuf, what go tool pprof reads); a path it cannot create is an error before any
// measuring.
func TestBenchCPUProfile(t *testing.T) {
	task := convertStories(t, "int8")
	path := filepath.Join(t.TempDir(), "cpu.prof")
	benchJSON(t, "-m", task, "--backend", "cpu", "--tests", "tg8", "--reps", "1", "--warmup", "0", "--cpuprofile", path)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) < 2 || raw[0] != 0x1f || raw[1] != 0x8b {
		t.Fatalf("--cpuprofile wrote %d bytes that are not gzip", len(raw))
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	// A profile of a run this short may hold no sample; its header names
	// the sampling period's unit.
	if !bytes.Contains(body, []byte("nanoseconds")) {
		t.Errorf("the profile (%d bytes) has no CPU sampling header", len(body))
	}
	_, _, err = runCLI(t, "", "bench", "-m", task, "--backend", "cpu", "--tests", "tg1", "--cpuprofile", filepath.Join(t.TempDir(), "no", "such", "dir", "p"))
	if err == nil || !strings.Contains(err.Error(), "--cpuprofile") {
		t.Errorf("an uncreatable profile path: %v, want an error naming --cpuprofile", err)
	}
}
