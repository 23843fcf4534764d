package compute

import (
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/tuning"
)

// TestCapsOfSubgroups: the subgroup kernels run where every subgroup size
// the device may run suits them (a power of two from 4 to 64), whether it
// names one size (Vulkan) or a range (a browser).
func TestCapsOfSubgroups(t *testing.T) {
	for _, tc := range []struct {
		name     string
		min, max int
		want     bool
	}{
		{"none", 0, 0, false},
		{"Vulkan, 32", 32, 0, true},
		{"Vulkan, 2", 2, 0, false},
		{"browser, 4 to 4", 4, 4, true},
		{"browser, 8 to 32", 8, 32, true},
		{"browser, 32 to 128", 32, 128, false},
		{"browser, 4 to 48", 4, 48, false},
	} {
		c := capsOf(gpu.Caps{SubgroupSize: tc.min, SubgroupMaxSize: tc.max}, tuning.Options{})
		if c.subgroups != tc.want {
			t.Errorf("%s: subgroups %v, want %v", tc.name, c.subgroups, tc.want)
		}
	}
	if capsOf(gpu.Caps{SubgroupSize: 32}, tuning.Options{Subgroups: tuning.SubgroupsOff}).subgroups {
		t.Error("SubgroupsOff: subgroups on")
	}
}
