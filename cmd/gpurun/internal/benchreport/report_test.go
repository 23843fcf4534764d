package benchreport

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
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
			Revision: "0123456789abcdef", Modified: true, PeakRSSBytes: 3 << 30,
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
						res := Result{Model: m, Source: "synthetic", Arch: "llama", Weights: w, Activations: act, KVCache: act,
							Backend: b, Device: "dev-" + b, ModelBytes: int64(seed * 1e6), MaxCache: 1280, LoadSeconds: 1.5,
							PeakRSSBytes: int64(seed * 3e6), Test: t}
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

// measured counts the results with runs, and those per test and metric.
func measured(r *Report) (all int, per map[string]int) {
	per = map[string]int{}
	for _, res := range r.Results {
		if res.Error != "" {
			continue
		}
		all++
		if res.PrefillTokensPerSec != nil {
			per["prefill "+res.Test.Name]++
		}
		if res.DecodeTokensPerSec != nil {
			per["decode "+res.Test.Name]++
		}
		if len(res.Kernels) > 0 {
			per["kernels "+res.Test.Name]++
		}
	}
	return all, per
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// validateJSON checks JSON text against the schema.
func validateJSON(s *jsonschema.Schema, data []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

// TestJSONMatchesSchema: a report with every optional part validates
// against schema.json, survives ReadJSON, and mutations of it do not
// validate.
func TestJSONMatchesSchema(t *testing.T) {
	s := compileSchema(t)
	r := sampleReport()
	r.Baseline = Compare(sampleReport(), r, "old.json")
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if err := validateJSON(s, buf.Bytes()); err != nil {
		t.Fatalf("sample report does not match its schema: %v", err)
	}
	back, err := ReadJSON(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	back.WriteJSON(&again)
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Errorf("ReadJSON(WriteJSON(r)) changed the report")
	}

	// The schema must reject what the reader would misread: each mutation
	// of a valid report is invalid.
	for _, tc := range []struct {
		name   string
		mutate func(m map[string]any)
	}{
		{"no schema_version", func(m map[string]any) { delete(m, "schema_version") }},
		{"other version", func(m map[string]any) { m["schema_version"] = 2 }},
		{"unknown field", func(m map[string]any) { m["extra"] = 1 }},
		{"bad date", func(m map[string]any) { m["created"] = "yesterday" }},
		{"negative median", func(m map[string]any) {
			res := m["results"].([]any)[0].(map[string]any)
			res["prefill_tokens_per_sec"].(map[string]any)["median"] = -1
		}},
		{"unknown test kind", func(m map[string]any) {
			m["results"].([]any)[0].(map[string]any)["test"].(map[string]any)["kind"] = "pp512"
		}},
		{"kernel without time", func(m map[string]any) {
			delete(m["results"].([]any)[5].(map[string]any)["kernels"].([]any)[0].(map[string]any), "time_ms")
		}},
		{"unknown backend device", func(m map[string]any) {
			m["environment"].(map[string]any)["devices"].([]any)[0].(map[string]any)["backend"] = "metal"
		}},
		{"bad verdict", func(m map[string]any) {
			c := m["baseline"].(map[string]any)["changes"].([]any)[0].(map[string]any)
			c["prefill_tokens_per_sec"].(map[string]any)["verdict"] = "better"
		}},
	} {
		var m map[string]any
		if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		tc.mutate(m)
		data, _ := json.Marshal(m)
		if err := validateJSON(s, data); err == nil {
			t.Errorf("%s: the schema accepts it", tc.name)
		}
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

// mdTable returns the rows (cells unescaped) of the Markdown table whose
// header is header, failing when there is none.
func mdTable(t *testing.T, md string, header []string) [][]string {
	t.Helper()
	want := "| " + strings.Join(header, " | ") + " |"
	var rows [][]string
	in := false
	sc := bufio.NewScanner(strings.NewReader(md))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == want:
			in = true
		case in && strings.HasPrefix(line, "| ---"):
		case in && strings.HasPrefix(line, "|"):
			rows = append(rows, splitRow(line))
		case in:
			return rows
		}
	}
	if !in {
		t.Fatalf("no table with header %s", want)
	}
	return rows
}

// splitRow splits a Markdown table row at unescaped pipes.
func splitRow(line string) []string {
	line = strings.TrimSuffix(strings.TrimPrefix(line, "| "), " |")
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cur.WriteByte('|')
			i++
		case strings.HasPrefix(line[i:], " | "):
			cells = append(cells, cur.String())
			cur.Reset()
			i += 2
		default:
			cur.WriteByte(line[i])
		}
	}
	return append(cells, cur.String())
}

