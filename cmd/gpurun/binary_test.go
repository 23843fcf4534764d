package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpurun/gpurun/internal/ci"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/safetensors"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// The tests in this file run gpurun as a program: the test binary re-runs
// itself with GPURUN_TEST_AS_MAIN=1, which makes TestMain call main() with
// the arguments, so exit codes, signals, stdout and stderr are the real
// command's.
func TestMain(m *testing.M) {
	if os.Getenv("GPURUN_TEST_AS_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// gpurunCmd is the command running gpurun with args.
func gpurunCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "GPURUN_TEST_AS_MAIN=1")
	return cmd
}

type result struct {
	stdout, stderr string
	code           int
}

// exe runs gpurun with args and stdin.
func exe(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	cmd := gpurunCmd(args...)
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("gpurun %s: %v", strings.Join(args, " "), err)
	}
	return result{out.String(), errOut.String(), code}
}

// mustExe is exe failing the test unless gpurun exits 0.
func mustExe(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	r := exe(t, stdin, args...)
	if r.code != 0 {
		t.Fatalf("gpurun %s: exit %d\nstderr: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r
}

// checkErrorLine checks that a failed command printed one error line in the
// form "gpurun: <what failed>: <why>", with no segment repeated, and
// nothing that says a model was loaded.
func checkErrorLine(t *testing.T, args []string, r result) string {
	t.Helper()
	name := strings.Join(args, " ")
	if r.code != 1 {
		t.Errorf("gpurun %s: exit %d, want 1\nstderr: %s", name, r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	last := lines[len(lines)-1]
	parts := strings.Split(last, ": ")
	if len(parts) < 3 || parts[0] != "gpurun" {
		t.Errorf("gpurun %s: error %q is not \"gpurun: <what failed>: <why>\"", name, last)
	}
	for i := 1; i < len(parts); i++ {
		if parts[i] == parts[i-1] || strings.Contains(parts[i], "gpurun:") {
			t.Errorf("gpurun %s: repeated prefix in %q", name, last)
		}
	}
	seen := map[string]bool{}
	for _, p := range parts[:len(parts)-1] {
		if !strings.Contains(p, " ") && seen[p] {
			t.Errorf("gpurun %s: prefix %q twice in %q", name, p, last)
		}
		seen[p] = true
	}
	for _, bad := range []string{"strconv.", "invalid argument", ".gpurun-"} {
		if strings.Contains(last, bad) {
			t.Errorf("gpurun %s: internal detail %q in %q", name, bad, last)
		}
	}
	if strings.Contains(r.stderr, "loaded ") {
		t.Errorf("gpurun %s: a model was loaded before the error:\n%s", name, r.stderr)
	}
	return last
}

// storiesTask converts stories260K with tok512.model into a .task once per
// test.
func storiesTask(t *testing.T) string {
	t.Helper()
	dir := testmodels.Dir(t)
	out := filepath.Join(t.TempDir(), "s260.task")
	mustExe(t, "", "convert", filepath.Join(dir, "stories260K.bin"), "--tokenizer", filepath.Join(dir, "tok512.model"), "-o", out, "-q")
	return out
}

func TestVersion(t *testing.T) {
	r := mustExe(t, "", "--version")
	if !regexp.MustCompile(`^gpurun \S.*, go1\.\d+`).MatchString(r.stdout) {
		t.Errorf("--version printed %q", r.stdout)
	}
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/gpurun/gpurun", Version: "v0.3.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "85ab4c0a1b2c3d4e5f60718293a4b5c6d7e8f901"}, {Key: "vcs.modified", Value: "true"}, {Key: "vcs.time", Value: "2026-11-22T07:00:00Z"}}}
	if got, want := version(bi, true), "v0.3.0, revision 85ab4c0a1b2c with local changes of 2026-11-22T07:00:00Z, go1.26.0"; got != want {
		t.Errorf("version %q, want %q", got, want)
	}
	bi = &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}
	if got, want := version(bi, true), "(devel), go1.26.0"; got != want {
		t.Errorf("version %q, want %q", got, want)
	}
}

// TestVersionWithoutStamp: a binary without version control stamps (go
// run, go test, a git worktree) takes the revision from git when it runs
// in a gpurun checkout, and says why there is none elsewhere.
func TestVersionWithoutStamp(t *testing.T) {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				t.Skip("this test binary carries a revision stamp")
			}
		}
	}
	r := mustExe(t, "", "--version")
	if head, err := exec.Command("git", "rev-parse", "HEAD").Output(); err != nil {
		// Sources without git (an unpacked archive): no revision either.
		if !strings.Contains(r.stdout, "no revision") {
			t.Errorf("--version without git (%v) printed %q", err, r.stdout)
		}
	} else if want := "revision " + string(head[:12]); !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "from git") {
		t.Errorf("--version in a checkout printed %q, want %q from git", r.stdout, want)
	}
	cmd := gpurunCmd("--version")
	cmd.Dir = t.TempDir()
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "no revision") || !regexp.MustCompile(`^gpurun \S.*, go1\.\d+`).Match(out) {
		t.Errorf("--version outside a checkout printed %q", out)
	}
}

