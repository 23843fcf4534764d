package serve

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/chat"
)

// TestChatAudio: a chat completion with an input_audio part (base64 WAV)
// on a model with the qwen2a projector (testdata/audio/qwen2a) gives the
// text a session gives for the same rendered conversation with the
// audio; a broken WAV, audio over a prompt's 16 chunks of 30 s, a format
// other than wav, an image_url part beside it and audio for a text-only
// model are 400s.
func TestChatAudio(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "audio", "qwen2a")
	wav, err := os.ReadFile(filepath.Join(dir, "tones.wav"))
	if err != nil {
		t.Fatal(err)
	}
	ck, err := gguf.Load(filepath.Join(dir, "text-audio.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	open := func(mmproj string) *pipeline.Model {
		m, err := pipeline.FromCheckpoint(context.Background(), ck, pipeline.Options{Backend: cpu.New(cpu.Options{}), MaxCache: 2048, MMProj: mmproj})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	m := open(filepath.Join(dir, "mmproj-qwen2a.gguf"))
	_, ts := newServer(t, Config{Model: m})
	data := base64.StdEncoding.EncodeToString(wav)
	body := func(data, format, extra string) string {
		return fmt.Sprintf(`{"model": %q, "max_tokens": 8, "temperature": 0, "messages": [{"role": "user", "content": [
			{"type": "text", "text": "Listen: "}, {"type": "input_audio", "input_audio": {"data": %q, "format": %q}}%s, {"type": "text", "text": " What is it?"}]}]}`, modelID, data, format, extra)
	}
	resp, out := post(t, ts.URL+"/v1/chat/completions", body(data, "wav", ""))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, out)
	}
	var c completion
	if err := json.Unmarshal(out, &c); err != nil {
		t.Fatal(err)
	}
	p, err := chat.Render(m, chat.Plain(), []chat.Message{{Role: chat.User, Content: "Listen: " + pipeline.MediaMarker + " What is it?", Images: [][]byte{wav}}})
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for tok, err := range m.NewSession().Generate(context.Background(), pipeline.Prompt{IDs: p.IDs, Audio: p.Images},
		pipeline.GenerateOptions{MaxTokens: 8, StopTokens: p.StopTokens, StopStrings: p.StopStrings}) {
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
	for name, tc := range map[string]struct {
		m    *pipeline.Model
		body string
	}{
		"broken wav":      {m, body(base64.StdEncoding.EncodeToString(wav[:30]), "wav", "")},
		"481 s of audio":  {m, body(base64.StdEncoding.EncodeToString(longWAV()), "wav", "")},
		"mp3":             {m, body(data, "mp3", "")},
		"not base64":      {m, body("@@@", "wav", "")},
		"with an image":   {m, body(data, "wav", `, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}`)},
		"text-only model": {open(""), body(data, "wav", "")},
	} {
		_, ts := newServer(t, Config{Model: tc.m})
		resp, out := post(t, ts.URL+"/v1/chat/completions", tc.body)
		if resp.StatusCode != 400 {
			t.Errorf("%s: status %d, want 400: %s", name, resp.StatusCode, out)
		} else if strings.HasPrefix(name, "481 s") && !strings.Contains(string(out), "17 chunks of 30 s") {
			t.Errorf("%s: %s, want the chunks named", name, out)
		} else {
			t.Logf("%s: %s", name, out)
		}
	}
}

// longWAV is 481 s of 16-bit mono silence at 1 kHz: one second over what
// a prompt's audio may hold.
func longWAV() []byte {
	const n = 481000
	b := make([]byte, 44+2*n)
	copy(b, "RIFF")
	binary.LittleEndian.PutUint32(b[4:], 36+2*n)
	copy(b[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(b[16:], 16)
	binary.LittleEndian.PutUint16(b[20:], 1)
	binary.LittleEndian.PutUint16(b[22:], 1)
	binary.LittleEndian.PutUint32(b[24:], 1000)
	binary.LittleEndian.PutUint32(b[28:], 2000)
	binary.LittleEndian.PutUint16(b[32:], 2)
	binary.LittleEndian.PutUint16(b[34:], 16)
	copy(b[36:], "data")
	binary.LittleEndian.PutUint32(b[40:], 2*n)
	return b
}
