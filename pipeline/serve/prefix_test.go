package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/internal/tuning"
)

// TestLoadSharedPrefix: clients send prompts (token ids) that share long
// prefixes, at once, to a server with fewer slots than clients and a
// prefix cache; every response is the text its prompt gets alone from a
// server without a prefix cache, and the usage reports cached prompt
// tokens, which a repeated prefix must produce. Run with -race for
// cross-talk between the slots and the cache. The hybrid (arch3's LFM2,
// state checkpoints every 16 positions) serves the shared prefixes up to
// their last checkpoint.
func TestLoadSharedPrefix(t *testing.T) {
	for _, tc := range []struct {
		name string
		load func(*testing.T, pipeline.Options) *pipeline.Model
	}{
		{"stories260K", func(t *testing.T, o pipeline.Options) *pipeline.Model { return storiesModelWith(t, o) }},
		{"lfm2", lfm2Model},
	} {
		t.Run(tc.name, func(t *testing.T) { loadSharedPrefix(t, tc.load) })
	}
}

func loadSharedPrefix(t *testing.T, load func(*testing.T, pipeline.Options) *pipeline.Model) {
	const clients, perClient = 12, 4
	prefixes := make([][]int, 3)
	for i := range prefixes {
		prefixes[i] = []int{1}
		for j := range 50 {
			prefixes[i] = append(prefixes[i], 3+(i*131+j*37)%500)
		}
	}
	prompt := func(c, r int) []int {
		p := append([]int(nil), prefixes[(c+r)%len(prefixes)]...)
		for j := range 1 + (c*perClient+r)%7 {
			p = append(p, 3+(c*17+r*29+j*53)%500)
		}
		return p
	}
	body := func(ids []int) string {
		b, _ := json.Marshal(ids)
		return fmt.Sprintf(`{"model":%q,"prompt":%s,"temperature":0,"max_tokens":16}`, modelID, b)
	}
	post := func(url, body string) (completion, error) {
		resp, err := http.Post(url+"/v1/completions", "application/json", bytes.NewReader([]byte(body)))
		if err != nil {
			return completion{}, err
		}
		defer resp.Body.Close()
		var c completion
		if resp.StatusCode != 200 {
			return c, fmt.Errorf("status %d", resp.StatusCode)
		}
		if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
			return c, err
		}
		if len(c.Choices) != 1 || c.Usage == nil {
			return c, fmt.Errorf("response %+v", c)
		}
		return c, nil
	}
	solo, err := New(Config{Model: load(t, pipeline.Options{MaxCache: 128}), ModelID: modelID})
	if err != nil {
		t.Fatal(err)
	}
	soloTS := httptest.NewServer(solo)
	defer soloTS.Close()
	want := map[string]string{}
	for c := range clients {
		for r := range perClient {
			b := body(prompt(c, r))
			got, err := post(soloTS.URL, b)
			if err != nil {
				t.Fatal(err)
			}
			want[b] = got.Choices[0].Text
		}
	}
	for _, batched := range []bool{false, true} {
		t.Run(fmt.Sprintf("batched=%v", batched), func(t *testing.T) {
			m := load(t, pipeline.Options{MaxCache: 128, Slots: 3, PrefixCacheBytes: 16 << 20}.WithTuning(tuning.Options{AlwaysBatch: batched, NoBatching: !batched, CheckpointEvery: 16}))
			s, err := New(Config{Model: m, ModelID: modelID})
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(s)
			defer ts.Close()
			var mu sync.Mutex
			var wg sync.WaitGroup
			cached := 0
			for c := range clients {
				wg.Go(func() {
					for r := range perClient {
						ids := prompt(c, r)
						b := body(ids)
						got, err := post(ts.URL, b)
						mu.Lock()
						switch {
						case err != nil:
							t.Errorf("client %d request %d: %v", c, r, err)
						case got.Choices[0].Text != want[b]:
							t.Errorf("client %d request %d: %q, alone %q", c, r, got.Choices[0].Text, want[b])
						case got.Usage.PromptTokens != len(ids) || got.Usage.PromptTokensDetails.CachedTokens >= len(ids):
							t.Errorf("client %d request %d: usage %+v for %d prompt tokens", c, r, *got.Usage, len(ids))
						default:
							cached += got.Usage.PromptTokensDetails.CachedTokens
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			// 48 requests over 3 prefixes of 51 tokens on 3 slots.
			if cached < clients*perClient*len(prefixes[0])/2 {
				t.Errorf("%d prompt tokens came from a cache in all, want most of the shared prefixes", cached)
			}
		})
	}
}
