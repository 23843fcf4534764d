package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpurun/gpurun/internal/hub/hubtest"
)

// fakeHub serves testdata's llama GGUFs as org/llama-GGUF on a loopback
// hub wanting a token, and points gpurun at it (HF_ENDPOINT, HF_TOKEN, an
// empty HF_HUB_CACHE).
func fakeHub(t *testing.T) (*hubtest.Hub, string) {
	t.Helper()
	h := hubtest.New(t)
	for _, name := range []string{"llama-Q4_K_M.gguf", "llama-Q5_K_M.gguf"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "gguf", name))
		if err != nil {
			t.Fatal(err)
		}
		h.Add("org/llama-GGUF", name, b)
	}
	whole, err := os.ReadFile(filepath.Join("..", "..", "testdata", "gguf", "llama-Q4_K_M.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	h.Add("org/llama-GGUF", "split/llama-Q8_0-00001-of-00002.gguf", whole[:1000])
	h.Add("org/llama-GGUF", "split/llama-Q8_0-00002-of-00002.gguf", whole[1000:])
	h.SetFaults(hubtest.Faults{Token: "hf_test", Cut: 1, CutAfter: 30000})
	cache := t.TempDir()
	t.Setenv("HF_ENDPOINT", h.URL)
	t.Setenv("HF_TOKEN", "hf_test")
	t.Setenv("HF_HUB_CACHE", cache)
	t.Setenv("HF_HUB_OFFLINE", "")
	return h, cache
}

// TestRunFromHub: `gpurun run hf.co/ORG/REPO` pulls the file (through a cut
// connection, resumed) and generates exactly what running the file does.
func TestRunFromHub(t *testing.T) {
	_, cache := fakeHub(t)
	args := []string{"-p", "Once upon a time", "--backend", "cpu", "--temperature", "0", "--max-tokens", "24"}
	want := mustRun(t, "", append([]string{"run", filepath.Join("..", "..", "testdata", "gguf", "llama-Q4_K_M.gguf")}, args...)...)
	out, errOut, err := runCLI(t, "", append([]string{"run", "hf.co/org/llama-GGUF"}, args...)...)
	if err != nil {
		t.Fatalf("run hf.co/org/llama-GGUF: %v\n%s", err, errOut)
	}
	if out != want || strings.TrimSpace(want) == "" {
		t.Errorf("from the hub: %q\nfrom the file: %q", out, want)
	}
	if !strings.Contains(errOut, "pull: llama-Q4_K_M.gguf:") || !strings.Contains(errOut, "resuming at byte 30000") {
		t.Errorf("stderr shows no progress or resume:\n%s", errOut)
	}
	snap := filepath.Join(cache, "models--org--llama-GGUF", "snapshots")
	if ents, err := os.ReadDir(snap); err != nil || len(ents) != 1 {
		t.Errorf("snapshots: %v, %v", ents, err)
	}
}

// TestPullCommand: pull prints the file's path; --offline finds it with
// the hub gone; a quant the repository lacks is an error listing those it
// has; a bad reference says what is wrong.
func TestPullCommand(t *testing.T) {
	h, cache := fakeHub(t)
	out, errOut, err := runCLI(t, "", "pull", "hf.co/org/llama-GGUF:q5_k_m")
	if err != nil {
		t.Fatalf("pull: %v\n%s", err, errOut)
	}
	path := strings.TrimSpace(out)
	want := filepath.Join(cache, "models--org--llama-GGUF", "snapshots", h.Commit, "llama-Q5_K_M.gguf")
	if path != want {
		t.Errorf("pull printed %q, want %q", path, want)
	}
	if !strings.Contains(errOut, "(100%)") {
		t.Errorf("stderr has no final progress line:\n%s", errOut)
	}
	// A split GGUF: pull fetches every part; run says it cannot load one.
	out, errOut, err = runCLI(t, "", "pull", "hf.co/org/llama-GGUF:Q8_0")
	if err != nil || !strings.HasSuffix(strings.TrimSpace(out), "llama-Q8_0-00001-of-00002.gguf") {
		t.Errorf("pull a split GGUF: %q, %v\n%s", out, err, errOut)
	}
	if _, _, err := runCLI(t, "", "run", "hf.co/org/llama-GGUF:Q8_0", "-p", "hi"); err == nil || !strings.Contains(err.Error(), "split in 2 parts") {
		t.Errorf("run a split GGUF: %v", err)
	}
	h.Close()
	if out, _, err := runCLI(t, "", "pull", "--offline", "hf.co/org/llama-GGUF:Q5_K_M"); err != nil || strings.TrimSpace(out) != want {
		t.Errorf("pull --offline: %q, %v", out, err)
	}
	t.Setenv("HF_HUB_OFFLINE", "1")
	for _, c := range []struct{ args, want string }{
		{"pull hf.co/org/llama-GGUF:Q2_K", "Q5_K_M"},
		{"pull hf.co/org/other", "not in the cache"},
		{"pull hf.co/org", "want ORG/REPO"},
		{"pull model.gguf", "not a hub reference"},
		{"run hf.co/org/llama-GGUF:Q2_K -p hi", "pulling the model"},
	} {
		_, _, err := runCLI(t, "", strings.Fields(c.args)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("gpurun %s: %v, want an error with %q", c.args, err, c.want)
		}
	}
}

// TestPullInterrupt: Ctrl-C during a download ends gpurun with status 130
// at once, leaving only the .incomplete file, which the next pull resumes.
func TestPullInterrupt(t *testing.T) {
	h, cache := fakeHub(t)
	h.SetFaults(hubtest.Faults{Token: "hf_test", Stall: 1, StallAfter: 40000})
	cmd := gpurunCmd("pull", "hf.co/org/llama-GGUF")
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	blobs := filepath.Join(cache, "models--org--llama-GGUF", "blobs")
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, _ := filepath.Glob(filepath.Join(blobs, "*.incomplete"))
		if len(m) == 1 {
			if st, err := os.Stat(m[0]); err == nil && st.Size() == 40000 {
				break
			}
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("no partial download of 40000 bytes after 30s; stderr:\n%s", errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Errorf("exit %v, want 130; stderr:\n%s", err, errOut.String())
	}
	if !strings.HasSuffix(errOut.String(), "context canceled\n") {
		t.Errorf("stderr does not end with the interrupt:\n%s", errOut.String())
	}
	ents, _ := os.ReadDir(blobs)
	if len(ents) != 1 || !strings.HasSuffix(ents[0].Name(), ".incomplete") {
		t.Errorf("blobs after the interrupt: %v, want the one .incomplete file", ents)
	}
	if _, err := os.Stat(filepath.Join(cache, "models--org--llama-GGUF", "snapshots")); !os.IsNotExist(err) {
		t.Errorf("a snapshot after the interrupt: %v", err)
	}
	_, errOut2, err := runCLI(t, "", "pull", "hf.co/org/llama-GGUF")
	if err != nil || !strings.Contains(errOut2, "resuming at byte 40000") {
		t.Errorf("pull after the interrupt: %v\n%s", err, errOut2)
	}
}

// TestServeAndBenchFromHub: serve and bench take a hub reference too;
// serve's completion equals run's on the file.
func TestServeAndBenchFromHub(t *testing.T) {
	fakeHub(t)
	file := filepath.Join("..", "..", "testdata", "gguf", "llama-Q4_K_M.gguf")
	want := mustRun(t, "", "run", file, "-p", "Once upon a time", "--backend", "cpu", "--temperature", "0", "--max-tokens", "12")
	base := startServe(t, "hf.co/org/llama-GGUF:Q4_K_M", "--backend", "cpu")
	resp, err := http.Post(base+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"llama-Q4_K_M","prompt":"Once upon a time","max_tokens":12,"temperature":0}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 || len(got.Choices) != 1 {
		t.Fatalf("completion: %d, %+v, %v", resp.StatusCode, got, err)
	}
	if got.Choices[0].Text != strings.TrimSuffix(want, "\n") {
		t.Errorf("served %q, run gives %q", got.Choices[0].Text, want)
	}
	out := mustRun(t, "", "bench", "hf.co/org/llama-GGUF", "--backend", "cpu", "--prompt-len", "4", "--generate", "2", "--reps", "1", "--warmup", "0", "--cold-load=false")
	if !strings.Contains(out, "llama-Q4_K_M") {
		t.Errorf("bench output does not name the pulled model:\n%s", out)
	}
}
