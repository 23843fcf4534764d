package scripttest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurun/gpurun"
	"github.com/gpurun/gpurun/cmd/gpurun/internal/benchreport"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/gputest"
)

// TestGPUCheckQuick runs scripts/gpu-check --quick on lavapipe, selected
// by name as on a real GPU, so the script cannot rot: it must build
// gpurun, pass its GPU tests on that device and leave a bench report that
// names the device, with a cold and a warm load, and the kernel profile.
func TestGPUCheckQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("builds gpurun, runs GPU tests and a bench")
	}
	if gputest.RerunDriver() != "" {
		t.Skip("inside a driver rerun")
	}
	requireBackend(t, "vulkan")
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatalf("scripts/gpu-check needs bash: %v", err)
	}
	// The script selects the device and skips the reruns itself.
	rep, out, log := runScript(t, "gpu-check", []string{"--quick", "--device", "llvmpipe"},
		"report.json", "report.md", "report.html", "devices.txt", "tests.log")
	t.Logf("%s", stageLines(log))
	if rep.Incomplete || len(rep.Results) == 0 {
		t.Fatalf("report incomplete or empty: %d results", len(rep.Results))
	}
	for _, r := range rep.Results {
		if r.Error != "" || r.Backend != "vulkan" || !strings.Contains(r.Device, "llvmpipe") {
			t.Errorf("result %s on %s %q: %s", r.Key(), r.Backend, r.Device, r.Error)
		}
		if r.LoadColdSeconds <= 0 || r.LoadSeconds <= 0 || len(r.Kernels) == 0 {
			t.Errorf("result %s: load %gs, cold %gs, %d kernels profiled", r.Key(), r.LoadSeconds, r.LoadColdSeconds, len(r.Kernels))
		}
	}
	md, _ := os.ReadFile(filepath.Join(out, "report.md"))
	if !strings.Contains(string(md), "llvmpipe") {
		t.Errorf("report.md does not name the device")
	}
}

// stageLines keeps the script's stage timings from its output.
func stageLines(log []byte) string {
	var keep []string
	for _, l := range strings.Split(string(log), "\n") {
		if strings.HasPrefix(l, "== ") || strings.HasPrefix(l, "gpu-check:") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// runScript runs scripts/NAME with args and --out DIR (a new temporary
// directory), fails the test if it fails or leaves any of files missing or
// empty in DIR, and returns the bench report it wrote (DIR/report.json),
// DIR and its output.
func runScript(t *testing.T, name string, args []string, files ...string) (*benchreport.Report, string, []byte) {
	t.Helper()
	out := t.TempDir()
	cmd := exec.Command(filepath.Join("..", "..", "..", "..", "scripts", name), append(args, "--out", out)...)
	cmd.Env = os.Environ()
	log, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, log)
	}
	for _, f := range files {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v (size %v)", f, err, st)
		}
	}
	f, err := os.Open(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := benchreport.ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	return rep, out, log
}

// requireBackend skips a GPU backend that cannot open on a machine without
// a Vulkan driver, and fails under CI, where lavapipe is installed.
func requireBackend(t *testing.T, name string) {
	t.Helper()
	b, err := gpurun.OpenBackend(context.Background(), name, gpurun.BackendOptions{})
	if err == nil {
		b.Close()
		return
	}
	if !errors.Is(err, gpu.ErrNoDevice) {
		t.Fatalf("%s: %v", name, err)
	}
	gputest.NoDevice(t, name, err)
}
