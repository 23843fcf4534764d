package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestStopStringIDs: a run cut by a stop string reports exactly the prompt
// as prompt_ids and every generated token (the one that completed the stop
// string too) as generated_ids, as many as generated_tokens, and the text
// up to the stop string; all three agree with llama.cpp's golden run.
func TestStopStringIDs(t *testing.T) {
	task := storiesTask(t)
	c := testmodels.StoriesCases(t)[0]
	const stop = "girl"
	cut := strings.Index(c.GeneratedText, stop)
	if cut < 0 {
		t.Fatalf("the golden text has no %q", stop)
	}
	// The golden pieces show which token completes the stop string.
	n, text := 0, ""
	for _, p := range c.GeneratedPieces {
		n++
		text += strings.ReplaceAll(p, "\u2581", " ")
		if len(text) >= cut+len(stop) {
			break
		}
	}
	res, _ := runJSONExe(t, "", task, "-p", c.Prompt, "--temperature", "0", "--max-tokens", "40", "--stop", stop)
	if fmt.Sprint(res.PromptIDs) != fmt.Sprint(c.PromptIDs) {
		t.Errorf("prompt_ids %v, want the prompt %v", res.PromptIDs, c.PromptIDs)
	}
	if fmt.Sprint(res.GeneratedIDs) != fmt.Sprint(c.GeneratedIDs[:n]) {
		t.Errorf("generated_ids %v, want %v", res.GeneratedIDs, c.GeneratedIDs[:n])
	}
	if res.Metrics.GeneratedTokens != len(res.GeneratedIDs) || res.Metrics.StopReason != "stop_string" {
		t.Errorf("generated_tokens %d for %d generated_ids, stop %q", res.Metrics.GeneratedTokens, len(res.GeneratedIDs), res.Metrics.StopReason)
	}
	if res.Text != c.GeneratedText[:cut] {
		t.Errorf("text %q, want %q", res.Text, c.GeneratedText[:cut])
	}
}

// TestInterruptBeforeFirstToken: Ctrl-C after the load but before the
// first token still prints the result with the real prompt ids, no
// generated ids, and says that no token was generated instead of
// reporting zero rates.
func TestInterruptBeforeFirstToken(t *testing.T) {
	task := storiesTask(t)
	c := testmodels.StoriesCases(t)[0]
	cmd := gpurunCmd("run", task, "-p", c.Prompt, "--json", "--temperature", "0")
	cmd.Env = append(cmd.Env, "GPURUN_TEST_START_DELAY=20s")
	res, stderr, code := interruptAfterLoad(t, cmd)
	if code != 130 {
		t.Errorf("exit %d, want 130", code)
	}
	if fmt.Sprint(res.PromptIDs) != fmt.Sprint(c.PromptIDs) || len(res.GeneratedIDs) != 0 || res.Metrics.PromptTokens != len(c.PromptIDs) {
		t.Errorf("prompt_ids %v (prompt_tokens %d) generated %v, want the prompt %v and nothing", res.PromptIDs, res.Metrics.PromptTokens, res.GeneratedIDs, c.PromptIDs)
	}
	if res.Metrics.StopReason != "cancelled" || res.Metrics.TimeToFirstTokenMS != 0 {
		t.Errorf("metrics %+v", res.Metrics)
	}
	if !strings.Contains(stderr, "no token generated") || strings.Contains(stderr, "time to first token") || strings.Contains(stderr, "0.0 tok/s") {
		t.Errorf("stderr:\n%s", stderr)
	}
}

// interruptAfterLoad starts cmd, sends SIGINT once its stderr says the
// model was loaded, and returns the JSON result on the last line of
// stdout, stderr and the exit status.
func interruptAfterLoad(t *testing.T, cmd *exec.Cmd) (runResult, string, int) {
	t.Helper()
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	br := bufio.NewReader(errPipe)
	for !strings.Contains(stderr.String(), "loaded ") {
		line, err := br.ReadString('\n')
		stderr.WriteString(line)
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("no load line: %v\n%s", err, stderr.String())
		}
	}
	time.Sleep(100 * time.Millisecond)
	cmd.Process.Signal(os.Interrupt)
	rest, _ := io.ReadAll(br)
	stderr.Write(rest)
	code := 0
	if err := cmd.Wait(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	var res runResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("no JSON result after the interrupt: %v\nstdout %q\nstderr %s", err, out.String(), stderr.String())
	}
	return res, stderr.String(), code
}

// TestLlama2cStopsAtBOS: llama2.c's run.c ends a generation when it samples
// BOS (id 1), its story separator; so does a llama2.c model here, read
// directly or converted, instead of running into a second story. Greedy
// from the golden prompt reaches BOS before the 512-token cache is full.
func TestLlama2cStopsAtBOS(t *testing.T) {
	dir := testmodels.Dir(t)
	c := testmodels.StoriesCases(t)[0]
	for _, args := range [][]string{
		{filepath.Join(dir, "stories260K.bin"), "--tokenizer", filepath.Join(dir, "tok512.bin")},
		{storiesTask(t)},
	} {
		res, _ := runJSONExe(t, "", append(args, "--backend", "cpu", "-p", c.Prompt, "--temperature", "0", "--max-tokens", "-1")...)
		if res.Metrics.StopReason != "stop_token" || slices.Contains(res.GeneratedIDs, 1) {
			t.Errorf("%s: stop %q after %d tokens, BOS generated: %v", args[0], res.Metrics.StopReason, len(res.GeneratedIDs), slices.Contains(res.GeneratedIDs, 1))
		}
		if len(res.GeneratedIDs) < len(c.GeneratedIDs) || fmt.Sprint(res.GeneratedIDs[:len(c.GeneratedIDs)]) != fmt.Sprint(c.GeneratedIDs) {
			t.Errorf("%s: generated %v, golden starts %v", args[0], res.GeneratedIDs, c.GeneratedIDs)
		}
	}
}
