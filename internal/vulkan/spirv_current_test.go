//go:build cgo

package vulkan

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gpurun/gpurun/internal/ci"
)

// TestTestShadersCurrent regenerates the committed WGSL test SPIR-V with
// naga (as go generate does) and compares, where naga is installed. (The
// GLSL one, half.spv, depends on the glslc version and is not compared.)
func TestTestShadersCurrent(t *testing.T) {
	naga, err := exec.LookPath("naga")
	if err != nil {
		ci.Missing(t, "naga v30 (see README: cargo install naga-cli)")
	}
	for _, name := range []string{"add", "affine"} {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), name+".spv")
			cmd := exec.Command(naga, "--spirv-version", "1.3", filepath.Join("testdata", name+".wgsl"), out)
			if msg, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("naga: %v\n%s", err, msg)
			}
			fresh, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			committed, err := os.ReadFile(filepath.Join("testdata", name+".spv"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(fresh, committed) {
				t.Errorf("testdata/%s.spv is stale: run go generate ./internal/vulkan", name)
			}
		})
	}
}
