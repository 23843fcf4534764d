package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/internal/tuning"
)

// lfm2Model is arch3's LFM2 (a hybrid: convolution layers with recurrent
// states beside attention) on the CPU backend.
func lfm2Model(t *testing.T, opts pipeline.Options) *pipeline.Model {
	t.Helper()
	ck, err := gguf.Load(testmodels.Path(t, "arch3", "lfm2.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	b := cpu.New(cpu.Options{})
	t.Cleanup(func() { b.Close() })
	opts.Backend = b
	m, err := pipeline.FromCheckpoint(t.Context(), ck, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestHybridPrefixCache: on a hybrid model a request sharing a prefix
// with an earlier one reports the prefix as cached_tokens and gets the
// text a fresh model gives it (sampled, so that any other state moves
// it): a second request with the first one's system part and another
// question resumes at the last state checkpoint within the shared part
// (every 16 positions here), and a conversation's next turn, sent after
// another conversation took the slot over, comes from the prefix cache
// entry of the first whole (its prompt and reply but the reply's last
// token, which no step ran).
func TestHybridPrefixCache(t *testing.T) {
	system := []int{1}
	for j := range 40 {
		system = append(system, 3+(j*37)%500)
	}
	question := func(seed int) []int {
		var q []int
		for j := range 5 {
			q = append(q, 3+(seed*131+j*53)%500)
		}
		return q
	}
	body := func(ids []int) string {
		b, _ := json.Marshal(ids)
		return fmt.Sprintf(`{"model":%q,"prompt":%s,"temperature":1.5,"seed":11,"max_tokens":8}`, modelID, b)
	}
	post := func(url string, ids []int) completion {
		t.Helper()
		resp, err := http.Post(url+"/v1/completions", "application/json", bytes.NewReader([]byte(body(ids))))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var c completion
		if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != 200 || len(c.Choices) != 1 || c.Usage == nil {
			t.Fatalf("status %d, response %+v, %v", resp.StatusCode, c, err)
		}
		return c
	}
	// alone is the text a fresh model without a prefix cache gives ids.
	alone := func(ids []int) string {
		s, err := New(Config{Model: lfm2Model(t, pipeline.Options{MaxCache: 128}), ModelID: modelID})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(s)
		defer ts.Close()
		return post(ts.URL, ids).Choices[0].Text
	}
	m := lfm2Model(t, pipeline.Options{MaxCache: 128, PrefixCacheBytes: 1 << 20}.WithTuning(tuning.Options{CheckpointEvery: 16}))
	s, err := New(Config{Model: m, ModelID: modelID})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	defer ts.Close()
	first := append(slices.Clone(system), question(1)...)
	c1 := post(ts.URL, first)
	second := append(slices.Clone(system), question(2)...)
	c2 := post(ts.URL, second)
	// The next turn of the first conversation: its reply's ids (those a
	// session on a fresh model draws, which give the reply's text) and a
	// new question.
	var reply []int
	var text string
	for tok, err := range lfm2Model(t, pipeline.Options{MaxCache: 128}).NewSession().Generate(t.Context(), pipeline.Prompt{IDs: first}, pipeline.GenerateOptions{MaxTokens: 8, Temperature: 1.5, Seed: 11}) {
		if err != nil {
			t.Fatal(err)
		}
		if tok.ID >= 0 {
			reply = append(reply, tok.ID)
		}
		text += tok.Piece
	}
	if text != c1.Choices[0].Text || len(reply) < 2 {
		t.Fatalf("a session draws %v (%q) for the first request, the server %q", reply, text, c1.Choices[0].Text)
	}
	third := append(append(slices.Clone(first), reply...), question(3)...)
	c3 := post(ts.URL, third)
	for i, tc := range []struct {
		ids    []int
		got    completion
		cached int
	}{
		{first, c1, 0},
		{second, c2, 32},
		// The entry of the first conversation: its prompt and the reply
		// but its last token.
		{third, c3, len(first) + len(reply) - 1},
	} {
		if want := alone(tc.ids); tc.got.Choices[0].Text != want {
			t.Errorf("request %d: %q, a fresh model without a prefix cache gives %q", i, tc.got.Choices[0].Text, want)
		}
		if u := tc.got.Usage; u.PromptTokens != len(tc.ids) || u.PromptTokensDetails.CachedTokens != tc.cached {
			t.Errorf("request %d: usage %+v for %d prompt tokens, want %d cached", i, *u, len(tc.ids), tc.cached)
		}
	}
	t.Logf("state checkpoints: %+v", m.StateCheckpoints())
}
