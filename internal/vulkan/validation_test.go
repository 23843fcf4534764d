//go:build cgo

package vulkan

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/gpurun/gpurun/internal/ci"
	"github.com/gpurun/gpurun/internal/gputest"
)

// validationChildEnv marks the child process of TestValidationClean.
const validationChildEnv = "GPURUN_VULKAN_VALIDATION_CHILD"

// TestValidationClean runs this package's tests again under the Khronos
// validation layer (vulkan-validationlayers, which .ci/setup installs; in
// CI a missing layer fails the test) and fails on any validation message:
// lavapipe tolerates API misuse that real drivers do not (missing
// features, bad descriptor ranges, leaked objects). The rerun covers the
// device tests, the GPU backend's parity table with every kernel
// variant (TestKernelBackendVariants) and stories260K generated through
// the whole pipeline.
func TestValidationClean(t *testing.T) {
	if os.Getenv(validationChildEnv) != "" {
		t.Skip("inside the validation run")
	}
	gputest.SkipReruns(t)
	if testing.Short() {
		t.Skip("reruns the package under the validation layer")
	}
	dirs := []string{"/usr/share/vulkan/explicit_layer.d", "/usr/local/share/vulkan/explicit_layer.d", "/etc/vulkan/explicit_layer.d"}
	for _, env := range []string{"VK_LAYER_PATH", "VK_ADD_LAYER_PATH"} {
		dirs = append(dirs, filepath.SplitList(os.Getenv(env))...)
	}
	found := false
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "VkLayer_khronos_validation.json")); err == nil {
			found = true
		}
	}
	if !found {
		ci.Missing(t, "Khronos validation layer (vulkan-validationlayers; .ci/setup installs it)")
	}
	_, err := Devices()
	gputest.NoDevice(t, "vulkan", err)
	cmd := exec.Command(os.Args[0], "-test.run=^Test", "-test.skip=^(TestNoDriver|TestValidationClean|TestSwiftShader)$", "-test.short")
	cmd.Env = append(os.Environ(), validationChildEnv+"=1", "VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tests under validation failed: %v\n%s", err, tail(out))
	}
	if msgs := regexp.MustCompile(`Validation (Error|Warning): \[ [^\]]*\]`).FindAll(out, -1); len(msgs) > 0 {
		t.Fatalf("%d validation messages, first %s\n%s", len(msgs), msgs[0], tail(out))
	}
}

func tail(b []byte) []byte {
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return bytes.TrimSpace(b)
}
