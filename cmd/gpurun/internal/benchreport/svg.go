package benchreport

import (
	"cmp"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// bar is one horizontal bar: a value with its measured range.
type bar struct {
	Key      string // data-key of the rect
	Label    string
	Group    string // picks the colour; shown in the legend
	Value    float64
	Min, Max float64 // the whisker; equal to Value for none
	Note     string  // printed after the value
}

// palette colours groups (backends, or kernels' one colour) in order of
// first appearance; the colours are distinguishable in greyscale too.
var palette = []string{"#3b6ea8", "#d1603d", "#4d9a53", "#8c5aa8", "#b8912f", "#5a5a5a"}

// Fixed colours of the known backends, so charts of different reports agree.
var backendColour = map[string]string{"cpu": "#3b6ea8", "vulkan": "#d1603d", "webgpu": "#4d9a53"}

const (
	chartLabelW = 320.0
	chartPlotW  = 440.0
	chartValueW = 150.0
	chartRowH   = 22.0
	chartTop    = 34.0
	chartAxisH  = 26.0
	chartLegend = 22.0
	maxLabel    = 50
)

// writeBarChart draws bars as an inline SVG horizontal bar chart with an x
// axis in unit, min-max whiskers, and a legend of the groups. attrs are
// added to the svg element (data-* attributes for tests and readers).
func writeBarChart(w io.Writer, title, unit string, bars []bar, attrs map[string]string) {
	width := chartLabelW + chartPlotW + chartValueW
	height := chartTop + float64(len(bars))*chartRowH + chartAxisH + chartLegend
	hi := 0.0
	for _, b := range bars {
		hi = max(hi, b.Value, b.Max)
	}
	top, step := niceAxis(hi)
	x := func(v float64) float64 { return chartLabelW + chartPlotW*v/top }
	var keys []string
	for k := range attrs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var extra strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&extra, ` %s="%s"`, k, html.EscapeString(attrs[k]))
	}
	fmt.Fprintf(w, `<svg class="chart" role="img" width="%g" height="%g" viewBox="0 0 %g %g"%s>`+"\n", width, height, width, height, extra.String())
	fmt.Fprintf(w, `<title>%s</title>`+"\n", html.EscapeString(title))
	fmt.Fprintf(w, `<rect x="0" y="0" width="%g" height="%g" fill="#ffffff"/>`+"\n", width, height)
	fmt.Fprintf(w, `<text x="4" y="20" class="ct">%s</text>`+"\n", html.EscapeString(title))
	plotBottom := chartTop + float64(len(bars))*chartRowH
	// Grid and axis.
	for v := 0.0; v <= top*(1+1e-9); v += step {
		fmt.Fprintf(w, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#dddddd"/>`+"\n", x(v), chartTop-4, x(v), plotBottom)
		fmt.Fprintf(w, `<text x="%.1f" y="%g" class="ax" text-anchor="middle">%s</text>`+"\n", x(v), plotBottom+14, axisLabel(v, step))
	}
	fmt.Fprintf(w, `<text x="%.1f" y="%g" class="ax" text-anchor="middle">%s</text>`+"\n", chartLabelW+chartPlotW/2, plotBottom+25, html.EscapeString(unit))
	groups := []string{}
	colour := func(g string) string {
		if c, ok := backendColour[g]; ok {
			return c
		}
		i := slices.Index(groups, g)
		return palette[(i+3)%len(palette)]
	}
	for i, b := range bars {
		if !slices.Contains(groups, b.Group) {
			groups = append(groups, b.Group)
		}
		y := chartTop + float64(i)*chartRowH
		label := b.Label
		if r := []rune(label); len(r) > maxLabel {
			label = string(r[:maxLabel-1]) + "…"
		}
		fmt.Fprintf(w, `<text x="%g" y="%.1f" class="lb" text-anchor="end">%s<title>%s</title></text>`+"\n",
			chartLabelW-6, y+chartRowH/2+4, html.EscapeString(label), html.EscapeString(b.Label))
		bw := math.Max(x(b.Value)-chartLabelW, 0)
		fmt.Fprintf(w, `<rect class="bar" data-key="%s" data-value="%s" x="%g" y="%.1f" width="%.2f" height="%g" fill="%s"><title>%s: %s %s</title></rect>`+"\n",
			html.EscapeString(b.Key), strconv.FormatFloat(b.Value, 'g', -1, 64), chartLabelW, y+3, bw, chartRowH-6, colour(b.Group),
			html.EscapeString(b.Label), num(b.Value), html.EscapeString(unit))
		if b.Max > b.Min {
			cy := y + chartRowH/2
			fmt.Fprintf(w, `<path class="whisker" d="M%.1f %.1fH%.1fM%.1f %.1fV%.1fM%.1f %.1fV%.1f" stroke="#222222" fill="none"/>`+"\n",
				x(b.Min), cy, x(b.Max), x(b.Min), cy-4, cy+4, x(b.Max), cy-4, cy+4)
		}
		text := num(b.Value)
		if b.Note != "" {
			text += " " + b.Note
		}
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" class="vl">%s</text>`+"\n", x(max(b.Value, b.Max))+5, y+chartRowH/2+4, html.EscapeString(text))
	}
	// Legend.
	lx := chartLabelW
	ly := plotBottom + chartAxisH + 12
	for _, g := range groups {
		fmt.Fprintf(w, `<rect x="%.1f" y="%g" width="10" height="10" fill="%s"/><text x="%.1f" y="%g" class="ax">%s</text>`+"\n",
			lx, ly-9, colour(g), lx+14, ly, html.EscapeString(g))
		lx += 24 + 7*float64(len(g))
	}
	io.WriteString(w, "</svg>\n")
}

// niceAxis picks the axis end (a multiple of a 1, 2 or 5 step) at or above
// hi, with at most eight steps.
func niceAxis(hi float64) (top, step float64) {
	if !(hi > 0) || math.IsInf(hi, 0) {
		return 1, 0.25
	}
	raw := hi / 8
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		step = m * mag
		if step >= raw {
			break
		}
	}
	top = math.Ceil(hi/step-1e-9) * step
	if top == 0 {
		top = step
	}
	return top, step
}

func axisLabel(v, step float64) string {
	dec := 0
	if step < 1 {
		dec = int(math.Ceil(-math.Log10(step)))
	}
	return strconv.FormatFloat(v, 'f', dec, 64)
}

func kernelTotal(ks []Kernel) float64 {
	t := 0.0
	for _, k := range ks {
		t += k.TimeMS
	}
	return t
}

// sortedKernels orders kernels by time, longest first, then by name.
func sortedKernels(ks []Kernel) []Kernel {
	out := slices.Clone(ks)
	slices.SortStableFunc(out, func(a, b Kernel) int {
		if c := cmp.Compare(b.TimeMS, a.TimeMS); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}
