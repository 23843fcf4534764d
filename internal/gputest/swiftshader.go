package gputest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/ci"
)

// SwiftShaderICD is where Debian's chromium-common package (part of
// Debian's chromium, installed by .ci/setup) puts SwiftShader's Vulkan
// driver manifest; the library sits beside it.
const SwiftShaderICD = "/usr/lib/chromium/vk_swiftshader_icd.json"

// driverEnv names the driver a rerun expects: every device a GPU test opens
// must carry this text in its name (CheckDriver), so a rerun that silently
// fell back to another driver fails.
const driverEnv = "GPURUN_TEST_DRIVER"

// SkipRerunsEnv names the environment variable that, set to 1, skips the
// reruns of GPU tests on other drivers or layers (SwiftShader, the Khronos
// validation layer): scripts/gpu-check sets it to test one real GPU.
const SkipRerunsEnv = "GPURUN_SKIP_RERUNS"

// SkipReruns skips the test when SkipRerunsEnv is 1.
func SkipReruns(t testing.TB) {
	t.Helper()
	if os.Getenv(SkipRerunsEnv) == "1" {
		t.Skip(SkipRerunsEnv + "=1: no reruns on other drivers or layers")
	}
}

// RerunOnSwiftShader runs the current test binary again with the tests
// matching run, with the Vulkan loader pointed at SwiftShader only
// (VK_ICD_FILENAMES), so both GPU backends run those tests on a second,
// independent driver: its own shader compiler, at most 256 invocations per
// workgroup, no f16. Outside CI a missing SwiftShader skips; in CI it fails.
// The rerun itself does nothing (it skips) inside a rerun.
func RerunOnSwiftShader(t *testing.T, run string) {
	t.Helper()
	icd := swiftShaderICD(t)
	rerun(t, exec.Command(os.Args[0], "-test.run="+run, "-test.count=1", "-test.v"), icd, run)
}

// RerunPackageOnSwiftShader is RerunOnSwiftShader for the tests of another
// package, the one in directory dir (relative to the calling test's
// package): its test binary is built with the go command (go test puts
// its own first in PATH) and run there. A package whose SwiftShader rerun
// takes long lives in its own test package this way, so go test runs it
// beside the package's own tests instead of after them.
func RerunPackageOnSwiftShader(t *testing.T, dir, run string) {
	t.Helper()
	icd := swiftShaderICD(t)
	bin := filepath.Join(t.TempDir(), "rerun.test")
	build := exec.Command("go", "test", "-c", "-o", bin, ".")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the tests of %s: %v\n%s", dir, err, tail(out))
	}
	cmd := exec.Command(bin, "-test.run="+run, "-test.count=1", "-test.v")
	cmd.Dir = dir
	rerun(t, cmd, icd, run)
}

// swiftShaderICD returns SwiftShader's driver manifest, or skips (fails in
// CI) when it is missing; inside a rerun or with -short it skips.
func swiftShaderICD(t *testing.T) string {
	t.Helper()
	if RerunDriver() != "" {
		t.Skip("inside a driver rerun")
	}
	SkipReruns(t)
	if testing.Short() {
		t.Skip("reruns GPU tests on SwiftShader")
	}
	icd := os.Getenv("GPURUN_SWIFTSHADER_ICD")
	if icd == "" {
		icd = SwiftShaderICD
	}
	if _, err := os.Stat(icd); err != nil {
		ci.Missing(t, "SwiftShader (apt-get install chromium-common; .ci/setup does): %v", err)
	}
	return icd
}

// rerun runs cmd (a test binary) on SwiftShader and fails unless it passes.
// The rerun is verbose: a driver that crashes the process (SwiftShader's
// threads are not Go's, so nothing of Go's is printed) leaves the name of
// the test it crashed in as the last lines of the tail.
func rerun(t *testing.T, cmd *exec.Cmd, icd, run string) {
	t.Helper()
	// The rerun has one driver: a device selection (gpu.DeviceEnv) of the
	// run around it does not apply.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, gpu.DeviceEnv+"=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "VK_ICD_FILENAMES="+icd, driverEnv+"=SwiftShader")
	if deadline, ok := t.Deadline(); ok {
		// The rerun gets what is left of this test's time, less a minute to
		// report, so a hang inside it fails here with its output instead of
		// killing this binary without any.
		left := time.Until(deadline) - time.Minute
		if left <= 0 {
			t.Fatalf("no time left for the SwiftShader rerun of %s", run)
		}
		cmd.Args = append(cmd.Args, "-test.timeout="+left.Round(time.Second).String())
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tests on SwiftShader failed: %v\n%s", err, tail(out))
	}
	if !bytes.Contains(out, []byte("PASS")) {
		t.Fatalf("tests on SwiftShader: no PASS in the output\n%s", tail(out))
	}
	t.Logf("SwiftShader rerun of %s: %s", run, bytes.TrimSpace(tail(out)))
}

// RerunDriver is the driver a rerun runs on ("SwiftShader"), or "" outside
// a rerun: tests whose cases vary only what the host plans (not the
// kernels a driver compiles) may run fewer of them there.
func RerunDriver() string { return os.Getenv(driverEnv) }

// CheckDriver fails the test when a driver rerun is under way and neither
// the device's name nor its driver description (pass both: wgpu reports
// SwiftShader's name as a device id and the name as the driver) names the
// driver it expects.
func CheckDriver(t testing.TB, name, driver string) {
	t.Helper()
	want := RerunDriver()
	if want != "" && !strings.Contains(name, want) && !strings.Contains(driver, want) {
		t.Fatalf("device %q (driver %q), but this run expects driver %s", name, driver, want)
	}
}

func tail(b []byte) []byte {
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return bytes.TrimSpace(b)
}
