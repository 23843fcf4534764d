//go:build cgo

package vulkan

import (
	"slices"
	"testing"

	"github.com/gpurun/gpurun/internal/gputest"
)

// TestInstanceExtensions: portability enumeration and its flag are asked
// for exactly when the loader offers the extension.
func TestInstanceExtensions(t *testing.T) {
	flags, ext := instanceExtensions([]string{"VK_KHR_surface", portabilityEnumeration, "VK_EXT_debug_utils"})
	if flags != enumeratePortabilityBit || ext != portabilityEnumeration {
		t.Errorf("offered: flags %#x, extension %q", flags, ext)
	}
	if flags, ext := instanceExtensions([]string{"VK_KHR_surface"}); flags != 0 || ext != "" {
		t.Errorf("not offered: flags %#x, extension %q", flags, ext)
	}
}

// TestLoaderOffersPortability: the loader here (Debian's, 1.3.239) offers
// the extension, so Devices runs with it enabled and still finds the
// drivers.
func TestLoaderOffersPortability(t *testing.T) {
	_, err := getInstance()
	gputest.NoDevice(t, "vulkan", err)
	if !slices.Contains(availableInstanceExtensions(), portabilityEnumeration) {
		t.Errorf("the loader does not offer %s: %q", portabilityEnumeration, availableInstanceExtensions())
	}
	devs, err := Devices()
	if err != nil || len(devs) == 0 {
		t.Fatalf("Devices with portability enumeration: %v, %v", devs, err)
	}
}
