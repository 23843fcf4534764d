//go:build !js

package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gpurun/gpurun/internal/audio"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/browser"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/chat"
)

// audioDir is the tiny qwen2a set: an lfm2 text model with Qwen2-Audio's
// markers, a qwen2a (Whisper) mmproj, tones.wav and llama.cpp's (mtmd's)
// greedy ids for a prompt with it.
var audioDir = filepath.Join("..", "..", "testdata", "audio", "qwen2a")

// audioCache is the KV cache of the audio loads: the prompt's 1518
// positions (1500 of them the audio's two 30 s chunks) and the replies.
const audioCache = 2048

// audioFiles is what the page's test server offers for checkPageAudio.
func audioFiles() map[string]string {
	return map[string]string{
		"text-audio.gguf":    filepath.Join(audioDir, "text-audio.gguf"),
		"mmproj-qwen2a.gguf": filepath.Join(audioDir, "mmproj-qwen2a.gguf"),
	}
}

// longWAVJS is a JS expression of a WAV file one second over what a
// prompt takes (16 chunks of 30 s): 481 s of silence at 1 kHz, built in
// the page so the DevTools message stays small.
const longWAVJS = `(() => {
  const n = 481000, b = new Uint8Array(44 + 2*n), v = new DataView(b.buffer);
  const tag = (o, s) => { for (let i = 0; i < 4; i++) b[o+i] = s.charCodeAt(i); };
  tag(0, "RIFF"); v.setUint32(4, 36 + 2*n, true); tag(8, "WAVE");
  tag(12, "fmt "); v.setUint32(16, 16, true); v.setUint16(20, 1, true); v.setUint16(22, 1, true);
  v.setUint32(24, 1000, true); v.setUint32(28, 2000, true); v.setUint16(32, 2, true); v.setUint16(34, 16, true);
  tag(36, "data"); v.setUint32(40, 2*n, true);
  return b;
})()`

