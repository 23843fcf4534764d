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

// TestRunAudioQwen2A: `run --mmproj --audio` with a qwen2a (Whisper)
// audio projector, detected from the file, lays the prompt out as
// llama.cpp mtmd does (<|audio_bos|>, two 30 s chunks of 750 positions,
// <|audio_eos|>) and generates its greedy ids (testdata/audio/qwen2a) on
// the CPU backend.
func TestRunAudioQwen2A(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "audio", "qwen2a")
	var g struct {
		Prompt    string `json:"prompt"`
		GreedyIDs []int  `json:"greedy_ids"`
	}
	testmodels.DecodeJSON(t, filepath.Join(dir, "golden.json"), &g)
	out := mustRun(t, "", "run", filepath.Join(dir, "text-audio.gguf"), "--backend", "cpu", "--max-cache", "2048", "--temperature", "0",
		"--max-tokens", "16", "--json", "-p", g.Prompt,
		"--mmproj", filepath.Join(dir, "mmproj-qwen2a.gguf"), "--audio", filepath.Join(dir, "tones.wav"))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var res runResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.GeneratedIDs, g.GreedyIDs) {
		t.Errorf("ids\n got %v\nwant %v", res.GeneratedIDs, g.GreedyIDs)
	}
	p := res.PromptIDs
	if len(p) != 1518 || p[7] != 509 || p[8] != -1 || p[1507] != -1 || p[1508] != 510 {
		t.Errorf("prompt ids %v, want the audio's 1500 positions as -1 after 509 and before 510", p)
	}
}

// TestChatAudio: `chat --mmproj --audio` replies to its first message
// with the text run gives for the same plain-format conversation, and so
// does the message after /audio.
func TestChatAudio(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "audio", "qwen2a")
	text, wav := filepath.Join(dir, "text-audio.gguf"), filepath.Join(dir, "tones.wav")
	common := []string{"--backend", "cpu", "--max-cache", "2048", "--mmproj", filepath.Join(dir, "mmproj-qwen2a.gguf"), "--temperature", "0", "--max-tokens", "6"}
	want := mustRun(t, "", append([]string{"run", text, "-p", "User: Listen: <__media__> What is it?\nAssistant:", "--audio", wav, "--stop", "\nUser:"}, common...)...)
	want = strings.TrimLeft(strings.TrimSuffix(want, "\n"), " ")
	for _, tc := range []struct{ stdin, flag string }{
		{"Listen: <__media__> What is it?\n", "--audio"},
		{"/audio " + wav + "\nListen: <__media__> What is it?\n", ""},
	} {
		args := append([]string{"chat", text}, common...)
		if tc.flag != "" {
			args = append(args, tc.flag, wav)
		}
		out := mustRun(t, tc.stdin, args...)
		replies := strings.Split(out, "> ")
		if len(replies) < 3 || strings.TrimSuffix(replies[len(replies)-2], "\n") != want { // the reply before the last prompt
			t.Errorf("chat output %q, want a first reply %q", out, want)
		}
	}
}

// TestServeOpenAIAudio: the official openai npm client (testdata/openai)
// sends tones.wav as an input_audio part to `gpurun serve --mmproj` (the
// qwen2a set) and gets, whole and streamed, the text `gpurun run --mmproj
// --audio` generates from the same conversation in the plain chat format.
func TestServeOpenAIAudio(t *testing.T) {
	node, err := exec.LookPath("node")
	pkg, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "openai"))
	if err == nil {
		_, err = os.Stat(filepath.Join(pkg, "node_modules", "openai"))
	}
	if err != nil {
		ci.Missing(t, "node and the openai package of testdata/openai (bash .ci/setup installs them): %v", err)
	}
	dir, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "audio", "qwen2a"))
	text, wav := filepath.Join(dir, "text-audio.gguf"), filepath.Join(dir, "tones.wav")
	const before, after, maxTokens = "Listen: ", " What is it?", "8"
	common := []string{"--backend", "cpu", "--max-cache", "2048", "--mmproj", filepath.Join(dir, "mmproj-qwen2a.gguf")}
	want := mustExe(t, "", append([]string{"run", text, "-p", "User: " + before + "<__media__>" + after + "\nAssistant:", "--audio", wav,
		"--stop", "\nUser:", "--temperature", "0", "--max-tokens", maxTokens}, common...)...).stdout
	want = strings.TrimLeft(strings.TrimSuffix(want, "\n"), " ")
	if want == "" {
		t.Fatal("gpurun run generated nothing")
	}
	url := startServe(t, append([]string{text, "--name", "audio"}, common...)...)
	cmd := exec.Command(node, filepath.Join(pkg, "audio.mjs"), url+"/v1", "audio", wav, before, after, maxTokens)
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