// TestBadArguments: every flag is checked before anything is loaded, and
// the error names the flag and its valid range.
func TestBadArguments(t *testing.T) {
	task := storiesTask(t)
	for _, tc := range []struct {
		args []string
		want string // in the error line
	}{
		{[]string{"run", task, "-p", "x", "--temperature", "-1"}, "--temperature -1: want a number >= 0"},
		{[]string{"run", task, "-p", "x", "--temperature", "nan"}, "--temperature nan: want a number >= 0"},
		{[]string{"run", task, "-p", "x", "--top-p", "2"}, "--top-p 2: want a number in (0, 1]"},
		{[]string{"run", task, "-p", "x", "--top-p", "-1"}, "--top-p -1: want a number in (0, 1]"},
		{[]string{"run", task, "-p", "x", "--top-p", "0"}, "--top-p 0: want a number in (0, 1]"},
		{[]string{"run", task, "-p", "x", "--top-k", "-3"}, "--top-k -3: want an integer >= 0"},
		{[]string{"run", task, "-p", "x", "--max-tokens", "-5"}, "--max-tokens -5: want an integer >= 0, or -1"},
		{[]string{"run", task, "-p", "x", "--max-cache", "-1"}, "--max-cache -1: want an integer in 1..16777216"},
		{[]string{"run", task, "-p", "x", "--max-cache", "100000000"}, "--max-cache 100000000: want an integer in 1..16777216"},
		{[]string{"run", task, "-p", "x", "--max-cache", "600"}, "max cache 600 exceeds the model's context length 512 (want 1..512)"},
		{[]string{"run", task, "-p", "x", "--seed", "-2"}, "--seed -2: want an integer in 0..18446744073709551615, or -1 or 0"},
		{[]string{"run", task, "-p", "x", "--seed", "abc"}, "--seed abc: want an integer"},
		{[]string{"run", task, "-p", "x", "--backend", "gpu"}, `--backend gpu: want one of auto, cpu, webgpu, vulkan`},
		{[]string{"run", task, "-p", "x", "--activations", "f8"}, `--activations f8: want one of auto, f32, f16`},
		{[]string{"run", task, "-p", "x", "--prompt-ids", "1"}, "give one prompt, not --prompt and --prompt-ids"},
		{[]string{"run", task}, "a prompt is required"},
		{[]string{"run", "-p", "x"}, "a model is required"},
		{[]string{"run", "no-such.task", "-p", "x"}, "model stat no-such.task: no such file or directory"},
		{[]string{"run", task, "-m", "other.task", "-p", "x"}, "two models given"},
		{[]string{"run", task, "-f", "no-such-prompt.txt"}, "prompt file: open no-such-prompt.txt: no such file or directory"},
		{[]string{"bench", task, "--reps", "0"}, "--reps 0: want an integer in 1..1000"},
		{[]string{"bench", task, "--prompt-len", "-1"}, "--prompt-len -1: want an integer >= 1"},
		{[]string{"bench", "--synthetic", "gpt-5"}, "--synthetic gpt-5: want one of"},
		{[]string{"bench", "--synthetic", "phi-2", "--synthetic-quant", "int3"}, "--synthetic-quant int3: want one of int4, int8, f16"},
		{[]string{"convert", task, "-o", filepath.Join(t.TempDir(), "x.gguf")}, "gpurun writes .tflite model files and .task bundles, not .gguf files"},
		{[]string{"convert", task, "-o", "x.tflite", "--quant", "int3"}, "--quant int3: want one of keep, "},
		{[]string{"convert", task, "-o", "x.tflite", "--format", "onnx"}, "--format onnx: want one of llama2c, gguf, hf"},
		{[]string{"convert", task, "-o", "x.tflite", "--activations", "bf16"}, "--activations bf16: want one of auto, f32, f16"},
		{[]string{"chat", task, "--max-tokens", "0"}, "--max-tokens 0: a reply needs at least 1 token"},
		{[]string{"chat", task, "--top-p", "1.5"}, "--top-p 1.5: want a number in (0, 1]"},
		// Argument counts and commands, in the same form.
		{[]string{"frobnicate"}, "gpurun: frobnicate: unknown command (the commands: bench, bench-image, bundle, chat, "},
		{[]string{"run", task, "extra"}, "gpurun: run: 2 arguments given (" + task + " extra), want at most 1; usage: gpurun run [MODEL]"},
		{[]string{"inspect"}, "gpurun: inspect: no argument given, want 1; usage: gpurun inspect FILE"},
		{[]string{"tokenize", "x"}, `gpurun: tokenize: 1 argument given (x), want none; usage: gpurun tokenize -t TOKENIZER`},
		{[]string{"devices", "x", "y"}, `gpurun: devices: 2 arguments given (x y), want none`},
		{[]string{"convert", "a", "b"}, `gpurun: convert: 2 arguments given (a b), want 1`},
	} {
		r := exe(t, "", tc.args...)
		last := checkErrorLine(t, tc.args, r)
		if !strings.Contains(last, tc.want) {
			t.Errorf("gpurun %s:\n got %q\nwant it to contain %q", strings.Join(tc.args, " "), last, tc.want)
		}
	}
}

// TestRuntimeErrorFormat: errors found while running read
// "gpurun: <what failed>: <why>" once, without repeated package prefixes.
func TestRuntimeErrorFormat(t *testing.T) {
	task := storiesTask(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", task, "--prompt-ids", "1,600", "--temperature", "0"}, "gpurun: run: generate: pipeline: invalid prompt: id 600 at 1 outside the vocabulary of 512"},
		{[]string{"run", task, "--max-cache", "8", "--prompt-ids", "1,2,3,4,5,6,7,8,9"}, "gpurun: run: generate: pipeline: prompt longer than the KV cache: 9 tokens"},
	} {
		r := exe(t, "", tc.args...)
		lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
		last := lines[len(lines)-1]
		if r.code != 1 || !strings.HasPrefix(last, tc.want) {
			t.Errorf("gpurun %s: exit %d, error %q, want %q", strings.Join(tc.args, " "), r.code, last, tc.want)
		}
	}
}

