package simd

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"
)

// TestARM64Impls checks that the tests run every arm64 variant the CPU
// supports: the SMULL/SADALP kernels on every core and the SDOT ones
// where the dot product extension is present. Under qemu-user
// (TestARM64UnderQEMU on the build machine) SIMD_WANT_IMPLS names the
// implementations the emulated CPU model must give, so a broken feature
// detection fails instead of quietly testing fewer variants.
func TestARM64Impls(t *testing.T) {
	var names []string
	for _, k := range Impls() {
		names = append(names, k.Name)
	}
	want := []string{"go", "neon"}
	if cpu.ARM64.HasASIMDDP {
		want = append(want, "neon-sdot")
	}
	if got, w := strings.Join(names, ","), strings.Join(want, ","); got != w {
		t.Errorf("implementations %s, want %s (ASIMD %v, ASIMDDP %v)", got, w, cpu.ARM64.HasASIMD, cpu.ARM64.HasASIMDDP)
	}
	if w := os.Getenv("SIMD_WANT_IMPLS"); w != "" && strings.Join(names, ",") != w {
		t.Errorf("implementations %s, want %s for this CPU model", strings.Join(names, ","), w)
	}
}
