package scripttest

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/ci"
	"github.com/gpurun/gpurun/internal/gputest"
)

// TestBenchReportQuick runs scripts/bench-report --quick, the command that
// regenerates docs/bench, into a temporary directory, so the documented
// command cannot rot: it must build gpurun at this revision, measure on
// the CPU and both GPU backends, record the revision it measured and draw
// the page's picture.
func TestBenchReportQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("builds gpurun and runs a bench sweep")
	}
	if gputest.RerunDriver() != "" {
		t.Skip("inside a driver rerun")
	}
	requireBackend(t, "vulkan")
	requireBackend(t, "webgpu")
	if _, err := exec.LookPath("chromium"); err != nil {
		ci.Missing(t, "scripts/bench-report draws report.png with chromium: %v", err)
	}
	rep, _, _ := runScript(t, "bench-report", []string{"--quick"}, "report.json", "report.md", "report.html", "report.png")
	if rep.Incomplete {
		t.Errorf("report incomplete")
	}
	backends := map[string]bool{}
	for _, r := range rep.Results {
		if r.Error != "" {
			t.Errorf("result %s on %s: %s", r.Key(), r.Backend, r.Error)
		}
		backends[r.Backend] = true
	}
	for _, b := range []string{"cpu", "vulkan", "webgpu"} {
		if !backends[b] {
			t.Errorf("no %s result in the report (results on %v)", b, backends)
		}
	}
	if head, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		if want := strings.TrimSpace(string(head)); rep.Environment.Revision != want {
			t.Errorf("report measured revision %q, the checkout is at %q", rep.Environment.Revision, want)
		}
	}
}