// TestConvertTargets: -o replaces only a regular file or nothing; a device,
// a FIFO, a directory, a symbolic link or a non-model extension are refused
// with an error naming the path, and stay as they were.
func TestConvertTargets(t *testing.T) {
	src := filepath.Join(testmodels.Dir(t), "stories260K.bin")
	tmp := t.TempDir()
	fifo := filepath.Join(tmp, "fifo.tflite")
	if err := mkfifo(t, fifo); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "dir.tflite")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	plainDir := filepath.Join(tmp, "plain")
	if err := os.Mkdir(plainDir, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, "link.tflite")
	if err := os.Symlink(filepath.Join(tmp, "target.tflite"), link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ out, want string }{
		{"/dev/full", "/dev/full is a character device, not a regular file"},
		{filepath.Join(tmp, "noext"), "noext has no extension"},
		{"/dev/null/x.tflite", ""},
		{fifo, fifo + " is a FIFO, not a regular file"},
		{dir, dir + " is a directory (give a file name ending in .tflite or .task)"},
		{plainDir, plainDir + " is a directory (give a file name ending in .tflite or .task)"},
		{link, link + " is a symbolic link, not a regular file"},
		{filepath.Join(tmp, "m.gguf"), "not .gguf files"},
		{filepath.Join(tmp, "missing", "m.tflite"), "cannot create a file in " + filepath.Join(tmp, "missing") + ": no such file or directory"},
	} {
		args := []string{"convert", src, "-o", tc.out, "-q"}
		last := checkErrorLine(t, args, exe(t, "", args...))
		if !strings.Contains(last, tc.want) {
			t.Errorf("-o %s: %q, want it to contain %q", tc.out, last, tc.want)
		}
	}
	if fi, err := os.Stat("/dev/full"); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Errorf("/dev/full is no longer a character device: %v %v", fi, err)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced: %v %v", fi, err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", fi, err)
	}
	if _, err := os.Stat(filepath.Join(tmp, "target.tflite")); err == nil {
		t.Error("the link's target was written")
	}
	// A regular file is replaced, and nothing else is left behind.
	reg := filepath.Join(tmp, "m.tflite")
	if err := os.WriteFile(reg, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustExe(t, "", "convert", src, "-o", reg, "-q")
	if fi, err := os.Stat(reg); err != nil || fi.Size() < 1000 {
		t.Errorf("the regular file was not replaced: %v %v", fi, err)
	}
	ents, _ := os.ReadDir(tmp)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".gpurun-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

// TestStdoutWriteError: generated text that cannot be written fails the
// command.
func TestStdoutWriteError(t *testing.T) {
	task := storiesTask(t)
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	for _, extra := range [][]string{nil, {"--json"}} {
		args := append([]string{"run", task, "-p", "Once", "--max-tokens", "8"}, extra...)
		cmd := gpurunCmd(args...)
		var errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = full, &errOut
		err := cmd.Run()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 1 {
			t.Errorf("gpurun %v > /dev/full: %v, want exit 1", args, err)
		}
		if !strings.Contains(errOut.String(), "gpurun: run: writing the output: write /dev/stdout: no space left on device") {
			t.Errorf("gpurun %v > /dev/full: stderr %q", args, errOut.String())
		}
	}
}

// runJSONExe runs `gpurun run --json ...` and decodes the result line.
func runJSONExe(t *testing.T, stdin string, args ...string) (runResult, result) {
	t.Helper()
	r := mustExe(t, stdin, append([]string{"run", "--json"}, args...)...)
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	var res runResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("last line of stdout is not the JSON result: %v\n%s", err, r.stdout)
	}
	return res, r
}