// parseStat reads "median ± half-range" ("-": nil).
func parseStat(t *testing.T, cell string) (med, half float64, ok bool) {
	t.Helper()
	if cell == "-" {
		return 0, 0, false
	}
	a, b, found := strings.Cut(cell, " ± ")
	m, err1 := strconv.ParseFloat(a, 64)
	h, err2 := strconv.ParseFloat(b, 64)
	if !found || err1 != nil || err2 != nil {
		t.Fatalf("cell %q is not median ± spread", cell)
	}
	return m, h, true
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// near2 reports whether printed is v at two decimals.
func near2(printed, v float64) bool { return math.Abs(printed-v) <= 0.005+1e-9 }

// TestMarkdownParsesBack: every number of the Markdown tables, parsed back,
// is the report's number at the printed precision, in the right row and
// column.
func TestMarkdownParsesBack(t *testing.T) {
	r := sampleReport()
	old := sampleReport()
	for i := range old.Results {
		if s := old.Results[i].DecodeTokensPerSec; s != nil && i%2 == 0 {
			s.Median, s.Min, s.Max = s.Median*2, s.Min*2, s.Max*2
		}
		if s := old.Results[i].PrefillTokensPerSec; s != nil && i%4 == 2 {
			s.Median, s.Min, s.Max = s.Median/2, s.Min/2, s.Max/2
		}
	}
	r.Baseline = Compare(old, r, "old|run.json")
	var buf bytes.Buffer
	if err := r.WriteMarkdown(&buf); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	rows := mdTable(t, md, resultsHeader)
	all, _ := measured(r)
	if len(rows) != all {
		t.Fatalf("%d result rows, want %d", len(rows), all)
	}
	check := func(where, cell string, s *Stat) {
		m, h, ok := parseStat(t, cell)
		if ok != (s != nil) {
			t.Errorf("%s: cell %q for %+v", where, cell, s)
			return
		}
		if ok && (!near2(m, s.Median) || !near2(h, s.HalfRange())) {
			t.Errorf("%s: parsed %g ± %g, report has %g ± %g", where, m, h, s.Median, s.HalfRange())
		}
	}
	i := 0
	for _, res := range r.Results {
		if res.Error != "" {
			continue
		}
		row := rows[i]
		i++
		where := res.Key()
		if len(row) != len(resultsHeader) {
			t.Fatalf("%s: %d cells: %q", where, len(row), row)
		}
		if got := strings.Join(row[:6], " | "); got != strings.Join([]string{res.Model, res.Weights, res.Backend, res.Activations, res.KVCache, res.Test.Name}, " | ") {
			t.Errorf("row %d names %q, want %s", i, got, where)
		}
		mb, _ := strconv.ParseFloat(row[6], 64)
		if !near2(mb, float64(res.ModelBytes)/(1<<20)) {
			t.Errorf("%s: model MiB %s", where, row[6])
		}
		check(where+" ttft", row[8], res.TimeToFirstTokenMS)
		check(where+" prefill", row[9], res.PrefillTokensPerSec)
		check(where+" decode", row[10], res.DecodeTokensPerSec)
	}

	crows := mdTable(t, md, compareHeader)
	if len(crows) != len(r.Baseline.Changes) {
		t.Fatalf("%d comparison rows, want %d", len(crows), len(r.Baseline.Changes))
	}
	for j, c := range r.Baseline.Changes {
		row := crows[j]
		for k, rt := range []*Ratio{c.TimeToFirstTokenMS, c.PrefillTokensPerSec, c.DecodeTokensPerSec} {
			cell := row[6+2*k]
			if rt == nil {
				if cell != "-" {
					t.Errorf("%s: ratio cell %q for no figure", c.Key, cell)
				}
				continue
			}
			text := strings.Trim(cell, "*")
			num, verdict, _ := strings.Cut(text, "x")
			v, err := strconv.ParseFloat(num, 64)
			if err != nil || !near2(v, rt.Ratio) || strings.TrimSpace(verdict) != map[string]string{Same: "", Faster: Faster, Slower: Slower}[rt.Verdict] {
				t.Errorf("%s: ratio cell %q, want %.2f %s", c.Key, cell, rt.Ratio, rt.Verdict)
			}
		}
	}
	// The baseline decodes twice as fast on every second result and
	// prefills half as fast on every fourth: changes beyond the spread.
	if !strings.Contains(md, "x slower**") || !strings.Contains(md, "x faster**") {
		t.Error("no flagged change in the comparison")
	}

	krows := mdTable(t, md, kernelHeader)
	if len(krows) != 3 || krows[0][0] != "matmul_q4" || krows[0][2] != "812.50" || krows[0][3] != "88.6%" {
		t.Errorf("kernel table %q", krows)
	}
	if !strings.Contains(md, "## Not measured") || !strings.Contains(md, `exceed \| the limit`) {
		t.Error("the failed configuration is not listed")
	}
}
