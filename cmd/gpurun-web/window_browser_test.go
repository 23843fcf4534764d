//go:build !js

package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gpurun/gpurun/internal/browser"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// checkWindows: on the page's WebGPU, which reads ahead (decode steps in
// windows, the next submission queued before the page reads the one
// before: gpu.Caps.ReadAhead), longer generations than the others give
// llama.cpp's greedy ids, with 8 and with 2 steps a submission (11
// submissions in flight one after another), and a stop id or a token
// limit in the middle of a window ends the ids there; each generation
// after such a stop runs on the cache the one before left.
func checkWindows(t *testing.T, tab *browser.Tab, c browserCase) {
	st := testmodels.StoriesCases(t)[0]
	const n = 24 // the prompt's 5 ids and 24 fit testCache
	want := st.GeneratedIDs[:n]
	k := 10 // a stop id past the first submission of 8
	for slices.Contains(want[:k], want[k]) {
		k++
	}
	promptIDs, _ := json.Marshal(st.PromptIDs)
	for _, per := range []int{8, 2} {
		if _, err := eval[chromedp.Void](tab, fmt.Sprintf("gpurunPage.loadServed(%q, 'auto', %d, %d).then(() => null)", c.name, testCache, per)); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			opts string
			want []int
		}{
			{fmt.Sprintf("maxTokens: %d, ignoreStop: true", n), want},
			{fmt.Sprintf("maxTokens: %d, stopTokens: [%d]", n, want[k]), want[:k]},
			{"maxTokens: 13, ignoreStop: true", want[:13]},
			{fmt.Sprintf("maxTokens: %d, ignoreStop: true", n), want},
		} {
			r, err := eval[genResult](tab, fmt.Sprintf("gpurunPage.generate('', {%s, promptIds: %s})", tc.opts, promptIDs))
			if err != nil {
				t.Fatalf("%d steps a submission, {%s}: generate: %v", per, tc.opts, err)
			}
			if !slices.Equal(r.IDs, tc.want) {
				t.Errorf("%d steps a submission, {%s}: ids\n got %v\nwant %v (llama.cpp)", per, tc.opts, r.IDs, tc.want)
			}
			t.Logf("%d steps a submission, {%s}: %d ids, decode %.1f tok/s", per, tc.opts, len(r.IDs), r.DecodeTokPerSec)
		}
	}
}