// TestPromptSources: -p, -p - (stdin), -f FILE and the positional model
// give the same prompt ids (llama.cpp's golden ids); -p "" is a prompt of
// only BOS; the generated text ends with a newline; a sampled run reports
// its seed on stderr.
func TestPromptSources(t *testing.T) {
	task := storiesTask(t)
	c := testmodels.StoriesCases(t)[0]
	file := filepath.Join(t.TempDir(), "prompt.txt")
	if err := os.WriteFile(file, []byte(c.Prompt+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n := fmt.Sprint(len(c.GeneratedIDs))
	for _, tc := range []struct {
		stdin string
		args  []string
	}{
		{"", []string{"-m", task, "-p", c.Prompt}},
		{"", []string{task, "-p", c.Prompt}},
		{c.Prompt + "\n", []string{task, "-p", "-"}},
		{"", []string{task, "-f", file}},
	} {
		res, r := runJSONExe(t, tc.stdin, append(tc.args, "--temperature", "0", "--max-tokens", n)...)
		if fmt.Sprint(res.PromptIDs) != fmt.Sprint(c.PromptIDs) || fmt.Sprint(res.GeneratedIDs) != fmt.Sprint(c.GeneratedIDs) {
			t.Errorf("%v: prompt %v generated %v, golden %v %v", tc.args, res.PromptIDs, res.GeneratedIDs, c.PromptIDs, c.GeneratedIDs)
		}
		if !strings.HasPrefix(r.stdout, res.Text+"\n") {
			t.Errorf("%v: stdout %q does not hold the text and a newline", tc.args, r.stdout)
		}
		if strings.Contains(r.stderr, "seed") || res.Seed != 0 {
			t.Errorf("%v: greedy decoding reported a seed", tc.args)
		}
	}
	res, r := runJSONExe(t, "", task, "-p", "", "--max-tokens", "4", "--seed", "77")
	if fmt.Sprint(res.PromptIDs) != "[1]" || len(res.GeneratedIDs) != 4 || res.Seed != 77 {
		t.Errorf(`-p "": prompt %v generated %v seed %d`, res.PromptIDs, res.GeneratedIDs, res.Seed)
	}
	if !strings.Contains(r.stderr, "seed 77") {
		t.Errorf("stderr does not report the seed:\n%s", r.stderr)
	}
	r = mustExe(t, "", "run", task, "-p", "Once", "--max-tokens", "3")
	m := regexp.MustCompile(`seed (\d+)`).FindStringSubmatch(r.stderr)
	if m == nil || !strings.HasSuffix(r.stdout, "\n") {
		t.Fatalf("a random seed is not reported, or no final newline:\nstdout %q\nstderr %s", r.stdout, r.stderr)
	}
	again := mustExe(t, "", "run", task, "-p", "Once", "--max-tokens", "3", "--seed", m[1])
	if again.stdout != r.stdout {
		t.Errorf("the reported seed %s does not reproduce the text: %q, then %q", m[1], r.stdout, again.stdout)
	}
	res, r = runJSONExe(t, "", task, "-p", "Once", "--max-tokens", "0")
	if len(res.GeneratedIDs) != 0 || len(res.PromptIDs) != 2 || res.Text != "" {
		t.Errorf("--max-tokens 0 generated %v from %v", res.GeneratedIDs, res.PromptIDs)
	}
}

// TestCacheFullRate: a prompt that fills the cache generates one token with
// no decode step, and no decode rate is reported.
func TestCacheFullRate(t *testing.T) {
	task := storiesTask(t)
	res, r := runJSONExe(t, "", task, "--max-cache", "16", "--prompt-ids", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16", "--temperature", "0")
	if res.Metrics.StopReason != "cache_full" || len(res.GeneratedIDs) != 1 {
		t.Errorf("stop %q after %d tokens, want cache_full after 1", res.Metrics.StopReason, len(res.GeneratedIDs))
	}
	if strings.Contains(r.stdout, `"decode_tokens_per_sec"`) || !strings.Contains(r.stderr, "1 tokens generated, no decode step") {
		t.Errorf("decode rate reported without a decode step:\n%s%s", r.stdout, r.stderr)
	}
}

// TestInterrupt: Ctrl-C during generation prints the text so far, the
// metrics, and with --json a result with stop_reason "cancelled"; the exit
// status is 130.
func TestInterrupt(t *testing.T) {
	task := storiesTask(t)
	cmd := gpurunCmd("run", task, "-p", "Once upon a time", "--max-tokens", "-1", "--json", "--temperature", "0")
	cmd.Env = append(cmd.Env, "GPURUN_TEST_STEP_DELAY=200ms")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(stdout)
	first := make([]byte, 1)
	if _, err := io.ReadFull(br, first); err != nil {
		t.Fatalf("no output: %v\n%s", err, errOut.String())
	}
	time.Sleep(300 * time.Millisecond)
	cmd.Process.Signal(os.Interrupt)
	rest, _ := io.ReadAll(br)
	err = cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 130 {
		t.Errorf("exit %v, want 130", err)
	}
	out := string(first) + string(rest)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	var res runResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("no JSON result after the interrupt: %v\n%s", err, out)
	}
	if res.Metrics.StopReason != "cancelled" || len(res.GeneratedIDs) == 0 || !strings.HasPrefix(out, res.Text) {
		t.Errorf("result %+v\nstdout %q", res, out)
	}
	stderr := errOut.String()
	if !strings.Contains(stderr, "(stop: cancelled)") || !strings.HasSuffix(stderr, "gpurun: run: generation interrupted: context canceled\n") {
		t.Errorf("stderr:\n%s", stderr)
	}
}

// idList formats ids as --prompt-ids takes them.
func idList(ids []int) string {
	return strings.Trim(strings.ReplaceAll(fmt.Sprint(ids), " ", ","), "[]")
}

// TestRunDirect: run takes every GGUF of ../shared/models/arch and a
// llama2.c checkpoint as they are, without converting them, and reproduces
// llama.cpp's greedy ids; the GGUFs' SentencePiece vocabularies take text
// prompts.
func TestRunDirect(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testmodels.Dir(t), "arch", "*.gguf"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no GGUF files: %v", err)
	}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".gguf")
		t.Run(name, func(t *testing.T) {
			g := testmodels.Arch(t, name)
			res, r := runJSONExe(t, "", path, "--backend", "cpu", "--prompt-ids", idList(g.PromptIDs), "--temperature", "0", "--max-tokens", fmt.Sprint(len(g.GreedyIDs)))
			if fmt.Sprint(res.GeneratedIDs) != fmt.Sprint(g.GreedyIDs) {
				t.Errorf("greedy ids %v\nllama.cpp  %v", res.GeneratedIDs, g.GreedyIDs)
			}
			if !strings.Contains(r.stderr, "from gguf on cpu") {
				t.Errorf("load line does not say the format:\n%s", r.stderr)
			}
			// Greedy: a sampled first token may be the end of text (it was,
			// for gemma, at a random seed in CI).
			res, _ = runJSONExe(t, "", path, "--backend", "cpu", "-p", "Once upon a time", "--max-tokens", "4", "--temperature", "0")
			if len(res.PromptIDs) < 2 || len(res.GeneratedIDs) == 0 {
				t.Errorf("text prompt: prompt %v generated %v", res.PromptIDs, res.GeneratedIDs)
			}
		})
	}
	t.Run("llama2c", func(t *testing.T) {
		dir := testmodels.Dir(t)
		bin := filepath.Join(dir, "stories260K.bin")
		c := testmodels.StoriesCases(t)[0]
		for _, tok := range []string{"tok512.model", "tok512.bin"} {
			res, _ := runJSONExe(t, "", bin, "--tokenizer", filepath.Join(dir, tok), "-p", c.Prompt, "--temperature", "0", "--max-tokens", fmt.Sprint(len(c.GeneratedIDs)))
			if fmt.Sprint(res.PromptIDs) != fmt.Sprint(c.PromptIDs) || fmt.Sprint(res.GeneratedIDs) != fmt.Sprint(c.GeneratedIDs) {
				t.Errorf("--tokenizer %s: prompt %v generated %v, golden %v %v", tok, res.PromptIDs, res.GeneratedIDs, c.PromptIDs, c.GeneratedIDs)
			}
		}
		res, _ := runJSONExe(t, "", bin, "--prompt-ids", idList(c.PromptIDs), "--temperature", "0", "--max-tokens", "8")
		if fmt.Sprint(res.GeneratedIDs) != fmt.Sprint(c.GeneratedIDs[:8]) {
			t.Errorf("--prompt-ids without a tokenizer: generated %v, golden %v", res.GeneratedIDs, c.GeneratedIDs[:8])
		}
		args := []string{"run", bin, "-p", "Once"}
		r := exe(t, "", args...)
		if r.code != 1 || !strings.Contains(r.stderr, "has no tokenizer: a llama2.c checkpoint carries no tokenizer: give one (a SentencePiece .model or llama2.c tokenizer.bin); --prompt-ids takes token ids") {
			t.Errorf("text prompt without a tokenizer: exit %d\n%s", r.code, r.stderr)
		}
	})
}

