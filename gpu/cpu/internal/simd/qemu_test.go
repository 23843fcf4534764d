//go:build !arm64

package simd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestARM64UnderQEMU tests the arm64 kernels on this (non-arm64) machine:
// it vets the package for arm64 (the assembly's frame sizes and argument
// names), builds the package's test binary for arm64 and runs it under
// qemu-user (Debian's qemu-user-static, installed by .ci/setup) once on a
// CPU model with the dot product extension (max: the neon and neon-sdot
// variants) and once on one without (cortex-a57: neon only). Every parity
// test of this package then runs against the arm64 implementations.
// qemu's timings mean nothing; this checks correctness only.
func TestARM64UnderQEMU(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and emulates the arm64 test binary")
	}
	qemu, err := exec.LookPath("qemu-aarch64-static")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("qemu-aarch64-static not found (bash .ci/setup installs qemu-user-static): %v", err)
		}
		t.Skipf("qemu-aarch64-static not found (apt-get install qemu-user-static): %v", err)
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
	bin := filepath.Join(t.TempDir(), "simd.arm64.test")
	build := exec.Command(goTool, "test", "-c", "-o", bin, ".")
	build.Env = env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("GOARCH=arm64 go test -c: %v\n%s", err, out)
	}
	for _, c := range []struct{ cpu, impls string }{
		{"max", "go,neon,neon-sdot"},
		{"cortex-a57", "go,neon"},
	} {
		t.Run(c.cpu, func(t *testing.T) {
			cmd := exec.Command(qemu, "-cpu", c.cpu, bin, "-test.short", "-test.v", "-test.count=1")
			cmd.Env = append(withoutQEMU(os.Environ()), "SIMD_WANT_IMPLS="+c.impls)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("arm64 tests under qemu -cpu %s: %v\n%s", c.cpu, err, out)
			}
			for _, name := range []string{"TestARM64Impls", "TestFloatParity", "TestBlockParity", "TestWeightedSumParity", "TestDynamicParity", "TestRowsParity", "TestExpParity", "TestKernelsAllocateNothing"} {
				if !strings.Contains(string(out), "--- PASS: "+name+" ") {
					t.Errorf("arm64 tests under qemu -cpu %s: %s did not pass\n%s", c.cpu, name, out)
				}
			}
		})
	}
}

// withoutQEMU drops QEMU_* variables (QEMU_CPU would override nothing,
// but QEMU_LD_PREFIX and the like could change what runs).
func withoutQEMU(env []string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, "QEMU_") {
			out = append(out, e)
		}
	}
	return out
}
