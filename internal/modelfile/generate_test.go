package modelfile

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gpurun/gpurun/internal/ci"
)

// flatcVersion made the committed internal/tflite code.
const flatcVersion = "flatc version 2.0.8"

// The committed internal/tflite code must be what flatc makes of
// schema.fbs (the go:generate line in modelfile.go).
func TestGeneratedCodeUpToDate(t *testing.T) {
	flatc, err := exec.LookPath("flatc")
	if err != nil {
		ci.Missing(t, "flatc (apt-get install flatbuffers-compiler; .ci/setup does)")
	}
	// Different flatc releases format their output differently; compare only
	// with the release that produced the committed code.
	ver, err := exec.Command(flatc, "--version").Output()
	if err != nil || !bytes.Contains(ver, []byte(flatcVersion)) {
		ci.Missing(t, "flatc %q is not %s, which generated internal/tflite (Debian 12's flatbuffers-compiler)", bytes.TrimSpace(ver), flatcVersion)
	}
	out := t.TempDir()
	cmd := exec.Command(flatc, "--go", "--go-namespace", "tflite", "-o", out, filepath.Join("internal", "tflite", "schema.fbs"))
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("flatc: %v\n%s", err, msg)
	}
	generated, err := filepath.Glob(filepath.Join(out, "tflite", "*.go"))
	if err != nil || len(generated) == 0 {
		t.Fatalf("flatc produced no Go files (%v)", err)
	}
	committed, _ := filepath.Glob(filepath.Join("internal", "tflite", "*.go"))
	if len(committed) != len(generated) {
		t.Errorf("%d committed files, flatc makes %d", len(committed), len(generated))
	}
	for _, g := range generated {
		want, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("internal", "tflite", filepath.Base(g)))
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(g), err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from flatc's output; run go generate", filepath.Base(g))
		}
	}
}
