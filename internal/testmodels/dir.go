package testmodels

import (
	"os"
	"path/filepath"
	"testing"
)

// Root is the repository root: the nearest directory holding go.mod at or
// above the test's working directory (its package directory).
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("testmodels: no go.mod above the test directory")
		}
		dir = parent
	}
}

// Dir is ../shared/models beside the repository root. The reference data
// is required (in CI too), so a missing directory fails the test rather
// than skipping it.
func Dir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(Root(t), "..", "shared", "models")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("testmodels: shared models not found at %s (the repository expects ../shared/models beside its root): %v", dir, err)
	}
	return dir
}

// Path is the file elem (joined) inside Dir, e.g. Path(t, "arch", "llama.gguf").
func Path(t testing.TB, elem ...string) string {
	t.Helper()
	return filepath.Join(append([]string{Dir(t)}, elem...)...)
}