// TestWebGPUQuiet: on WebGPU the load line names the device (not wgpu's
// "0x0" PCI id) and a headless machine's stderr carries no Mesa/Wayland
// XDG_RUNTIME_DIR complaints.
func TestWebGPUQuiet(t *testing.T) {
	requireBackend(t, "webgpu")
	task := storiesTask(t)
	cmd := gpurunCmd("run", task, "--backend", "webgpu", "-p", "Once", "--max-tokens", "4")
	var env []string
	for _, kv := range cmd.Env {
		if !strings.HasPrefix(kv, "XDG_RUNTIME_DIR=") && !strings.HasPrefix(kv, "WAYLAND_DISPLAY=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	stderr := errOut.String()
	if strings.Contains(stderr, "XDG_RUNTIME_DIR") {
		t.Errorf("stderr carries the XDG_RUNTIME_DIR warning:\n%s", stderr)
	}
	m := regexp.MustCompile(`on webgpu: ([^,]+),`).FindStringSubmatch(stderr)
	if m == nil || strings.HasPrefix(m[1], "0x") || m[1] == "" {
		t.Errorf("load line does not name the device:\n%s", stderr)
	}
}

// TestBenchJSONFields: bench --json is the versioned report: medians with
// their range for the figures the test measures, one entry per run; stderr
// is not a terminal, so no progress bar.
func TestBenchJSONFields(t *testing.T) {
	task := storiesTask(t)
	r := mustExe(t, "", "bench", task, "--backend", "cpu", "--prompt-len", "8", "--generate", "4", "--reps", "2", "--json")
	var rep struct {
		SchemaVersion int `json:"schema_version"`
		Results       []struct {
			Runs   []map[string]any `json:"runs"`
			Decode map[string]any   `json:"decode_tokens_per_sec"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if rep.SchemaVersion != 1 || len(rep.Results) != 1 {
		t.Fatalf("report %+v", rep)
	}
	var keys []string
	for k := range rep.Results[0].Decode {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if fmt.Sprint(keys) != "[max median min n]" {
		t.Errorf("decode statistic fields %v", keys)
	}
	if runs := rep.Results[0].Runs; len(runs) != 2 || runs[0]["prompt_tokens"] != 8.0 || runs[0]["generated_tokens"] != 4.0 {
		t.Errorf("runs %v", runs)
	}
	if strings.ContainsAny(r.stderr, "\r█") {
		t.Errorf("a progress bar on a stderr that is not a terminal:\n%q", r.stderr)
	}
}

// tmux drives a program in a real terminal: a tmux server of its own.
type tmux struct {
	t      *testing.T
	socket string
	last   string // the screen last captured
}

func (x *tmux) run(args ...string) string {
	x.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", x.socket}, args...)...).CombinedOutput()
	if err != nil {
		x.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (x *tmux) screen() string {
	x.t.Helper()
	out, err := exec.Command("tmux", "-L", x.socket, "capture-pane", "-p", "-J", "-S", "-200", "-t", "chat").CombinedOutput()
	if err != nil {
		x.t.Fatalf("tmux capture-pane: %v\n%s\nlast screen:\n%s", err, out, x.last)
	}
	x.last = string(out)
	return x.last
}

// waitFor waits until the screen satisfies ok, failing after 60 s.
func (x *tmux) waitFor(what string, ok func(string) bool) string {
	x.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s := x.screen()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			x.t.Fatalf("waiting for %s; the screen:\n%s", what, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestChatInTmux: gpurun chat in a terminal: a reply streams after each
// line, Ctrl-C stops a reply and returns to the prompt without leaving the
// chat, /reset starts over, /exit leaves with status 0.
func TestChatInTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		ci.Missing(t, "tmux (.ci/setup installs it)")
	}
	task := storiesTask(t)
	x := &tmux{t: t, socket: fmt.Sprintf("gpurun-test-%d", os.Getpid())}
	t.Cleanup(func() { exec.Command("tmux", "-L", x.socket, "kill-server").Run() })
	// The shell traps SIGINT so that Ctrl-C reaches gpurun without ending
	// the shell that reports gpurun's exit status.
	shell := fmt.Sprintf("trap true INT; GPURUN_TEST_AS_MAIN=1 GPURUN_TEST_STEP_DELAY=150ms %q chat %q --temperature 0 --max-tokens 24 --system 'A story.'; echo EXITED:$?; sleep 30",
		os.Args[0], task)
	x.run("new-session", "-d", "-s", "chat", "-x", "150", "-y", "50", "sh", "-c", shell)
	prompts := func(n int) func(string) bool {
		return func(s string) bool { return strings.Count(s, "> ") >= n }
	}
	x.waitFor("the first prompt", prompts(1))
	x.run("send-keys", "-t", "chat", "Once upon a time", "Enter")
	s := x.waitFor("the first reply", prompts(2))
	first := s[strings.Index(s, "> Once upon a time")+len("> Once upon a time"):]
	if reply := strings.TrimSpace(first[:strings.Index(first, "> ")]); len(reply) < 10 {
		t.Errorf("no reply streamed; the screen:\n%s", s)
	}
	// Ctrl-C half-way through a reply: it stops, the chat goes on.
	x.run("send-keys", "-t", "chat", "Where did they go?", "Enter")
	x.waitFor("a reply to start", func(s string) bool {
		i := strings.LastIndex(s, "Where did they go?")
		return i >= 0 && len(strings.TrimSpace(s[i+len("Where did they go?"):])) > 3
	})
	x.run("send-keys", "-t", "chat", "C-c")
	s = x.waitFor("the reply to stop", func(s string) bool { return strings.Contains(s, "(stopped)") && prompts(3)(s) })
	if strings.Contains(s, "EXITED") {
		t.Fatalf("Ctrl-C left the chat:\n%s", s)
	}
	x.run("send-keys", "-t", "chat", "/reset", "Enter")
	x.waitFor("the reset", func(s string) bool { return strings.Contains(s, "(conversation reset)") })
	x.run("send-keys", "-t", "chat", "The dog", "Enter")
	x.waitFor("a reply after the reset", prompts(5))
	x.run("send-keys", "-t", "chat", "/exit", "Enter")
	x.waitFor("the exit", func(s string) bool { return strings.Contains(s, "EXITED:0") })
}

// TestDeviceSelection: --device picks a device by index or name within a
// backend; an unknown one is an error listing the devices there are.
func TestDeviceSelection(t *testing.T) {
	task := storiesTask(t)
	args := []string{"run", task, "-p", "x", "--device", "0"}
	if last := checkErrorLine(t, args, exe(t, "", args...)); !strings.Contains(last, "--device 0: name the backend too") {
		t.Errorf("--device without --backend: %q", last)
	}
	r := mustExe(t, "", "run", task, "-p", "Once", "--max-tokens", "2", "--backend", "cpu", "--device", "0")
	if !strings.Contains(r.stderr, "on cpu:") {
		t.Errorf("--backend cpu --device 0:\n%s", r.stderr)
	}
	for _, backend := range []string{"vulkan", "webgpu"} {
		t.Run(backend, func(t *testing.T) {
			requireBackend(t, backend)
			r := mustExe(t, "", "run", task, "-p", "Once", "--max-tokens", "2", "--backend", backend, "--device", "0")
			m := regexp.MustCompile(`on ` + backend + `: ([^,]+),`).FindStringSubmatch(r.stderr)
			if m == nil {
				t.Fatalf("no load line:\n%s", r.stderr)
			}
			name := m[1]
			part := strings.Fields(name)[0]
			r = mustExe(t, "", "run", task, "-p", "Once", "--max-tokens", "2", "--backend", backend, "--device", strings.ToUpper(part))
			if !strings.Contains(r.stderr, "on "+backend+": "+name) {
				t.Errorf("--device %s picked another device:\n%s", strings.ToUpper(part), r.stderr)
			}
			args := []string{"run", task, "-p", "x", "--backend", backend, "--device", "7"}
			last := exe(t, "", args...).stderr
			if !strings.Contains(last, "no device 7") && !strings.Contains(last, `no adapter "7"`) || !strings.Contains(last, "0: "+part) {
				t.Errorf("--device 7: %q", last)
			}
		})
	}
}

// gpt2Vocab writes a copy of the GGUF at path whose tokenizer.ggml.model
// says "gpt2" (a byte-level BPE vocabulary, as Phi-2's or Falcon's real
// files carry) instead of "llama"; the tensor data stays where it was.
func gpt2Vocab(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("tokenizer.ggml.model")
	i := bytes.Index(data, key)
	// key, value type 8 (string), u64 length 5, "llama"
	val := i + len(key)
	if i < 0 || !bytes.Equal(data[val:val+4+8+5], append([]byte{8, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0}, "llama"...)) {
		t.Fatalf("%s: no tokenizer.ggml.model = llama", path)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	off := int(f.DataOffset)
	var out []byte
	out = append(out, data[:val]...)
	out = append(out, 8, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0)
	out = append(out, "gpt2"...)
	out = append(out, data[val+4+8+5:off]...)
	out = append(out, 0) // the header is one byte shorter: one more byte of padding
	out = append(out, data[off:]...)
	dst := filepath.Join(t.TempDir(), "gpt2vocab.gguf")
	if err := os.WriteFile(dst, out, 0o644); err != nil {
		t.Fatal(err)
	}
	if g, err := gguf.Open(dst); err != nil || g.DataOffset != f.DataOffset {
		t.Fatalf("patched GGUF: %v", err)
	}
	return dst
}

// TestRunGPT2VocabWithoutMerges: a GGUF that declares a byte-level BPE
// vocabulary (tokenizer.ggml.model "gpt2") but carries no merges is refused
// with the missing key and the file named, as llama.cpp refuses it.
// (Byte-level BPE vocabularies with merges are tested in internal/gguf and
// internal/bpe.)
func TestRunGPT2VocabWithoutMerges(t *testing.T) {
	path := gpt2Vocab(t, testmodels.Path(t, "arch", "phi2.gguf"))
	g := testmodels.Arch(t, "phi2")
	r := exe(t, "", "run", path, "--backend", "cpu", "--prompt-ids", idList(g.PromptIDs), "--max-tokens", "2")
	if r.code != 1 || !strings.Contains(r.stderr, "tokenizer.ggml.merges missing for a gpt2 vocabulary") || !strings.Contains(r.stderr, path) {
		t.Errorf("exit %d\n%s", r.code, r.stderr)
	}
}

// TestOutputErrorsEveryCommand: whichever command writes to a full stdout
// fails.
func TestOutputErrorsEveryCommand(t *testing.T) {
	task := storiesTask(t)
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	for _, args := range [][]string{
		{"inspect", task},
		{"devices"},
		{"bench", task, "--backend", "cpu", "--prompt-len", "4", "--generate", "2", "--reps", "1"},
		{"tokenize", "-t", task},
		{"embed", testmodels.Path(t, "embed", "gemma-embedding.gguf"), "--backend", "cpu", "-p", "x"},
		{"--version"},
	} {
		cmd := gpurunCmd(args...)
		var errOut bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader("Once upon a time\n"), full, &errOut
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(errOut.String(), "no space left on device") {
			t.Errorf("gpurun %v > /dev/full: %v\n%s", args, err, errOut.String())
		}
	}
}

// TestChatTemplateFile: chat with a Jinja template given on the command
// line: the template's <s> becomes the BOS id (the prompt is BOS plus the
// rest tokenized as text), /exit leaves with status 0.
func TestChatTemplateFile(t *testing.T) {
	task := storiesTask(t)
	tpl := filepath.Join(testmodels.Root(t), "pipeline", "chat", "testdata", "templates", "llama2.jinja")
	r := mustExe(t, "Hello\n/exit\n", "chat", task, "--chat-template", tpl, "--max-tokens", "5", "--temperature", "0", "--metrics")
	if !strings.Contains(r.stderr, "chat format: "+tpl) {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	ids := strings.Fields(mustExe(t, "[INST] Hello [/INST]\n", "tokenize", "-t", task).stdout)
	if want := fmt.Sprintf("prompt %d tokens", 1+len(ids)); !strings.Contains(r.stderr, want) {
		t.Errorf("want %q in\n%s", want, r.stderr)
	}
	if !strings.HasPrefix(r.stdout, "> ") || strings.Count(r.stdout, "> ") != 2 {
		t.Errorf("stdout %q", r.stdout)
	}
	// --chat-template-var gives the template further variables.
	varTpl := filepath.Join(t.TempDir(), "vars.jinja")
	if err := os.WriteFile(varTpl, []byte("{{ bos_token }}{{ prefix }} {% for m in messages %}{{ m.content }}{% endfor %}"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = mustExe(t, "Hello\n/exit\n", "chat", task, "--chat-template", varTpl, "--chat-template-var", "prefix=Once upon a time", "--max-tokens", "2", "--temperature", "0", "--metrics")
	varIDs := strings.Fields(mustExe(t, "Once upon a time Hello\n", "tokenize", "-t", task).stdout)
	if want := fmt.Sprintf("prompt %d tokens", 1+len(varIDs)); !strings.Contains(r.stderr, want) {
		t.Errorf("--chat-template-var: want %q in\n%s", want, r.stderr)
	}
	// A GGUF's own template (tokenizer.chat_template) is used by default.
	src, err := os.ReadFile(tpl)
	if err != nil {
		t.Fatal(err)
	}
	withTpl := testmodels.GGUFWithString(t, testmodels.Path(t, "arch", "llama.gguf"), "tokenizer.chat_template", string(src))
	r = mustExe(t, "Hello\n/exit\n", "chat", withTpl, "--max-tokens", "3", "--temperature", "0", "--metrics")
	if !strings.Contains(r.stderr, "chat format: the model's chat template") || !strings.Contains(r.stderr, fmt.Sprintf("prompt %d tokens", 1+len(ids))) {
		t.Errorf("chat on a GGUF with a template:\n%s", r.stderr)
	}
	// Converting keeps the template; so does bundling the model file again.
	tmp := t.TempDir()
	converted, bundled := filepath.Join(tmp, "llama.tflite"), filepath.Join(tmp, "llama.task")
	mustExe(t, "", "convert", withTpl, "-o", converted, "-q")
	mustExe(t, "", "bundle", converted, "-t", task, "-o", bundled)
	for _, m := range []string{converted, bundled} {
		r = mustExe(t, "Hello\n/exit\n", "chat", m, "--max-tokens", "3", "--temperature", "0", "--metrics")
		if !strings.Contains(r.stderr, "chat format: the model's chat template") {
			t.Errorf("chat on %s:\n%s", filepath.Base(m), r.stderr)
		}
	}
}

// llamaHF writes arch/llama.gguf as a Hugging Face directory the way HF's
// Llama conversion lays it out (HF tensor names, q/k rows permuted for HF's
// rotary layout, config.json), with tok512.model as tokenizer.model and a
// tokenizer_config.json carrying a chat template.
func llamaHF(t *testing.T, chatTemplate string) string {
	t.Helper()
	ck, err := gguf.Load(testmodels.Path(t, "arch", "llama.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	permute := func(data []byte, heads, rows int) []byte {
		// HF's permute: output row (h, j, i) is input row (h, i, j).
		rb, hd := len(data)/rows, rows/heads
		out := make([]byte, len(data))
		for h := range heads {
			for j := range 2 {
				for i := range hd / 2 {
					dst, src := h*hd+j*hd/2+i, h*hd+2*i+j
					copy(out[dst*rb:(dst+1)*rb], data[src*rb:(src+1)*rb])
				}
			}
		}
		return out
	}
	global := map[string]string{model.TokenEmbedding: "model.embed_tokens.weight", model.FinalNorm: "model.norm.weight", model.LMHead: "lm_head.weight"}
	layer := map[string]string{model.AttnNorm: "input_layernorm.weight", model.WQ: "self_attn.q_proj.weight", model.WK: "self_attn.k_proj.weight",
		model.WV: "self_attn.v_proj.weight", model.WO: "self_attn.o_proj.weight", model.FFNNorm: "post_attention_layernorm.weight",
		model.WGate: "mlp.gate_proj.weight", model.WUp: "mlp.up_proj.weight", model.WDown: "mlp.down_proj.weight"}
	var ts []*tensors.Tensor
	for _, rt := range ck.Tensors {
		name, data := global[rt.Name], rt.Data
		if name == "" {
			l, suffix, _ := strings.Cut(strings.TrimPrefix(rt.Name, "params.lm.transformer.x_layers_"), ".")
			if name = layer[suffix]; name == "" {
				t.Fatalf("no HF name for %s", rt.Name)
			}
			name = "model.layers." + l + "." + name
			switch suffix {
			case model.WQ:
				data = permute(data, ck.Config.Heads, rt.Shape[0])
			case model.WK:
				data = permute(data, ck.Config.KVHeads, rt.Shape[0])
			}
		}
		ts = append(ts, &tensors.Tensor{Name: name, DType: rt.DType, Shape: rt.Shape, Data: data})
	}
	dir := t.TempDir()
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
		"num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128, "rms_norm_eps": 1e-5,
		"rope_theta": 500000.0, "vocab_size": 512, "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "tie_word_embeddings": false})
	tokCfg, _ := json.Marshal(map[string]any{"add_bos_token": true, "chat_template": chatTemplate})
	spm, err := os.ReadFile(testmodels.Path(t, "tok512.model"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"model.safetensors": buf.Bytes(), "config.json": cfg, "tokenizer_config.json": tokCfg, "tokenizer.model": spm} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestRunHFDirectory: a Hugging Face directory runs as it is, reproducing
// llama.cpp's greedy ids for the GGUF it was made from, and chat uses its
// tokenizer_config.json chat template.
func TestRunHFDirectory(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(testmodels.Root(t), "pipeline", "chat", "testdata", "templates", "llama2.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	dir := llamaHF(t, string(src))
	g := testmodels.Arch(t, "llama")
	res, r := runJSONExe(t, "", dir, "--backend", "cpu", "--prompt-ids", idList(g.PromptIDs), "--temperature", "0", "--max-tokens", fmt.Sprint(len(g.GreedyIDs)))
	if fmt.Sprint(res.GeneratedIDs) != fmt.Sprint(g.GreedyIDs) {
		t.Errorf("greedy ids %v\nllama.cpp  %v", res.GeneratedIDs, g.GreedyIDs)
	}
	if !strings.Contains(r.stderr, "from hf on cpu") {
		t.Errorf("load line:\n%s", r.stderr)
	}
	r = mustExe(t, "Hello\n/exit\n", "chat", dir, "--max-tokens", "3", "--temperature", "0")
	if !strings.Contains(r.stderr, "chat format: the model's chat template") {
		t.Errorf("chat:\n%s", r.stderr)
	}
}
