package benchreport

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// sampleReport is a report with every kind of content: two models, three
// backends, weights and activation policies, the four test kinds, a failed
// configuration and a profiled result. Its figures are arbitrary but
// distinct, so a value printed in the wrong cell is caught.
func sampleReport() *Report {
	r := &Report{
		SchemaVersion: SchemaVersion,
		Created:       time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC),
		Command:       []string{"gpurun", "bench", "--synthetic", "llama-110m,tinyllama-1.1b"},
		Environment: Environment{OS: "linux", Arch: "amd64", CPU: "Test CPU | 2 GHz", CPUs: 2, GoVersion: "go1.26.8",
			Revision: "0123456789abcdef", Modified: true, PeakRSSBytes: 3 << 30, LoadAverage: []float64{1.5, 2.25},
			Devices: []Device{{Backend: "cpu", Name: "Go", Type: "cpu", Driver: "go"}, {Backend: "vulkan", Name: "llvmpipe <256 bits>", Type: "cpu", Driver: "Mesa"}}},
		Protocol: Protocol{Reps: 3, Warmup: 1, Description: "random ids, greedy"},
	}
	tests := []Test{
		{Name: "pp16", Kind: KindPrompt, PromptTokens: 16, GenerateTokens: 1},
		{Name: "tg8", Kind: KindGenerate, PromptTokens: 1, GenerateTokens: 9},
		{Name: "pp8+tg4", Kind: KindCombined, PromptTokens: 8, GenerateTokens: 4},
		{Name: "mediapipe", Kind: KindMediaPipe, PromptTokens: 1024, GenerateTokens: 256, MaxCache: 1280},
	}
	seed := 1.0
	for _, m := range []string{"llama-110m", "tinyllama-1.1b"} {
		for _, w := range []string{"f32", "int4"} {
			for _, b := range []string{"cpu", "vulkan", "webgpu"} {
				for _, act := range []string{"f32", "f16"} {
					for _, t := range tests {
						res := Result{Model: m, Source: "synthetic", Arch: "llama", Weights: w, Activations: act, ActivationDType: act, KVCache: act,
							Backend: b, Device: "dev-" + b, ModelBytes: int64(seed * 1e6), MaxCache: 1280, LoadSeconds: 1.5,
							PeakRSSBytes: int64(seed * 3e6), Test: t, DecodeWeightBytes: 110e6, KVBytesPerPosition: 36864, KVCacheBytes: 1280 * 36864}
						if b != "cpu" {
							res.DeviceMemoryBytes = int64(seed * 2e6)
							res.LoadColdSeconds = 2.75
						}
						if b == "vulkan" {
							res.PipelineCacheBytes, res.PipelineCacheHits = 3<<20, 40
						}
						for k := range 3 {
							seed++
							v := seed * (1 + 0.01*float64(k))
							res.Runs = append(res.Runs, Run{PromptTokens: t.PromptTokens, GeneratedTokens: t.GenerateTokens,
								TimeToFirstTokenMS: 1000 / v, PrefillTokensPerSec: v * 1.7, DecodeTokensPerSec: v / 3})
						}
						res.Summarize()
						r.Results = append(r.Results, res)
					}
				}
			}
		}
	}
	r.Results[5].Kernels = []Kernel{
		{Name: "matmul_q4", Calls: 154, TimeMS: 812.5, Bytes: 600e6, Flops: 2.2e9},
		{Name: "attention", Calls: 22, TimeMS: 101.25, Bytes: 20e6, Flops: 1e8},
		{Name: "rmsnorm", Calls: 45, TimeMS: 3.5, Bytes: 1e6, Flops: 1e6},
	}
	r.Results = append(r.Results, Result{Model: "tinyllama-1.1b", Source: "synthetic", Arch: "llama", Weights: "f32", Activations: "f32",
		KVCache: "f32", Backend: "webgpu", Device: "dev", Test: tests[0], Runs: []Run{}, Error: "weights of 4.4 GB exceed | the limit"})
	return r
}

// TestDecodeBytesRows: the shortest prompt of a configuration is the ref;
// a test 1000 positions further on, 36.9 MB more per step over 110 MB of
// weights, is predicted at 110.4/147.3 of the ref's speed.
func TestDecodeBytesRows(t *testing.T) {
	res := func(test Test, tps float64, backend string) Result {
		r := Result{Model: "m", Weights: "q8", Backend: backend, Activations: "model", KVCache: "f16", MaxCache: 1024, Test: test,
			DecodeWeightBytes: 110e6, KVBytesPerPosition: 36864}
		r.Runs = []Run{{DecodeTokensPerSec: tps}}
		r.Summarize()
		return r
	}
	long := Test{Name: "pp1000+tg16", Kind: KindCombined, PromptTokens: 1000, GenerateTokens: 16}
	short := Test{Name: "pp10+tg16", Kind: KindCombined, PromptTokens: 10, GenerateTokens: 16}
	r := &Report{Results: []Result{res(long, 3, "vulkan"), res(short, 4, "vulkan"), res(short, 4, "cpu")}}
	rows := r.DecodeBytesRows()
	if len(rows) != 1 {
		t.Fatalf("%d rows, want 1 (the cpu configuration has one test): %+v", len(rows), rows)
	}
	d := rows[0]
	ref := 110e6 + 36864*18.0
	cur := 110e6 + 36864*1008.0
	if d.Test != long.Name || d.Ref != short.Name || d.Positions != 1008 || math.Abs(d.Predicted-ref/cur) > 1e-9 ||
		d.Measured != 0.75 || math.Abs(d.OfPrediction-0.75*cur/ref) > 1e-9 {
		t.Errorf("row %+v, want %s against %s at 1008 positions, predicted %.4f, measured 0.75", d, long.Name, short.Name, ref/cur)
	}
	var md bytes.Buffer
	if err := r.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "## Decode and the valid length") {
		t.Errorf("markdown lacks the decode table:\n%s", md.String())
	}
}

