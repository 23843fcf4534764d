// Package qemutest runs a package's tests for arm64 on a machine of
// another architecture: it vets the package for arm64, builds its test
// binary with GOARCH=arm64 and runs that binary under qemu-user (Debian's
// qemu-user-static, which .ci/setup installs) on the CPU models asked for.
// The timings such a run gives mean nothing; it checks correctness only.
package qemutest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/ci"
)

// CPU is one emulated CPU model to run the tests on.
type CPU struct {
	// Model is qemu's -cpu value, such as "max" (every extension qemu
	// emulates, the dot product one included) or "cortex-a57" (plain
	// ARMv8.0 NEON).
	Model string
	// Env holds extra NAME=value variables for the test binary.
	Env []string
	// Run, when set, is a -test.run pattern for this model alone: a
	// second model that differs from the first only in the kernels it
	// picks reruns the tests that reach them. Config.MustPass is checked
	// for the names it matches.
	Run string
}

// Config says what to run.
type Config struct {
	CPUs []CPU
	// Args are extra arguments for the test binary (-test.run and the
	// like); -test.short and -test.v are always given.
	Args []string
	// MustPass names top-level tests the output must report as passed, so
	// a test that was skipped or filtered out does not count as a pass.
	MustPass []string
}

// Run builds the test binary of the package in the current directory (the
// package under test) for arm64 and runs it under qemu-aarch64-static on
// every CPU of c. Without qemu it skips, or fails when CI=true. It skips
// in -short mode and on arm64 itself, where the tests run natively.
func Run(t *testing.T, c Config) {
	t.Helper()
	if runtime.GOARCH == "arm64" {
		t.Skip("the tests run natively on arm64")
	}
	if testing.Short() {
		t.Skip("builds and emulates the arm64 test binary")
	}
	qemu, err := exec.LookPath("qemu-aarch64-static")
	if err != nil {
		ci.Missing(t, "qemu-aarch64-static (apt-get install qemu-user-static; .ci/setup does): %v", err)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go tool: %v", err)
	}
	env := append(os.Environ(), "GOARCH=arm64", "CGO_ENABLED=0")
	vet := exec.Command(goTool, "vet", ".")
	vet.Env = env
	if out, err := vet.CombinedOutput(); err != nil {
		t.Fatalf("GOARCH=arm64 go vet: %v\n%s", err, out)
	}
	bin := filepath.Join(t.TempDir(), "pkg.arm64.test")
	build := exec.Command(goTool, "test", "-c", "-o", bin, ".")
	build.Env = env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("GOARCH=arm64 go test -c: %v\n%s", err, out)
	}
	for _, cpu := range c.CPUs {
		t.Run(cpu.Model, func(t *testing.T) {
			args := append([]string{"-cpu", cpu.Model, bin, "-test.short", "-test.v", "-test.count=1"}, c.Args...)
			var only *regexp.Regexp
			if cpu.Run != "" {
				var err error
				if only, err = regexp.Compile(cpu.Run); err != nil {
					t.Fatalf("CPU %s: Run: %v", cpu.Model, err)
				}
				args = append(args, "-test.run="+cpu.Run)
			}
			cmd := exec.Command(qemu, args...)
			cmd.Env = append(withoutQEMU(os.Environ()), cpu.Env...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("arm64 tests under qemu -cpu %s: %v\n%s", cpu.Model, err, out)
			}
			for _, name := range c.MustPass {
				if only != nil && !only.MatchString(name) {
					continue
				}
				if !strings.Contains(string(out), "--- PASS: "+name+" ") {
					t.Errorf("arm64 tests under qemu -cpu %s: %s did not pass\n%s", cpu.Model, name, out)
				}
			}
		})
	}
}

// withoutQEMU drops QEMU_* variables, which could change what runs
// (QEMU_CPU, QEMU_LD_PREFIX and the like).
func withoutQEMU(env []string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, "QEMU_") {
			out = append(out, e)
		}
	}
	return out
}
