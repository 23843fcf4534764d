package simd

import (
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/cpu"
)

// TestCPUFeatureLimit: the documented way to run the CPU backend's
// narrower kernels on a bigger CPU, GODEBUG=cpu.<feature>=off (read by
// x/sys/cpu at start), makes the package choose them: the test binary
// run again with AVX-512 F off must pick the AVX2 kernels (GEMMs
// included; the AVX-VNNI ones where the CPU has that), with AVX-VNNI off
// too the AVX2 ones, and with AVX2 off the pure-Go ones.
func TestCPUFeatureLimit(t *testing.T) {
	if want := os.Getenv("SIMD_TEST_WANT_BEST"); want != "" {
		if got := Best().Name; got != want {
			t.Fatalf("with GODEBUG=%s the package chose %q, want %q", os.Getenv("GODEBUG"), got, want)
		}
		if (want == AVX2.Name || want == AVXVNNI.Name) && (!HasGemm(GemmQ8) || !HasGemm(GemmQ4) || !HasGemmK(Q4K) || !HasGemmK(Q6K)) {
			t.Fatal("AVX2 chosen without its GEMM kernels")
		}
		return
	}
	if !cpu.X86.HasAVX2 || !cpu.X86.HasFMA {
		t.Skip("no AVX2 here: nothing to limit") // CI's machines have AVX2
	}
	narrow := AVX2.Name // what AVX-512 off leaves
	if cpu.X86.HasAVXVNNI {
		narrow = AVXVNNI.Name
	}
	for _, c := range []struct{ godebug, want string }{
		{"cpu.avx512f=off", narrow},
		{"cpu.avx512vnni=off", narrow},
		{"cpu.avx512f=off,cpu.avxvnni=off", AVX2.Name},
		{"cpu.avx2=off", Generic.Name},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCPUFeatureLimit$", "-test.count=1")
		cmd.Env = append(os.Environ(), "GODEBUG="+c.godebug, "SIMD_TEST_WANT_BEST="+c.want)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("GODEBUG=%s: %v\n%s", c.godebug, err, out)
		}
	}
}
