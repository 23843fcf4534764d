// Package reporttest checks a rendered benchmark report in a real browser:
// headless Chromium (Debian's chromium package, installed by .ci/setup)
// loads the HTML file, and the test reads back the DOM Chromium built and a
// screenshot of the page. Without chromium the check skips, or fails when
// CI is set.
package reporttest

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpurun/gpurun/cmd/gpurun/internal/benchreport"
	"github.com/gpurun/gpurun/internal/ci"
)

// Chromium returns the browser's path, skipping the test (failing it under
// CI) when there is none.
func Chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	ci.Missing(t, "chromium (bash .ci/setup installs it)")
	return ""
}

// run runs headless chromium on the file with extra arguments and returns
// its stdout.
func run(t testing.TB, bin, file string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	base := []string{"--headless=new", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
		"--disable-extensions", "--user-data-dir=" + t.TempDir()}
	if os.Geteuid() == 0 {
		// Chromium refuses to run as root with its sandbox on.
		base = append(base, "--no-sandbox")
	}
	cmd := exec.CommandContext(ctx, bin, append(append(base, args...), "file://"+abs)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.Bytes()
}

// Charts maps "metric test" (data-metric and data-test of each chart's svg
// element) to the number of bars in that chart, as Chromium parsed the page.
type Charts map[string]int

var (
	svgOpen = regexp.MustCompile(`<svg\b[^>]*\bclass="chart"[^>]*>`)
	attr    = regexp.MustCompile(`\b(data-metric|data-test)="([^"]*)"`)
	barRect = regexp.MustCompile(`<rect\b[^>]*\bclass="bar"`)
)

// ParseCharts reads the charts of a DOM dump.
func ParseCharts(dom string) (Charts, error) {
	out := Charts{}
	for _, loc := range svgOpen.FindAllStringIndex(dom, -1) {
		tag := dom[loc[0]:loc[1]]
		var metric, test string
		for _, m := range attr.FindAllStringSubmatch(tag, -1) {
			if m[1] == "data-metric" {
				metric = m[2]
			} else {
				test = m[2]
			}
		}
		end := strings.Index(dom[loc[1]:], "</svg>")
		if end < 0 {
			return nil, fmt.Errorf("unterminated chart %s", tag)
		}
		out[metric+" "+test] += len(barRect.FindAllString(dom[loc[1]:loc[1]+end], -1))
	}
	return out, nil
}

// Want is the charts a report should render: one bar per measured
// configuration in the prefill and decode chart of each test, and one per
// kernel of each profiled result.
func Want(r *benchreport.Report) Charts {
	want := Charts{}
	for _, res := range r.Results {
		if res.Error != "" {
			continue
		}
		if res.PrefillTokensPerSec != nil {
			want["prefill "+res.Test.Name]++
		}
		if res.DecodeTokensPerSec != nil {
			want["decode "+res.Test.Name]++
		}
		want["kernels "+res.Test.Name] += len(res.Kernels)
		if len(res.Kernels) == 0 && want["kernels "+res.Test.Name] == 0 {
			delete(want, "kernels "+res.Test.Name)
		}
	}
	return want
}

// Colour of each backend's bars (kept in step with benchreport's palette by
// this check failing otherwise).
var backendRGB = map[string][3]uint8{"cpu": {0x3b, 0x6e, 0xa8}, "vulkan": {0xd1, 0x60, 0x3d}, "webgpu": {0x4d, 0x9a, 0x53}}

// Check renders the HTML file of report r in headless Chromium and checks
// that the page Chromium built has exactly one bar per measured
// configuration in each chart, and that its screenshot is not blank: a good
// share of the pixels are not background, and every measured backend's bar
// colour is on screen. It returns the screenshot's path.
func Check(t testing.TB, r *benchreport.Report, htmlPath string) string {
	t.Helper()
	bin := Chromium(t)
	dom := string(run(t, bin, htmlPath, "--dump-dom"))
	got, err := ParseCharts(dom)
	if err != nil {
		t.Fatal(err)
	}
	want := Want(r)
	if len(got) != len(want) {
		t.Errorf("charts %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("chart %q has %d bars, want %d (one per measured configuration)", k, got[k], n)
		}
	}
	// The page is as tall as its charts; the window shows the first of
	// them.
	shot := filepath.Join(t.TempDir(), "report.png")
	run(t, bin, htmlPath, "--hide-scrollbars", "--window-size=1200,1400", "--screenshot="+shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	inked, total, seen := Ink(img)
	if total == 0 || float64(inked)/float64(total) < 0.02 {
		t.Errorf("screenshot is blank: %d of %d pixels differ from the background", inked, total)
	}
	for _, res := range r.Results {
		if res.Error != "" {
			continue
		}
		if c, ok := backendRGB[res.Backend]; ok && seen[c] < 20 {
			t.Errorf("screenshot: %d pixels of the %s bar colour #%02x%02x%02x", seen[c], res.Backend, c[0], c[1], c[2])
		}
	}
	return shot
}

// Ink counts the pixels of img that are not white, and for each backend
// colour the pixels within a small distance of it.
func Ink(img image.Image) (inked, total int, seen map[[3]uint8]int) {
	seen = map[[3]uint8]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			p := [3]int{int(r >> 8), int(g >> 8), int(bl >> 8)}
			total++
			if p[0] < 245 || p[1] < 245 || p[2] < 245 {
				inked++
			}
			for _, c := range backendRGB {
				if abs(p[0]-int(c[0])) <= 6 && abs(p[1]-int(c[1])) <= 6 && abs(p[2]-int(c[2])) <= 6 {
					seen[c]++
				}
			}
		}
	}
	return inked, total, seen
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
