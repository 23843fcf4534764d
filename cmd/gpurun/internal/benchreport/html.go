package benchreport

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"strconv"
	"strings"
)

// The page loads nothing: the policy forbids every fetch, scripts included;
// only the inline style applies.
const htmlHead = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>gpurun bench</title>
<style>
body { font-family: sans-serif; margin: 24px; color: #1d1d1d; background: #ffffff; max-width: 1100px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 28px; } h3 { font-size: 15px; margin-bottom: 4px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border: 1px solid #cccccc; padding: 3px 7px; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f0f0f0; }
.faster { background: #d8f0d8; font-weight: bold; } .slower { background: #f6d5d0; font-weight: bold; }
svg.chart { display: block; margin: 6px 0 14px 0; }
svg .ct { font-size: 14px; font-weight: bold; } svg .lb, svg .vl { font-size: 12px; } svg .ax { font-size: 11px; fill: #444444; }
.note { color: #555555; font-size: 13px; }
</style>
</head>
<body>
`

// WriteHTML writes the report as one self-contained HTML page: the
// environment, for every test a bar chart of prefill and of decode tokens/s
// with one bar per measured configuration (whiskers: the range over the
// runs), the results table, the comparison with a baseline, per-kernel
// charts of profiled results, and what could not be measured.
func (r *Report) WriteHTML(w io.Writer) error {
	bw := bufio.NewWriter(w)
	e := html.EscapeString
	io.WriteString(bw, htmlHead)
	io.WriteString(bw, "<h1>gpurun bench</h1>\n<table class=\"env\">\n")
	for _, kv := range r.EnvironmentRows() {
		fmt.Fprintf(bw, "<tr><th>%s</th><td>%s</td></tr>\n", e(kv[0]), e(kv[1]))
	}
	io.WriteString(bw, "</table>\n")

	io.WriteString(bw, "<h2>Speed per model, weights, backend and activations</h2>\n"+
		"<p class=\"note\">Bars: the median over the runs; whiskers: the fastest and slowest run.</p>\n")
	for _, t := range r.Tests() {
		_, prefill, decode := t.Metrics()
		at := ""
		if t.Depth > 0 {
			at = fmt.Sprintf(" after a context of %d positions (%s)", t.Depth, e(t.DepthFill))
		}
		fmt.Fprintf(bw, "<h3>%s: %d-token prompt, %s%s</h3>\n", e(t.Name), t.PromptTokens, plural(t.GenerateTokens, "generated token"), at)
		for _, m := range []struct {
			on          bool
			name, title string
			get         func(*Result) *Stat
		}{
			{prefill, "prefill", "prefill tokens/s", func(r *Result) *Stat { return r.PrefillTokensPerSec }},
			{decode, "decode", "decode tokens/s", func(r *Result) *Stat { return r.DecodeTokensPerSec }},
		} {
			if !m.on {
				continue
			}
			var bars []bar
			for i := range r.Results {
				res := &r.Results[i]
				s := m.get(res)
				if res.Test.Name != t.Name || res.Error != "" || s == nil {
					continue
				}
				b := bar{Key: res.Key(), Label: res.Label(), Group: res.Backend, Value: s.Median, Min: s.Min, Max: s.Max}
				if c := r.Baseline.change(res.Key()); c != nil {
					rt := c.PrefillTokensPerSec
					if m.name == "decode" {
						rt = c.DecodeTokensPerSec
					}
					if rt != nil {
						b.Note = "(" + num(rt.Ratio) + "x)"
					}
				}
				bars = append(bars, b)
			}
			if len(bars) == 0 {
				continue
			}
			writeBarChart(bw, m.title+", "+t.Name, "tokens/s", bars, map[string]string{"data-metric": m.name, "data-test": t.Name})
		}
	}

	io.WriteString(bw, "<h2>Results</h2>\n<p class=\"note\">Median ± half the range over the runs; - : not measured by the test.</p>\n<table class=\"results\">\n")
	htmlRow(bw, "th", ResultsHeader)
	for _, res := range r.Results {
		if res.Error != "" {
			continue
		}
		htmlRow(bw, "td", []string{res.Model, res.Weights, res.Backend, res.ActivationsText(), res.KVCache, res.Test.Name,
			mib(res.ModelBytes), mib(res.PeakRSSBytes), deviceMiB(res.DeviceMemoryBytes),
			statCell(res.TimeToFirstTokenMS), statCell(res.PrefillTokensPerSec), statCell(res.DecodeTokensPerSec)})
	}
	io.WriteString(bw, "</table>\n")
	if rows := r.LoadRows(); len(rows) > 0 {
		fmt.Fprintf(bw, "<h2>Load</h2>\n<p class=\"note\">%s</p>\n<table class=\"load\">\n", e(loadNote))
		htmlRow(bw, "th", LoadHeader)
		for _, cells := range rows {
			htmlRow(bw, "td", cells)
		}
		io.WriteString(bw, "</table>\n")
	}

	if b := r.Baseline; b != nil {
		fmt.Fprintf(bw, "<h2>Compared with %s</h2>\n<p class=\"note\">Baseline revision %s, created %s. Ratio = this run's median / the baseline's; "+
			"highlighted when the two runs' ranges do not overlap (for TTFT lower is faster).</p>\n",
			e(b.Path), e(b.Revision), b.Created.UTC().Format("2006-01-02 15:04:05 UTC"))
		if len(b.Changes) == 0 {
			io.WriteString(bw, "<p>No result of this run has a match (model, weights, backend, activations, test) in the baseline: nothing to compare.</p>\n")
		}
	}
	if b := r.Baseline; b != nil && len(b.Changes) > 0 {
		io.WriteString(bw, "<table class=\"compare\">\n")
		htmlRow(bw, "th", CompareHeader)
		for i := range r.Results {
			res := &r.Results[i]
			c := b.change(res.Key())
			if c == nil || res.Error != "" {
				continue
			}
			io.WriteString(bw, "<tr>")
			for _, s := range []string{res.Model, res.Weights, res.Backend, res.ActivationsText(), res.Test.Name} {
				fmt.Fprintf(bw, "<td>%s</td>", e(s))
			}
			for _, p := range []struct {
				s  *Stat
				rt *Ratio
			}{{res.TimeToFirstTokenMS, c.TimeToFirstTokenMS}, {res.PrefillTokensPerSec, c.PrefillTokensPerSec}, {res.DecodeTokensPerSec, c.DecodeTokensPerSec}} {
				fmt.Fprintf(bw, `<td class="n">%s</td>`, e(statCell(p.s)))
				if p.rt == nil {
					io.WriteString(bw, `<td class="n">-</td>`)
					continue
				}
				cls := "n"
				if p.rt.Verdict != Same {
					cls += " " + p.rt.Verdict
				}
				text := num(p.rt.Ratio) + "x"
				if p.rt.Verdict != Same {
					text += " " + p.rt.Verdict
				}
				fmt.Fprintf(bw, `<td class="%s">%s</td>`, cls, e(text))
			}
			io.WriteString(bw, "</tr>\n")
		}
		io.WriteString(bw, "</table>\n")
	}

	first := true
	for i := range r.Results {
		res := &r.Results[i]
		if len(res.Kernels) == 0 {
			continue
		}
		if first {
			io.WriteString(bw, "<h2>Kernels</h2>\n<p class=\"note\">Device time per kernel over the profiled run; share of the total kernel time.</p>\n")
			first = false
		}
		title := res.Label() + ", " + res.Test.Name
		fmt.Fprintf(bw, "<h3>%s</h3>\n", e(title))
		total := kernelTotal(res.Kernels)
		var bars []bar
		for _, k := range sortedKernels(res.Kernels) {
			bars = append(bars, bar{Key: k.Name, Label: k.Name, Group: "kernel time", Value: k.TimeMS, Min: k.TimeMS, Max: k.TimeMS, Note: "ms, " + pct(k.TimeMS, total)})
		}
		writeBarChart(bw, "kernel time, "+title, "ms", bars, map[string]string{"data-metric": "kernels", "data-test": res.Test.Name, "data-key": res.Key()})
		io.WriteString(bw, "<table class=\"kernels\">\n")
		htmlRow(bw, "th", KernelHeader)
		for _, k := range sortedKernels(res.Kernels) {
			htmlRow(bw, "td", []string{k.Name, strconv.FormatInt(k.Calls, 10), num(k.TimeMS), pct(k.TimeMS, total),
				num(float64(k.Bytes) / 1e6), num(rate(float64(k.Bytes), k.TimeMS)), num(float64(k.Flops) / 1e6), num(rate(float64(k.Flops), k.TimeMS))})
		}
		io.WriteString(bw, "</table>\n")
	}

	first = true
	for _, res := range r.Results {
		if res.Error == "" {
			continue
		}
		if first {
			io.WriteString(bw, "<h2>Not measured</h2>\n<ul>\n")
			first = false
		}
		fmt.Fprintf(bw, "<li>%s, %s: %s</li>\n", e(res.Label()), e(res.Test.Name), e(res.Error))
	}
	if !first {
		io.WriteString(bw, "</ul>\n")
	}
	io.WriteString(bw, "</body>\n</html>\n")
	return bw.Flush()
}

// htmlRow writes one table row, numbers right-aligned.
func htmlRow(w io.Writer, tag string, cells []string) {
	io.WriteString(w, "<tr>")
	for _, c := range cells {
		cls := ""
		if tag == "td" && (isNumber(c) || c == "-" || strings.Contains(c, " ± ") || strings.HasSuffix(c, "%")) {
			cls = ` class="n"`
		}
		fmt.Fprintf(w, "<%s%s>%s</%s>", tag, cls, html.EscapeString(c), tag)
	}
	io.WriteString(w, "</tr>\n")
}

func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// plural is "1 thing" or "n things".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return strconv.Itoa(n) + " " + thing + "s"
}
