package benchreport_test

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/cmd/gpurun/internal/benchreport"
	"github.com/gpurun/gpurun/cmd/gpurun/internal/benchreport/reporttest"
)

// measured counts the results with runs, and those per test and metric.
func measured(r *benchreport.Report) (all int, per map[string]int) {
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

// TestJSONMatchesSchema: a report with every optional part validates
// against schema.json, survives ReadJSON, and mutations of it do not
// validate.
func TestJSONMatchesSchema(t *testing.T) {
	s := reporttest.Schema(t)
	r := benchreport.Sample()
	r.Baseline = benchreport.Compare(benchreport.Sample(), r, "old.json")
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if err := reporttest.Validate(s, buf.Bytes()); err != nil {
		t.Fatalf("sample report does not match its schema: %v", err)
	}
	back, err := benchreport.ReadJSON(bytes.NewReader(buf.Bytes()))
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
		{"incomplete as text", func(m map[string]any) { m["incomplete"] = "yes" }},
		{"three load averages", func(m map[string]any) { m["environment"].(map[string]any)["load_average"] = []any{1, 2, 3} }},
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
		if err := reporttest.Validate(s, data); err == nil {
			t.Errorf("%s: the schema accepts it", tc.name)
		}
	}
}

// TestMarkdownParsesBack: every number of the Markdown tables, parsed back,
// is the report's number at the printed precision, in the right row and
// column.
// TestLoadTable: the Load table has one row per configuration with its
// load, cold load and pipeline cache as the results hold them.
func TestLoadTable(t *testing.T) {
	r := benchreport.Sample()
	var buf bytes.Buffer
	if err := r.WriteMarkdown(&buf); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	header := "| " + strings.Join(benchreport.LoadHeader, " | ") + " |"
	if !strings.Contains(md, header) {
		t.Fatalf("no load table (%s) in\n%s", header, md)
	}
	for _, want := range []string{
		"| llama-110m | f32 | vulkan | f32 | 1.50 | 2.75 | 3072.00 | 40 |",
		"| llama-110m | f32 | webgpu | f32 | 1.50 | 2.75 | - | - |",
		"| llama-110m | f32 | cpu | f32 | 1.50 | - | - | - |",
	} {
		if n := strings.Count(md, want); n != 1 {
			t.Errorf("row %q appears %d times, want once", want, n)
		}
	}
}

func TestMarkdownParsesBack(t *testing.T) {
	r := benchreport.Sample()
	old := benchreport.Sample()
	for i := range old.Results {
		if s := old.Results[i].DecodeTokensPerSec; s != nil && i%2 == 0 {
			s.Median, s.Min, s.Max = s.Median*2, s.Min*2, s.Max*2
		}
		if s := old.Results[i].PrefillTokensPerSec; s != nil && i%4 == 2 {
			s.Median, s.Min, s.Max = s.Median/2, s.Min/2, s.Max/2
		}
	}
	r.Baseline = benchreport.Compare(old, r, "old|run.json")
	var buf bytes.Buffer
	if err := r.WriteMarkdown(&buf); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	reporttest.CheckResultsTable(t, r, md)

	crows := reporttest.MarkdownTable(t, md, benchreport.CompareHeader)
	if len(crows) != len(r.Baseline.Changes) {
		t.Fatalf("%d comparison rows, want %d", len(crows), len(r.Baseline.Changes))
	}
	for j, c := range r.Baseline.Changes {
		row := crows[j]
		for k, rt := range []*benchreport.Ratio{c.TimeToFirstTokenMS, c.PrefillTokensPerSec, c.DecodeTokensPerSec} {
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
			if err != nil || !reporttest.Near2(v, rt.Ratio) || strings.TrimSpace(verdict) != map[string]string{benchreport.Same: "", benchreport.Faster: benchreport.Faster, benchreport.Slower: benchreport.Slower}[rt.Verdict] {
				t.Errorf("%s: ratio cell %q, want %.2f %s", c.Key, cell, rt.Ratio, rt.Verdict)
			}
		}
	}
	// The baseline decodes twice as fast on every second result and
	// prefills half as fast on every fourth: changes beyond the spread.
	if !strings.Contains(md, "x slower**") || !strings.Contains(md, "x faster**") {
		t.Error("no flagged change in the comparison")
	}

	krows := reporttest.MarkdownTable(t, md, benchreport.KernelHeader)
	if len(krows) != 3 || krows[0][0] != "matmul_q4" || krows[0][2] != "812.50" || krows[0][3] != "88.6%" {
		t.Errorf("kernel table %q", krows)
	}
	if !strings.Contains(md, "## Not measured") || !strings.Contains(md, `exceed \| the limit`) {
		t.Error("the failed configuration is not listed")
	}
}
