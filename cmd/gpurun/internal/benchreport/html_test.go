package benchreport_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/cmd/gpurun/internal/benchreport"
	"github.com/gpurun/gpurun/cmd/gpurun/internal/benchreport/reporttest"
)

// TestHTMLInChromium renders a report with every kind of content (three
// backends, four tests, a baseline, a profiled result, a failure) in
// headless Chromium: one bar per measured configuration in every chart, a
// kernel chart, a screenshot that is not blank.
func TestHTMLInChromium(t *testing.T) {
	r := benchreport.Sample()
	r.Baseline = benchreport.Compare(benchreport.Sample(), r, "old.json")
	var buf bytes.Buffer
	if err := r.WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	// Self-contained: nothing to fetch, nothing to run.
	for _, bad := range []string{"<script", "http:", "https:", "<link", "@import", "url("} {
		if strings.Contains(page, bad) {
			t.Errorf("the page contains %q", bad)
		}
	}
	path := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	want := reporttest.Want(r)
	if want["kernels tg8"] != 3 || len(want) != 7 {
		t.Fatalf("sample lacks a chart kind: %v", want)
	}
	reporttest.Check(t, r, path)
}

// TestParseCharts: the DOM reader counts bars per chart and nothing else.
func TestParseCharts(t *testing.T) {
	dom := `<svg class="chart" data-metric="prefill" data-test="pp8"><rect x="0"/><rect class="bar" x="1"/><rect fill="r" class="bar"/></svg>` +
		`<svg class="legend"><rect class="bar"/></svg><svg role="img" class="chart" data-test="tg4" data-metric="decode"><rect class="bar"></rect></svg>`
	got, err := reporttest.ParseCharts(dom)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["prefill pp8"] != 2 || got["decode tg4"] != 1 {
		t.Errorf("ParseCharts = %v", got)
	}
	if _, err := reporttest.ParseCharts(`<svg class="chart" data-metric="x">`); err == nil {
		t.Error("an unterminated chart parses")
	}
}