// checkPageAudio runs the tiny qwen2a set in the page the tab has open
// (TestBrowserImage's, on the CPU fallback): audio for its vision
// projector is refused; the text model and the audio projector load from
// the test server; audio before the projector, an image for the audio
// projector, a file that is not WAV and audio over
// the prompt's limit are clear errors; gpurun.generate with tones.wav
// gives llama.cpp's greedy ids for the raw prompt (what `gpurun run
// --audio` gives: cmd/gpurun TestRunAudioQwen2A) and the native run's
// text; and a WAV file picked in the chat view's Audio input goes with
// the next message, whose reply has the ids and text of the same
// conversation run natively.
func checkPageAudio(t *testing.T, tab *browser.Tab) {
	var g struct {
		Prompt    string `json:"prompt"`
		GreedyIDs []int  `json:"greedy_ids"`
	}
	testmodels.DecodeJSON(t, filepath.Join(audioDir, "golden.json"), &g)
	files := audioFiles()
	text, mmproj := files["text-audio.gguf"], files["mmproj-qwen2a.gguf"]
	wavPath, _ := filepath.Abs(filepath.Join(audioDir, "tones.wav"))
	wav, err := os.ReadFile(wavPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(g.Prompt, pipeline.MediaMarker) {
		t.Fatalf("golden prompt %q without %s", g.Prompt, pipeline.MediaMarker)
	}
	wavJS := fmt.Sprintf("[Uint8Array.from(atob(%q), (c) => c.charCodeAt(0))]", base64.StdEncoding.EncodeToString(wav))
	refused := func(what, opts, want string) {
		t.Helper()
		msg, err := eval[string](tab, fmt.Sprintf(`gpurun.generate(%q, {maxTokens: 2, %s}).then(() => "generated", (e) => String(e))`, g.Prompt, opts))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(msg, want) {
			t.Errorf("%s: %q, want %q in it", what, msg, want)
		}
	}
	// The page still has TestBrowserImage's model and vision projector.
	refused("audio for a vision projector", "audio: "+wavJS, "audio files for a model with a vision projector")
	if _, err := eval[chromedp.Void](tab, fmt.Sprintf("gpurunPage.loadServed(%q, 'cpu', %d).then(() => null)", "text-audio.gguf", audioCache)); err != nil {
		t.Fatal(err)
	}
	refused("audio before the projector", "audio: "+wavJS, "for a text-only model")
	type projInfo struct {
		Projector   string `json:"projector"`
		ImageTokens int    `json:"imageTokens"`
		Audio       bool   `json:"audio"`
	}
	info, err := eval[projInfo](tab, `gpurunPage.loadServedMMProj("mmproj-qwen2a.gguf")`)
	if err != nil {
		t.Fatalf("loadMMProj: %v", err)
	}
	if info != (projInfo{Projector: "qwen2a", Audio: true}) {
		t.Errorf("projector %+v, want qwen2a taking audio", info)
	}
	inputs, err := eval[[]bool](tab, `[document.getElementById("chataudio").disabled, document.getElementById("chatimage").disabled]`)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(inputs, []bool{false, true}) {
		t.Errorf("chat view's Audio and Image inputs disabled: %v, want [false true] with an audio projector", inputs)
	}
	if n, err := eval[int](tab, "gpurun.maxAudioBytes"); err != nil || n != maxAudioBytes {
		t.Errorf("gpurun.maxAudioBytes %d (%v), want %d", n, err, maxAudioBytes)
	}
	refused("an image for the audio projector", "images: "+wavJS, "images for a model with an audio projector")
	refused("a file that is not WAV", `audio: [new TextEncoder().encode("ID3 not a WAV file at all")]`, "not a RIFF WAVE file")
	refused("481 s of audio", "audio: ["+longWAVJS+"]", "17 chunks of 30 s (at most 16")

	r, err := eval[genResult](tab, fmt.Sprintf(`gpurunPage.generate(%q, {maxTokens: %d, audio: %s})`, g.Prompt, len(g.GreedyIDs), wavJS))
	if err != nil {
		t.Fatalf("generate with the audio: %v", err)
	}
	out, err := eval[string](tab, `document.getElementById("out").textContent`)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs, wantText := nativeAudio(t, text, mmproj, func(m *pipeline.Model, _ string) (pipeline.Prompt, pipeline.GenerateOptions) {
		return pipeline.Prompt{Text: g.Prompt, Audio: [][]byte{wav}}, pipeline.GenerateOptions{MaxTokens: len(g.GreedyIDs)}
	})
	if !slices.Equal(r.IDs, g.GreedyIDs) {
		t.Errorf("the page's ids with the audio\n got %v\nwant %v (llama.cpp's)", r.IDs, g.GreedyIDs)
	}
	if got := strings.TrimPrefix(out, g.Prompt); got != wantText || !slices.Equal(wantIDs, g.GreedyIDs) {
		t.Errorf("the page's text with the audio %q, native %q (ids %v)", got, wantText, wantIDs)
	}
	t.Logf("raw prompt with the audio: %d ids as llama.cpp's, first token %.0f ms after the call", len(r.IDs), r.FirstTokenMs)

	// The chat view: the WAV file picked in its Audio input, then the message.
	const question = "What is it?"
	cctx := tab.Context()
	if _, err := eval[chromedp.Void](tab, "gpurunPage.lastChat = undefined"); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(cctx, chromedp.SetValue(chromedp.ID("chattemp"), "0"), chromedp.SetValue(chromedp.ID("chatmax"), "8"),
		chromedp.SetUploadFiles(chromedp.ID("chataudio"), []string{wavPath}),
		chromedp.SendKeys(chromedp.ID("msg"), question+"\r")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(cctx, chromedp.Poll[chromedp.Void]("gpurunPage.lastChat !== undefined && !document.getElementById('send').disabled", chromedp.WithPollingTimeout(2*time.Minute))); err != nil {
		t.Fatalf("waiting for the reply: %v (status %q)", err, pageStatus(tab))
	}
	type chatResult struct {
		IDs   []int  `json:"ids"`
		Reply string `json:"reply"`
	}
	got, err := eval[chatResult](tab, "gpurunPage.lastChat")
	if err != nil {
		t.Fatal(err)
	}
	players, err := eval[int](tab, `document.querySelectorAll("#chatlog .msg.user audio").length`)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []chat.Message{{Role: chat.User, Content: pipeline.MediaMarker + "\n" + question, Images: [][]byte{wav}}}
	wantIDs, wantText = nativeAudio(t, text, mmproj, func(m *pipeline.Model, source string) (pipeline.Prompt, pipeline.GenerateOptions) {
		tpl, err := chatTemplate(m, source)
		if err != nil {
			t.Fatal(err)
		}
		opts := pipeline.GenerateOptions{MaxTokens: 8}
		p, err := chatPrompt(m, tpl, msgs, &opts)
		if err != nil {
			t.Fatal(err)
		}
		return audioPrompt(p), opts
	})
	if !slices.Equal(got.IDs, wantIDs) || got.Reply != wantText {
		t.Errorf("chat view with the audio: %v %q, native %v %q", got.IDs, got.Reply, wantIDs, wantText)
	}
	if players != 1 {
		t.Errorf("the user's message shows %d audio players, want 1", players)
	}
	t.Logf("chat reply with the audio: %q", got.Reply)
}

// pageStatus is the page's status line (where it shows errors).
func pageStatus(tab *browser.Tab) string {
	s, _ := eval[string](tab, `document.getElementById("status").textContent`)
	return s
}

// nativeAudio runs a prompt natively through the page's loader, with the
// audio projector attached as the page attaches it (attachMMProj), on the
// CPU backend: its ids and text. prompt builds the prompt and options
// from the model and its template's source.
func nativeAudio(t *testing.T, text, mmproj string, prompt func(m *pipeline.Model, source string) (pipeline.Prompt, pipeline.GenerateOptions)) ([]int, string) {
	t.Helper()
	data, err := os.ReadFile(text)
	if err != nil {
		t.Fatal(err)
	}
	proj, err := os.ReadFile(mmproj)
	if err != nil {
		t.Fatal(err)
	}
	b := cpu.New(cpu.Options{})
	defer b.Close()
	m, source, err := loadModel(context.Background(), data, nil, pipeline.Options{Backend: b, MaxCache: audioCache})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if p, err := attachMMProj(m, proj); err != nil || !p.Audio {
		t.Fatalf("attachMMProj: %+v, %v; want an audio projector", p, err)
	}
	p, g := prompt(m, source)
	var ids []int
	var out strings.Builder
	for tk, err := range m.NewSession().Generate(context.Background(), p, g) {
		if err != nil {
			t.Fatal(err)
		}
		if tk.ID >= 0 {
			ids = append(ids, tk.ID)
		}
		out.WriteString(tk.Piece)
	}
	return ids, out.String()
}

// TestCheckMediaSize: a WAV file over maxAudioBytes is refused before the
// page copies it into wasm memory (ErrAudio, its size named); one at the
// limit, and images, pass on to the decoders' own checks.
func TestCheckMediaSize(t *testing.T) {
	err := checkMediaSize("audio", 1, maxAudioBytes+1)
	if !errors.Is(err, audio.ErrAudio) || !strings.Contains(err.Error(), "audio 1: a file of 268435457 bytes, over the 256 MiB") {
		t.Errorf("audio over the limit: %v", err)
	}
	for _, kind := range []string{"audio", "image"} {
		if err := checkMediaSize(kind, 0, maxAudioBytes); err != nil {
			t.Errorf("%s at the limit: %v", kind, err)
		}
	}
	if err := checkMediaSize("image", 0, maxAudioBytes+1); err != nil {
		t.Errorf("an image: %v", err)
	}
}
