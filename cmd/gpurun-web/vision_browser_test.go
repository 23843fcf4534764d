//go:build !js

package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/browser"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/chat"
)

// visionCache is the KV cache of the image test's loads: the prompt's 33
// positions (16 of them the image's) and the greedy tokens.
const visionCache = 128

// TestBrowserImage runs the tiny vision set (a gemma3 text model and its
// gemma3 mmproj, ../shared/models/vision) in the page on the CPU fallback
// of a tab without navigator.gpu (the encoder is the same fusion graph on
// WebGPU, which the native tests hold to llama.cpp): the model and the
// projector load from the test server, gpurun.generate with the image
// gives llama.cpp's (`llama-mtmd-cli`'s, and `gpurun run --image`'s)
// greedy ids for the raw prompt with the media marker, and an image
// picked in the chat view's file input goes with the next message, whose
// reply has the ids and text of the same conversation run natively. Its
// audio subtest (checkPageAudio) does the same with WAV audio and the
// tiny qwen2a set in the same page.
func TestBrowserImage(t *testing.T) {
	chromiumPath := chromium(t)
	var g struct {
		GreedyIDs []int `json:"greedy_ids"`
	}
	testmodels.DecodeJSON(t, testmodels.Path(t, "vision", "golden.json"), &g)
	text := testmodels.Path(t, "vision", "text-gemma3.gguf")
	mmproj := testmodels.Path(t, "vision", "mmproj-gemma3.gguf")
	imgPath := testmodels.Path(t, "vision", "image.png")
	img, err := os.ReadFile(imgPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	files := map[string]string{"text-gemma3.gguf": text, "mmproj-gemma3.gguf": mmproj}
	maps.Copy(files, audioFiles()) // the audio part shares the page
	srv, err := browser.Serve(ctx, files)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	br, err := browser.Start(ctx, chromiumPath)
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	tab, err := br.NewTab(true)
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	defer func() {
		if t.Failed() {
			t.Logf("page console:\n%s", strings.Join(tab.Console(), "\n"))
		}
	}()
	if err := tab.Open(srv.URL); err != nil {
		t.Fatal(err)
	}
	type projInfo struct {
		Projector   string `json:"projector"`
		ImageTokens int    `json:"imageTokens"`
	}
	// An image before the projector is a clear error, not a crash.
	if _, err := eval[chromedp.Void](tab, fmt.Sprintf("gpurunPage.loadServed(%q, 'cpu', %d).then(() => null)", "text-gemma3.gguf", visionCache)); err != nil {
		t.Fatal(err)
	}
	imgJS := fmt.Sprintf("[Uint8Array.from(atob(%q), (c) => c.charCodeAt(0))]", base64.StdEncoding.EncodeToString(img))
	msg, err := eval[string](tab, fmt.Sprintf(`gpurun.generate("Look: %s", {maxTokens: 2, images: %s}).then(() => "generated", (e) => String(e))`, pipeline.MediaMarker, imgJS))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, "text-only") {
		t.Errorf("an image without a projector: %q, want the text-only model named", msg)
	}
	info, err := eval[projInfo](tab, `gpurunPage.loadServedMMProj("mmproj-gemma3.gguf")`)
	if err != nil {
		t.Fatalf("loadMMProj: %v", err)
	}
	if info.Projector != "gemma3" || info.ImageTokens != 16 {
		t.Errorf("projector %+v, want gemma3 with 16 image tokens", info)
	}
	r, err := eval[genResult](tab, fmt.Sprintf(`gpurunPage.generate("Look: %s What is it?", {maxTokens: %d, images: %s})`, pipeline.MediaMarker, len(g.GreedyIDs), imgJS))
	if err != nil {
		t.Fatalf("generate with the image: %v", err)
	}
	if !slices.Equal(r.IDs, g.GreedyIDs) {
		t.Errorf("the page's ids with the image\n got %v\nwant %v (llama.cpp's)", r.IDs, g.GreedyIDs)
	}
	t.Logf("raw prompt with the image: %d ids as llama.cpp's, first token %.0f ms after the call", len(r.IDs), r.FirstTokenMs)

	// The chat view: the image picked in its file input, then the message.
	const question = "What is it?"
	cctx := tab.Context()
	if err := chromedp.Do(cctx, chromedp.SetValue(chromedp.ID("chattemp"), "0"), chromedp.SetValue(chromedp.ID("chatmax"), "12"),
		chromedp.SetUploadFiles(chromedp.ID("chatimage"), []string{imgPath}),
		chromedp.SendKeys(chromedp.ID("msg"), question+"\r")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(cctx, chromedp.Poll[chromedp.Void]("gpurunPage.lastChat !== undefined && !document.getElementById('send').disabled", chromedp.WithPollingTimeout(2*time.Minute))); err != nil {
		t.Fatalf("waiting for the reply: %v", err)
	}
	type chatResult struct {
		IDs   []int  `json:"ids"`
		Reply string `json:"reply"`
	}
	got, err := eval[chatResult](tab, "gpurunPage.lastChat")
	if err != nil {
		t.Fatal(err)
	}
	images, err := eval[int](tab, `document.querySelectorAll("#chatlog .msg.user img").length`)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []chat.Message{{Role: chat.User, Content: pipeline.MediaMarker + "\n" + question, Images: [][]byte{img}}}
	wantIDs, wantText := nativeVisionChat(t, text, mmproj, msgs, 12)
	if !slices.Equal(got.IDs, wantIDs) || got.Reply != wantText {
		t.Errorf("chat view with the image: %v %q, native %v %q", got.IDs, got.Reply, wantIDs, wantText)
	}
	if images != 1 {
		t.Errorf("the user's message shows %d images, want 1", images)
	}
	t.Logf("chat reply with the image: %q", got.Reply)

	// Audio on the same page (one page load for both): the qwen2a set.
	t.Run("audio", func(t *testing.T) { checkPageAudio(t, tab) })
}

// nativeVisionChat runs the conversation natively through the page's
// loader and template rendering, with the projector attached as the page
// attaches it, on the CPU backend: its ids and text.
func nativeVisionChat(t *testing.T, text, mmproj string, msgs []chat.Message, maxTokens int) ([]int, string) {
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
	m, source, err := loadModel(context.Background(), data, nil, pipeline.Options{Backend: b, MaxCache: visionCache})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := attachMMProj(m, proj); err != nil {
		t.Fatal(err)
	}
	tpl, err := chatTemplate(m, source)
	if err != nil {
		t.Fatal(err)
	}
	g := pipeline.GenerateOptions{MaxTokens: maxTokens}
	prompt, err := chatPrompt(m, tpl, msgs, &g)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int
	var out strings.Builder
	for tk, err := range m.NewSession().Generate(context.Background(), prompt, g) {
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
