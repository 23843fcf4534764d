package serve

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/chat"
)

func visionModel(t *testing.T, mmproj bool) *pipeline.Model {
	t.Helper()
	ck, err := gguf.Load(testmodels.Path(t, "vision", "text-gemma3.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	opts := pipeline.Options{Backend: cpu.New(cpu.Options{}), MaxCache: 128}
	if mmproj {
		opts.MMProj = testmodels.Path(t, "vision", "mmproj-gemma3.gguf")
	}
	m, err := pipeline.FromCheckpoint(context.Background(), ck, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestChatImage: a chat completion with an image_url part (a data: URL)
// gives the text a session gives for the same rendered conversation with
// the image; a remote URL, a broken image and an image for a text-only
// model are 400s.
func TestChatImage(t *testing.T) {
	png, err := os.ReadFile(testmodels.Path(t, "vision", "image.png"))
	if err != nil {
		t.Fatal(err)
	}
	m := visionModel(t, true)
	_, ts := newServer(t, Config{Model: m})
	url := "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
	body := func(u string) string {
		return fmt.Sprintf(`{"model": %q, "max_tokens": 12, "temperature": 0, "messages": [{"role": "user", "content": [
			{"type": "text", "text": "Look: "}, {"type": "image_url", "image_url": {"url": %q}}, {"type": "text", "text": " What is it?"}]}]}`, modelID, u)
	}
	resp, data := post(t, ts.URL+"/v1/chat/completions", body(url))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	var c completion
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	// The same conversation through the chat package and a session.
	p, err := chat.Render(m, chat.Plain(), []chat.Message{{Role: chat.User, Content: "Look: " + pipeline.MediaMarker + " What is it?", Images: [][]byte{png}}})
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for tok, err := range m.NewSession().Generate(context.Background(), pipeline.Prompt{IDs: p.IDs, Images: p.Images},
		pipeline.GenerateOptions{MaxTokens: 12, StopTokens: p.StopTokens, StopStrings: p.StopStrings}) {
		if err != nil {
			t.Fatal(err)
		}
		want.WriteString(tok.Piece)
	}
	if got := c.Choices[0].Message.Content; got != strings.TrimSpace(want.String()) && got != want.String() {
		t.Errorf("reply %q, want %q", got, want.String())
	} else {
		t.Logf("reply %q", got)
	}
	// A remote URL, where the server fetches them: the same reply.
	img := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/cat.png" {
			http.NotFound(w, r)
			return
		}
		w.Write(png)
	}))
	defer img.Close()
	_, rts := newServer(t, Config{Model: m, RemoteImages: true})
	resp, data = post(t, rts.URL+"/v1/chat/completions", body(img.URL+"/cat.png"))
	var rc completion
	if resp.StatusCode != 200 || json.Unmarshal(data, &rc) != nil || rc.Choices[0].Message.Content != c.Choices[0].Message.Content {
		t.Errorf("remote image: status %d: %s", resp.StatusCode, data)
	}
	if resp, data := post(t, rts.URL+"/v1/chat/completions", body(img.URL+"/missing.png")); resp.StatusCode != 400 {
		t.Errorf("a remote image that is not there: status %d: %s", resp.StatusCode, data)
	}
	for name, tc := range map[string]struct {
		m    *pipeline.Model
		body string
	}{
		"remote url":      {m, body(img.URL + "/cat.png")},
		"ftp url":         {m, body("ftp://example.com/cat.png")},
		"broken image":    {m, body("data:image/png;base64," + base64.StdEncoding.EncodeToString(png[:100]))},
		"not base64":      {m, body("data:image/png;base64,@@@")},
		"text-only model": {visionModel(t, false), body(url)},
	} {
		_, ts := newServer(t, Config{Model: tc.m})
		resp, data := post(t, ts.URL+"/v1/chat/completions", tc.body)
		if resp.StatusCode != 400 {
			t.Errorf("%s: status %d, want 400: %s", name, resp.StatusCode, data)
		} else {
			t.Logf("%s: %s", name, data)
		}
	}
}
