package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/internal/tuning"
)

// loadStats summarize one load run.
type loadStats struct {
	completed, cancelled int
	tokens               int
	wall                 time.Duration
	latencies            []time.Duration // of completed requests
}

func (s *loadStats) percentile(p float64) time.Duration {
	if len(s.latencies) == 0 {
		return 0
	}
	l := slices.Sorted(slices.Values(s.latencies))
	return l[min(len(l)-1, int(p*float64(len(l))))]
}

// TestLoad drives the server on loopback with 32 clients sending 8 greedy
// requests each, with 1 and then 4 slots (stepped apart, as the default
// rule has it for a model this small, and batched): every response that completes is
// the text the same prompt gets alone, half of the streamed requests are
// cancelled mid-way, and afterwards no goroutine is left behind. It logs
// p50/p99 latency and the aggregate generated tokens per second of both
// runs (measured, not asserted).
func TestLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	cases := testmodels.StoriesCases(t)
	const clients, perClient, maxTokens = 32, 8, 24
	for _, run := range []struct {
		slots   int
		batched bool
	}{{1, false}, {4, false}, {4, true}} {
		slots := run.slots
		name := fmt.Sprintf("parallel=%d", slots)
		if run.batched {
			name += "/batched"
		}
		t.Run(name, func(t *testing.T) {
			m := storiesModelWith(t, pipeline.Options{MaxCache: 128, Slots: slots}.WithTuning(tuning.Options{AlwaysBatch: run.batched}))
			if m.Batching() != run.batched {
				t.Fatalf("Batching() = %v, want %v", m.Batching(), run.batched)
			}
			// The baseline includes the model's own goroutines (the CPU
			// backend's worker pool), which live until it is closed.
			base := runtime.NumGoroutine()
			s, err := New(Config{Model: m, ModelID: modelID})
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(s)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
			body := func(prompt string, stream bool) string {
				return fmt.Sprintf(`{"model":%q,"prompt":%q,"temperature":0,"max_tokens":%d,"stream":%v}`, modelID, prompt, maxTokens, stream)
			}
			// Each prompt's text alone.
			want, wantTokens := map[string]string{}, map[string]int{}
			for _, tc := range cases {
				text, n, err := request(context.Background(), client, ts.URL, body(tc.Prompt, false), false, -1)
				if err != nil {
					t.Fatal(err)
				}
				want[tc.Prompt], wantTokens[tc.Prompt] = text, n
			}
			var mu sync.Mutex
			st := loadStats{}
			var wg sync.WaitGroup
			start := time.Now()
			for c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for r := range perClient {
						prompt := cases[(c+r)%len(cases)].Prompt
						// Odd requests stream; every other stream is
						// cancelled after its third chunk.
						stream := r%2 == 1
						cancelAt := -1
						if stream && (c+r/2)%2 == 0 {
							cancelAt = 3
						}
						t0 := time.Now()
						text, _, err := request(context.Background(), client, ts.URL, body(prompt, stream), stream, cancelAt)
						took := time.Since(t0)
						mu.Lock()
						switch {
						case cancelAt >= 0 && err == errCancelled:
							st.cancelled++
						case err != nil:
							t.Errorf("client %d request %d: %v", c, r, err)
						case text != want[prompt]:
							t.Errorf("client %d request %d: %q, alone %q", c, r, text, want[prompt])
						default:
							st.completed++
							st.tokens += wantTokens[prompt]
							st.latencies = append(st.latencies, took)
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			st.wall = time.Since(start)
			if st.cancelled != clients*perClient/4 || st.completed != clients*perClient*3/4 {
				t.Errorf("%d completed and %d cancelled of %d", st.completed, st.cancelled, clients*perClient)
			}
			waitFor(t, func() bool { return s.inFlight.Load() == 0 })
			ts.Close()
			client.CloseIdleConnections()
			waitFor(t, func() bool { return runtime.NumGoroutine() <= base })
			t.Logf("parallel %d (batched %v): %d requests completed (%d cancelled) in %v: p50 %v, p99 %v, %d tokens, %.0f tok/s aggregate",
				slots, m.Batching(), st.completed, st.cancelled, st.wall.Round(time.Millisecond), st.percentile(0.5).Round(time.Millisecond),
				st.percentile(0.99).Round(time.Millisecond), st.tokens, float64(st.tokens)/st.wall.Seconds())
		})
	}
}

type errString string

func (e errString) Error() string { return string(e) }

const errCancelled = errString("cancelled by the client")

// request posts a text completion and returns its text and completion
// token count (0 for a stream, which does not ask for the usage). A stream with cancelAt >= 0 is cancelled after that many
// chunks (errCancelled).
func request(ctx context.Context, client *http.Client, url, body string, stream bool, cancelAt int) (string, int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions", strings.NewReader(body))
	if err != nil {
		return "", 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return "", 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	var c completion
	if !stream {
		if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
			return "", 0, err
		}
		if len(c.Choices) != 1 || c.Usage == nil {
			return "", 0, fmt.Errorf("response %+v", c)
		}
		return c.Choices[0].Text, c.Usage.CompletionTokens, nil
	}
	var text strings.Builder
	sc := bufio.NewScanner(resp.Body)
	chunks := 0
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			return text.String(), 0, nil
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return "", 0, err
		}
		if len(c.Choices) == 1 {
			text.WriteString(c.Choices[0].Text)
			if c.Choices[0].FinishReason == nil {
				chunks++
			}
		}
		if chunks == cancelAt {
			cancel()
			return "", 0, errCancelled
		}
	}
	return "", 0, fmt.Errorf("stream ended without [DONE]: %v", sc.Err())
}
