package vulkan

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// validationChildEnv marks the child process of TestValidationClean.
const validationChildEnv = "GPURUN_VULKAN_VALIDATION_CHILD"

// TestValidationClean runs this package's tests again under the Khronos
// validation layer, where installed (vulkan-validationlayers), and fails on
// any validation message: lavapipe tolerates API misuse that real drivers
// do not (missing features, bad descriptor ranges, leaked objects).
func TestValidationClean(t *testing.T) {
	if os.Getenv(validationChildEnv) != "" {
		t.Skip("inside the validation run")
	}
	if testing.Short() {
		t.Skip("reruns the package under the validation layer")
	}
	found := false
	for _, dir := range []string{"/usr/share/vulkan/explicit_layer.d", "/usr/local/share/vulkan/explicit_layer.d", "/etc/vulkan/explicit_layer.d"} {
		if _, err := os.Stat(filepath.Join(dir, "VkLayer_khronos_validation.json")); err == nil {
			found = true
		}
	}
	if !found {
		t.Skip("Khronos validation layer not installed")
	}
	if _, err := Devices(); err != nil {
		t.Skipf("no device: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^Test", "-test.skip=^(TestNoDriver|TestValidationClean)$", "-test.short")
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
