package reporttest

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gpurun/gpurun/cmd/gpurun/internal/benchreport"
)

// MarkdownTable returns the rows (cells unescaped) of the Markdown table
// whose header is header, failing the test when there is none.
func MarkdownTable(t testing.TB, md string, header []string) [][]string {
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
			rows = append(rows, SplitRow(line))
		case in:
			return rows
		}
	}
	if !in {
		t.Fatalf("no table with header %s", want)
	}
	return rows
}

// SplitRow splits a Markdown table row at its unescaped pipes.
func SplitRow(line string) []string {
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

// ParseStat reads a "median ± half-range" cell; ok is false for "-".
func ParseStat(t testing.TB, cell string) (med, half float64, ok bool) {
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

// Near2 reports whether printed is v printed with two decimals.
func Near2(printed, v float64) bool { return printed-v <= 0.005+1e-9 && v-printed <= 0.005+1e-9 }

// CheckResultsTable parses the results table of a Markdown report back and
// checks that it holds every measured result of r in order, with the same
// names and, at the printed precision, the same numbers.
func CheckResultsTable(t testing.TB, r *benchreport.Report, md string) {
	t.Helper()
	rows := MarkdownTable(t, md, benchreport.ResultsHeader)
	i := 0
	for _, res := range r.Results {
		if res.Error != "" {
			continue
		}
		if i >= len(rows) {
			t.Fatalf("%d result rows, the report has more measured results", len(rows))
		}
		row := rows[i]
		i++
		where := res.Key()
		if len(row) != len(benchreport.ResultsHeader) {
			t.Fatalf("%s: %d cells: %q", where, len(row), row)
		}
		if got, want := strings.Join(row[:6], " | "), strings.Join([]string{res.Model, res.Weights, res.Backend, res.ActivationsText(), res.KVCache, res.Test.Name}, " | "); got != want {
			t.Errorf("row %d is %q, want %q", i, got, want)
		}
		for j, v := range []int64{res.ModelBytes, res.PeakRSSBytes} {
			mb, err := strconv.ParseFloat(row[6+j], 64)
			if err != nil || !Near2(mb, float64(v)/(1<<20)) {
				t.Errorf("%s: %s cell %q for %d bytes", where, benchreport.ResultsHeader[6+j], row[6+j], v)
			}
		}
		if dev := row[8]; res.DeviceMemoryBytes == 0 && dev != "-" {
			t.Errorf("%s: device MiB cell %q for a backend that reports none", where, dev)
		} else if mb, err := strconv.ParseFloat(dev, 64); res.DeviceMemoryBytes != 0 && (err != nil || !Near2(mb, float64(res.DeviceMemoryBytes)/(1<<20))) {
			t.Errorf("%s: device MiB cell %q for %d bytes", where, dev, res.DeviceMemoryBytes)
		}
		for j, s := range []*benchreport.Stat{res.TimeToFirstTokenMS, res.PrefillTokensPerSec, res.DecodeTokensPerSec} {
			cell := row[9+j]
			m, h, ok := ParseStat(t, cell)
			switch {
			case ok != (s != nil):
				t.Errorf("%s: %s cell %q for %+v", where, benchreport.ResultsHeader[9+j], cell, s)
			case ok && (!Near2(m, s.Median) || !Near2(h, s.HalfRange())):
				t.Errorf("%s: %s parsed %g ± %g, the report has %g ± %g", where, benchreport.ResultsHeader[9+j], m, h, s.Median, s.HalfRange())
			}
		}
	}
	if i != len(rows) {
		t.Errorf("%d result rows, %d measured results", len(rows), i)
	}
}

// Schema compiles benchreport.Schema.
func Schema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(benchreport.Schema))
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

// Validate checks JSON text against the schema s.
func Validate(s *jsonschema.Schema, data []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	return s.Validate(v)
}
