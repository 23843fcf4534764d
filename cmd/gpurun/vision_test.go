package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/ci"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestRunImage: `run --mmproj --image` with llama.cpp's raw prompt
// marker generates llama.cpp mtmd's greedy ids for the vision set, on
// the CPU, WebGPU and Vulkan backends; an
// image without --mmproj and a marker without an image are errors.
func TestRunImage(t *testing.T) {
	var g struct {
		GreedyIDs []int `json:"greedy_ids"`
	}
	testmodels.DecodeJSON(t, testmodels.Path(t, "vision", "golden.json"), &g)
	text := testmodels.Path(t, "vision", "text-gemma3.gguf")
	mmproj := testmodels.Path(t, "vision", "mmproj-gemma3.gguf")
	img := testmodels.Path(t, "vision", "image.png")
	args := []string{"run", text, "--backend", "cpu", "--max-cache", "128", "--temperature", "0", "--max-tokens", "16", "--json",
		"-p", "Look: <__media__> What is it?"}
	out := mustRun(t, "", append(args, "--mmproj", mmproj, "--image", img)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var res runResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.GeneratedIDs, g.GreedyIDs) {
		t.Errorf("ids\n got %v\nwant %v", res.GeneratedIDs, g.GreedyIDs)
	}
	if len(res.PromptIDs) != 33 || res.PromptIDs[6] != 510 || res.PromptIDs[7] != -1 || res.PromptIDs[22] != -1 || res.PromptIDs[23] != 511 {
		t.Errorf("prompt ids %v, want the image's 16 positions as -1 between 510 and 511", res.PromptIDs)
	}
	// The GPU backends run the encoder and the image's step too.
	for _, backend := range []string{"webgpu", "vulkan"} {
		t.Run(backend, func(t *testing.T) {
			requireBackend(t, backend)
			gargs := slices.Clone(args)
			gargs[slices.Index(gargs, "cpu")] = backend
			var res runResult
			lines := strings.Split(strings.TrimSpace(mustRun(t, "", append(gargs, "--mmproj", mmproj, "--image", img)...)), "\n")
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.GeneratedIDs, g.GreedyIDs) {
				t.Errorf("ids\n got %v\nwant %v", res.GeneratedIDs, g.GreedyIDs)
			}
		})
	}
	if _, _, err := runCLI(t, "", append(args, "--image", img)...); err == nil || !strings.Contains(err.Error(), "--mmproj") {
		t.Errorf("an image without --mmproj: err %v", err)
	}
	if _, _, err := runCLI(t, "", append(args, "--mmproj", mmproj)...); err != nil {
		t.Errorf("a marker without an image is plain text: err %v", err)
	}
	if _, _, err := runCLI(t, "", append(args, "--mmproj", mmproj, "--image", img, "--image", img)...); err == nil || !strings.Contains(err.Error(), "markers for 2 images") {
		t.Errorf("two images, one marker: err %v", err)
	}
}

// TestServeOpenAIImage: the official openai npm client (testdata/openai)
// sends image.png as an image_url part to `gpurun serve --mmproj` and gets,
// whole and streamed, the text `gpurun run --mmproj --image` generates
// from the same conversation in the plain chat format.
func TestServeOpenAIImage(t *testing.T) {
	node, err := exec.LookPath("node")
	pkg, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "openai"))
	if err == nil {
		_, err = os.Stat(filepath.Join(pkg, "node_modules", "openai"))
	}
	if err != nil {
		ci.Missing(t, "node and the openai package of testdata/openai (bash .ci/setup installs them): %v", err)
	}
	text := testmodels.Path(t, "vision", "text-gemma3.gguf")
	mmproj := testmodels.Path(t, "vision", "mmproj-gemma3.gguf")
	img := testmodels.Path(t, "vision", "image.png")
	const before, after, maxTokens = "Look: ", " What is it?", "12"
	common := []string{"--backend", "cpu", "--max-cache", "128", "--mmproj", mmproj}
	want := mustExe(t, "", append([]string{"run", text, "-p", "User: " + before + "<__media__>" + after + "\nAssistant:", "--image", img,
		"--stop", "\nUser:", "--temperature", "0", "--max-tokens", maxTokens}, common...)...).stdout
	want = strings.TrimLeft(strings.TrimSuffix(want, "\n"), " ")
	if want == "" {
		t.Fatal("gpurun run generated nothing")
	}
	url := startServe(t, append([]string{text, "--name", "vision"}, common...)...)
	cmd := exec.Command(node, filepath.Join(pkg, "image.mjs"), url+"/v1", "vision", img, before, after, maxTokens)
	cmd.Dir = pkg
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node client: %v\n%s", err, stderr)
	}
	var got struct {
		Text, Streamed, Finish string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	if got.Text != want || got.Streamed != want {
		t.Errorf("chat completion %q, streamed %q\nwant (gpurun run) %q", got.Text, got.Streamed, want)
	} else {
		t.Logf("reply %q (%s)", got.Text, got.Finish)
	}
}

// TestChatImage: `chat --mmproj --image` replies to its first message
// with the text run gives for the same plain-format conversation, and
// /image adds an image to the next message.
func TestChatImage(t *testing.T) {
	text := testmodels.Path(t, "vision", "text-gemma3.gguf")
	mmproj := testmodels.Path(t, "vision", "mmproj-gemma3.gguf")
	img := testmodels.Path(t, "vision", "image.png")
	common := []string{"--backend", "cpu", "--max-cache", "128", "--mmproj", mmproj, "--temperature", "0", "--max-tokens", "12"}
	want := mustRun(t, "", append([]string{"run", text, "-p", "User: Look: <__media__> What is it?\nAssistant:", "--image", img, "--stop", "\nUser:"}, common...)...)
	want = strings.TrimLeft(strings.TrimSuffix(want, "\n"), " ")
	out := mustRun(t, "Look: <__media__> What is it?\n/image "+img+"\nAgain?\n", append([]string{"chat", text, "--image", img}, common...)...)
	replies := strings.Split(out, "> ")
	if len(replies) < 4 || strings.TrimSuffix(replies[1], "\n") != want {
		t.Fatalf("chat output %q, want a first reply %q", out, want)
	}
	if strings.TrimSpace(replies[3]) == "" {
		t.Errorf("no reply to the message with the /image: %q", out)
	}
}
