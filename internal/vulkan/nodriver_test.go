//go:build cgo

package vulkan

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/gpurun/gpurun/gpu"
)

// noDriverEnv marks the child process of TestNoDriver.
const noDriverEnv = "GPURUN_VULKAN_NO_DRIVER_CHILD"

// TestNoDriver runs the test binary again with the loader pointed at no
// driver at all (the instance is process-wide, so it takes a new process)
// and checks that Devices and Open fail with gpu.ErrNoDevice.
func TestNoDriver(t *testing.T) {
	if os.Getenv(noDriverEnv) == "1" {
		_, err := Devices()
		if !errors.Is(err, gpu.ErrNoDevice) {
			t.Fatalf("Devices without a driver: %v, want gpu.ErrNoDevice", err)
		}
		_, err = Open(context.Background())
		if !errors.Is(err, gpu.ErrNoDevice) {
			t.Fatalf("Open without a driver: %v, want gpu.ErrNoDevice", err)
		}
		t.Logf("error: %v", err)
		return
	}
	if testing.Short() {
		t.Skip("starts a second test process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNoDriver$", "-test.v")
	empty := t.TempDir()
	cmd.Env = append(os.Environ(), noDriverEnv+"=1",
		// Both spellings: VK_DRIVER_FILES is the newer loader's name.
		"VK_ICD_FILENAMES="+empty+"/none.json", "VK_DRIVER_FILES="+empty+"/none.json")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("child output:\n%s", out)
}
