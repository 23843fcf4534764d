package benchreport

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Markdown table headers; tests and readers find the tables by them. In
// every table a figure is printed with two decimals, a measured one as
// "median ± half the range", "-" when the test does not measure it.
var (
	DecodeBytesHeader = []string{"configuration", "test", "ref", "weights MB", "KV kB/position", "positions", "MB/token", "decode tok/s", "predicted", "measured", "of prediction"}
	ResultsHeader     = []string{"model", "weights", "backend", "activations", "KV cache", "test", "model MiB", "peak RSS MiB", "device MiB", "TTFT ms", "prefill tok/s", "decode tok/s"}
	CompareHeader     = []string{"model", "weights", "backend", "activations", "test", "TTFT ms", "TTFT ratio", "prefill tok/s", "prefill ratio", "decode tok/s", "decode ratio"}
	LoadHeader        = []string{"model", "weights", "backend", "activations", "load s", "cold load s", "pipeline cache KiB", "pipeline cache hits"}
	KernelHeader      = []string{"kernel", "calls", "time ms", "share", "MB", "GB/s", "MFLOP", "GFLOP/s"}
	MemoryHeader      = []string{"model", "weights", "backend", "activations", "KV cache", "model MiB", "KV KiB/position", "cache positions", "KV cache MiB", "peak RSS MiB", "device MiB"}
)

// num formats a figure as every table prints it: two decimals.
func num(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// statCell is "median ± half-range", or "-" for a figure the test does not
// measure.
func statCell(s *Stat) string {
	if s == nil {
		return "-"
	}
	return num(s.Median) + " ± " + num(s.HalfRange())
}

func mib(b int64) string { return num(float64(b) / (1 << 20)) }

// deviceMiB is mib, or "-" for a backend that reports no device memory (and
// for the peak RSS of a browser row: the page runs in another process).
func deviceMiB(b int64) string {
	if b == 0 {
		return "-"
	}
	return mib(b)
}

// ratioCell is "1.05x", with the verdict spelled out and bold when the
// change is beyond the measured spread.
func ratioCell(r *Ratio) string {
	switch {
	case r == nil:
		return "-"
	case r.Verdict == Same:
		return num(r.Ratio) + "x"
	default:
		return "**" + num(r.Ratio) + "x " + r.Verdict + "**"
	}
}

// EnvironmentRows are the label/value pairs describing where and how the
// report was measured, shared by the Markdown and HTML renderings.
func (r *Report) EnvironmentRows() [][2]string {
	e := &r.Environment
	rev := e.Revision
	if e.Modified {
		rev += " (modified)"
	}
	if e.RevisionTime != "" {
		rev += ", " + e.RevisionTime
	}
	if e.RevisionSource != "" {
		rev += " (from " + e.RevisionSource + ")"
	}
	rows := [][2]string{
		{"created", r.Created.UTC().Format("2006-01-02 15:04:05 UTC")},
		{"gpurun revision", rev},
		{"Go", e.GoVersion},
		{"OS / arch", e.OS + " / " + e.Arch},
		{"CPU", fmt.Sprintf("%s (%d logical CPUs)", e.CPU, e.CPUs)},
		{"peak RSS of the process", mib(e.PeakRSSBytes) + " MiB"},
	}
	if len(e.LoadAverage) > 0 {
		var l []string
		for _, v := range e.LoadAverage {
			l = append(l, num(v))
		}
		rows = append(rows, [2]string{"load average (1 min) at start, end", strings.Join(l, ", ")})
	}
	if r.Incomplete {
		rows = append([][2]string{{"INCOMPLETE", "the sweep had not finished when this was written (still running, or stopped): configurations after the last result were not run"}}, rows...)
	}
	for _, d := range e.Devices {
		rows = append(rows, [2]string{"device (" + d.Backend + ")", fmt.Sprintf("%s, %s, driver %s", d.Name, d.Type, d.Driver)})
	}
	rows = append(rows,
		[2]string{"protocol", fmt.Sprintf("%s after %s per test; %s", plural(r.Protocol.Reps, "measured run"), plural(r.Protocol.Warmup, "warm-up run"), r.Protocol.Description)},
		[2]string{"command", strings.Join(r.Command, " ")})
	if len(r.Command) == 0 {
		rows = rows[:len(rows)-1]
	}
	return rows
}

// LoadRows gives one row per measured configuration (LoadHeader): its load
// time, the cold load's where bench measured one, and the pipeline cache
// the load started from ("-" for none).
func (r *Report) LoadRows() [][]string {
	var out [][]string
	seen := map[string]bool{}
	for _, res := range r.Results {
		if res.Error != "" || seen[res.Label()] {
			continue
		}
		seen[res.Label()] = true
		cold, cache, hits := "-", "-", "-"
		if res.LoadColdSeconds > 0 {
			cold = num(res.LoadColdSeconds)
			if res.Backend == "vulkan" { // the backend with a pipeline cache
				cache, hits = "0.00", "0"
			}
		}
		if res.PipelineCacheBytes > 0 {
			cache = num(float64(res.PipelineCacheBytes) / 1024)
			hits = strconv.Itoa(res.PipelineCacheHits)
		}
		out = append(out, []string{res.Model, res.Weights, res.Backend, res.ActivationsText(), num(res.LoadSeconds), cold, cache, hits})
	}
	return out
}

// MemoryRows gives one row per measured configuration that reports its
// KV cache (MemoryHeader): the model's bytes, the KV cache's per position
// and at the cache length it was loaded with, and the peaks.
func (r *Report) MemoryRows() [][]string {
	var out [][]string
	seen := map[string]bool{}
	for _, res := range r.Results {
		k := fmt.Sprintf("%s|%d", res.Label(), res.MaxCache)
		if res.Error != "" || res.KVCacheBytes == 0 || seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, []string{res.Model, res.Weights, res.Backend, res.ActivationsText(), res.KVCache, mib(res.ModelBytes),
			num(float64(res.KVBytesPerPosition) / 1024), strconv.Itoa(res.MaxCache), mib(res.KVCacheBytes), deviceMiB(res.PeakRSSBytes), deviceMiB(res.DeviceMemoryBytes)})
	}
	return out
}