func TestReadJSONRejects(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want error
	}{
		{`{"schema_version": 2, "results": []}`, ErrVersion},
		{`{"results": []}`, ErrVersion},
		{`[1, 2]`, nil},
		{`not json`, nil},
		{`{"schema_version": 1, "results": [{"prefill_tokens_per_sec": {"median": -3, "min": 0, "max": 0, "n": 1}}]}`, nil},
	} {
		_, err := ReadJSON(strings.NewReader(tc.in))
		if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("ReadJSON(%q) = %v, want an error (%v)", tc.in, err, tc.want)
		}
	}
}

func TestNewStat(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want *Stat
	}{
		{nil, nil},
		{[]float64{5}, &Stat{5, 5, 5, 1}},
		{[]float64{3, 1, 2}, &Stat{2, 1, 3, 3}},
		{[]float64{4, 1, 3, 10}, &Stat{3.5, 1, 10, 4}},
	} {
		got := NewStat(tc.in)
		if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
			t.Errorf("NewStat(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestCompareVerdicts(t *testing.T) {
	st := func(med, lo, hi float64) *Stat { return &Stat{med, lo, hi, 3} }
	for _, tc := range []struct {
		name         string
		old, cur     *Stat
		higherBetter bool
		verdict      string
		ratio        float64
	}{
		{"overlap", st(10, 9, 11), st(10.5, 10.8, 12), true, Same, 1.05},
		{"faster speed", st(10, 9, 11), st(20, 19, 21), true, Faster, 2},
		{"slower speed", st(10, 9, 11), st(5, 4, 6), true, Slower, 0.5},
		{"longer ttft", st(10, 9, 11), st(20, 19, 21), false, Slower, 2},
		{"shorter ttft", st(10, 9, 11), st(5, 4, 6), false, Faster, 0.5},
		{"single rep flags any change", st(10, 10, 10), st(10.1, 10.1, 10.1), true, Faster, 1.01},
		{"zero old", st(0, 0, 0), st(1, 1, 1), true, Faster, 0},
	} {
		got := ratio(tc.old, tc.cur, tc.higherBetter)
		if got.Verdict != tc.verdict || math.Abs(got.Ratio-tc.ratio) > 1e-12 || got.Old != tc.old.Median {
			t.Errorf("%s: %+v, want verdict %s ratio %g", tc.name, got, tc.verdict, tc.ratio)
		}
	}
	if ratio(nil, st(1, 1, 1), true) != nil || ratio(st(1, 1, 1), nil, true) != nil {
		t.Error("a missing figure compares to something")
	}
	old, cur := sampleReport(), sampleReport()
	cur.Results = cur.Results[:10]
	cur.Results[0].Model = "renamed"
	b := Compare(old, cur, "old.json")
	if len(b.Changes) != 9 || b.Changes[0].Key != cur.Results[1].Key() {
		t.Errorf("%d changes (want 9: one result has no match), first %q", len(b.Changes), b.Changes[0].Key)
	}
	for _, c := range b.Changes {
		for _, rt := range []*Ratio{c.TimeToFirstTokenMS, c.PrefillTokensPerSec, c.DecodeTokensPerSec} {
			if rt != nil && (rt.Ratio != 1 || rt.Verdict != Same) {
				t.Errorf("%s: identical runs compare as %+v", c.Key, rt)
			}
		}
	}
}

func TestNiceAxis(t *testing.T) {
	for _, tc := range []struct{ hi, top, step float64 }{
		{0, 1, 0.25}, {math.NaN(), 1, 0.25}, {1, 1, 0.2}, {7.3, 8, 1}, {10, 10, 2}, {0.37, 0.4, 0.05}, {1234, 1400, 200}, {1100, 1200, 200}, {99, 100, 20},
	} {
		top, step := niceAxis(tc.hi)
		if math.Abs(top-tc.top) > 1e-9 || math.Abs(step-tc.step) > 1e-9 || top < tc.hi {
			t.Errorf("niceAxis(%g) = %g, %g; want %g, %g", tc.hi, top, step, tc.top, tc.step)
		}
	}
}

// TestLabelsSayWhatTheyMean: a configuration's label and activations cell
// spell the policy out, with the type it gave where known.
func TestLabelsSayWhatTheyMean(t *testing.T) {
	for _, tc := range []struct {
		policy, dtype, text string
	}{
		{"model", "f32", "model default (f32)"},
		{"model", "", "model default"},
		{"auto", "f16", "auto (f16)"},
		{"f16", "f16", "f16"},
	} {
		r := Result{Model: "stories260K", Weights: "int8", Backend: "vulkan", Activations: tc.policy, ActivationDType: tc.dtype, KVCache: "f16"}
		if got := r.ActivationsText(); got != tc.text {
			t.Errorf("%s/%s: %q, want %q", tc.policy, tc.dtype, got, tc.text)
		}
		want := "stories260K int8 · vulkan · activations: " + tc.text + " · KV cache f16"
		if got := r.Label(); got != want {
			t.Errorf("label %q, want %q", got, want)
		}
	}
}