// memoryNote explains the memory table.
const memoryNote = "Memory: the model's bytes (a file's size, a synthetic model's weights), the KV cache per position and " +
	"at the cache length the configuration was loaded with (--max-cache; one session's, sliding-window layers on rings where the backend takes them), " +
	"and the peaks while it loaded and ran: the process's resident memory and, on GPU backends, the device memory gpurun's buffers took."

// loadNote explains the load table.
const loadNote = "Load: weight upload and program compilation, on the device the tests ran on. " +
	"Cold load (GPU backends, bench --cold-load): on a fresh device with an empty pipeline cache; the load beside it then ran on " +
	"another fresh device with the cache the cold load left (Vulkan; a driver that keeps nothing in a pipeline cache leaves 0 KiB, " +
	"and WebGPU has no persistent cache). The driver's own shader cache, where it keeps one, is not cleared."

// WriteMarkdown writes the report as Markdown: the environment, one results
// table (median ± half the range of every figure), the comparison with a
// baseline if any, per-kernel tables of profiled results, and the
// configurations that could not be measured.
func (r *Report) WriteMarkdown(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# gpurun bench\n\n")
	table(bw, []string{"", ""}, func(row func(...string)) {
		for _, kv := range r.EnvironmentRows() {
			row(kv[0], kv[1])
		}
	})
	fmt.Fprintf(bw, "\n## Results\n\nMedian ± half the range over the runs; `-`: not measured by the test.\n\n")
	table(bw, ResultsHeader, func(row func(...string)) {
		for _, res := range r.Results {
			if res.Error != "" {
				continue
			}
			row(res.Model, res.Weights, res.Backend, res.ActivationsText(), res.KVCache, res.Test.Name,
				mib(res.ModelBytes), deviceMiB(res.PeakRSSBytes), deviceMiB(res.DeviceMemoryBytes),
				statCell(res.TimeToFirstTokenMS), statCell(res.PrefillTokensPerSec), statCell(res.DecodeTokensPerSec))
		}
	})
	if slices.ContainsFunc(r.Results, func(res Result) bool { return res.Speculation != "" && res.Error == "" }) {
		fmt.Fprintf(bw, "\n## Speculative decoding\n\nDrafts accepted per drafted token, and decoded tokens per model step (a step verifies the drafts and adds one token).\n\n")
		table(bw, []string{"Model", "Backend", "Test", "Speculation", "Acceptance", "Tokens per step", "Decode tok/s"}, func(row func(...string)) {
			for _, res := range r.Results {
				if res.Speculation != "" && res.Error == "" {
					row(res.Model+" "+res.Weights, res.Backend, res.Test.Name, res.Speculation, statCell(res.Acceptance), statCell(res.TokensPerStep), statCell(res.DecodeTokensPerSec))
				}
			}
		})
	}
	if rows := r.LoadRows(); len(rows) > 0 {
		fmt.Fprintf(bw, "\n## Load\n\n%s\n\n", loadNote)
		table(bw, LoadHeader, func(row func(...string)) {
			for _, cells := range rows {
				row(cells...)
			}
		})
	}
	if rows := r.MemoryRows(); len(rows) > 0 {
		fmt.Fprintf(bw, "\n## Memory\n\n%s\n\n", memoryNote)
		table(bw, MemoryHeader, func(row func(...string)) {
			for _, cells := range rows {
				row(cells...)
			}
		})
	}
	if b := r.Baseline; b != nil {
		fmt.Fprintf(bw, "\n## Compared with %s\n\nBaseline revision %s, created %s. Ratio = this run's median / the baseline's; "+
			"**bold** when the two runs' ranges do not overlap (for TTFT lower is faster).\n\n",
			escapeMD(b.Path), escapeMD(b.Revision), b.Created.UTC().Format("2006-01-02 15:04:05 UTC"))
		if len(b.Changes) == 0 {
			// No table: an empty one reads as a rendering fault.
			fmt.Fprintf(bw, "No result of this run has a match (model, weights, backend, activations, test) in the baseline: nothing to compare.\n")
		} else {
			table(bw, CompareHeader, func(row func(...string)) {
				for i := range r.Results {
					res := &r.Results[i]
					c := b.change(res.Key())
					if c == nil || res.Error != "" {
						continue
					}
					row(res.Model, res.Weights, res.Backend, res.ActivationsText(), res.Test.Name,
						statCell(res.TimeToFirstTokenMS), ratioCell(c.TimeToFirstTokenMS),
						statCell(res.PrefillTokensPerSec), ratioCell(c.PrefillTokensPerSec),
						statCell(res.DecodeTokensPerSec), ratioCell(c.DecodeTokensPerSec))
				}
			})
		}
	}
	if rows := r.DecodeBytesRows(); len(rows) > 0 {
		fmt.Fprintf(bw, "\n## Decode and the valid length\n\nEach test against the configuration's test with the shortest prompt (ref). "+
			"Positions: the mean number of cache positions a decode step attends to (depth + prompt + generated/2). "+
			"Predicted: the ref's bytes per decode step / this test's, bytes = weights read + KV bytes per position x positions; "+
			"measured: decode tok/s / the ref's; of prediction: measured / predicted (1 = decode follows the bytes moved).\n\n")
		table(bw, DecodeBytesHeader, func(row func(...string)) {
			for _, d := range rows {
				row(d.Label, d.Test, d.Ref, num(float64(d.WeightBytes)/1e6), num(float64(d.KVBytesPerPosition)/1e3), num(d.Positions),
					num(float64(d.BytesPerToken)/1e6), statCell(d.Decode), num(d.Predicted), num(d.Measured), num(d.OfPrediction))
			}
		})
	}
	if slices.ContainsFunc(r.Results, func(res Result) bool { return res.DecodeStep != nil && res.Error == "" }) {
		fmt.Fprintf(bw, "\n## Decode step: device and host\n\nWall time per decode step (1000 / median decode tok/s), the device time of a decode step (the test's decode steps run again with timestamps around each submission), and the rest: the host's (submissions, waits, reads; in the browser also the page's JS crossings, awaits and buffer mapping). The timed rerun's own wall time per step (each submission followed by a read of its timestamps) gives a host share taken in the same moment as the device time, steadier on a busy machine.\n\n")
		table(bw, []string{"Model", "Backend", "Device", "Test", "Wall ms/step", "Device ms/step", "Host ms/step", "Timed wall ms/step", "Timed host ms/step"}, func(row func(...string)) {
			for _, res := range r.Results {
				if d := res.DecodeStep; d != nil && res.Error == "" {
					row(res.Model+" "+res.Weights, res.Backend, escapeMD(res.Device), res.Test.Name, num(d.WallMS), num(d.DeviceMS), num(d.HostMS), num(d.TimedWallMS), num(d.TimedWallMS-d.DeviceMS))
				}
			}
		})
	}
	for i := range r.Results {
		res := &r.Results[i]
		if len(res.Kernels) == 0 {
			continue
		}
		fmt.Fprintf(bw, "\n## Kernels: %s, %s\n\n", escapeMD(res.Label()), res.Test.Name)
		total := kernelTotal(res.Kernels)
		table(bw, KernelHeader, func(row func(...string)) {
			for _, k := range sortedKernels(res.Kernels) {
				row(k.Name, strconv.FormatInt(k.Calls, 10), num(k.TimeMS), pct(k.TimeMS, total),
					num(float64(k.Bytes)/1e6), num(rate(float64(k.Bytes), k.TimeMS)), num(float64(k.Flops)/1e6), num(rate(float64(k.Flops), k.TimeMS)))
			}
		})
	}
	var failed []string
	for _, res := range r.Results {
		if res.Error != "" {
			failed = append(failed, fmt.Sprintf("- %s, %s: %s", escapeMD(res.Label()), res.Test.Name, escapeMD(res.Error)))
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(bw, "\n## Not measured\n\n%s\n", strings.Join(failed, "\n"))
	}
	return bw.Flush()
}

// rate is units per millisecond as giga-units per second.
func rate(units, ms float64) float64 {
	if ms <= 0 {
		return 0
	}
	return units / ms / 1e6
}

func pct(part, total float64) string {
	if total <= 0 {
		return "-"
	}
	return strconv.FormatFloat(100*part/total, 'f', 1, 64) + "%"
}

func table(w io.Writer, header []string, rows func(row func(...string))) {
	line := func(cells ...string) {
		for i, c := range cells {
			cells[i] = escapeMD(c)
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	line(append([]string(nil), header...)...)
	sep := make([]string, len(header))
	for i := range sep {
		sep[i] = "---"
	}
	fmt.Fprintf(w, "| %s |\n", strings.Join(sep, " | "))
	rows(line)
}

// escapeMD keeps a cell on one line and its pipes literal.
func escapeMD(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "|", `\|`)
}
