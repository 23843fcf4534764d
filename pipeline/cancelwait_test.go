package pipeline_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpurun/gpurun/pipeline"
)

// TestCancelDuringDeviceWait: a context cancelled while the host waits for
// a long submission (a 500-token prompt in one prefill submission, seconds
// on lavapipe) ends the generation within a small part of that
// submission's time, on both GPU backends, rather than when the device
// finishes.
func TestCancelDuringDeviceWait(t *testing.T) {
	ck := storiesCheckpoint(t)
	prompt := make([]int, 500)
	for i := range prompt {
		prompt[i] = 259 + i%200
	}
	prompt[0] = 1
	for _, backend := range []string{"vulkan", "webgpu"} {
		t.Run(backend, func(t *testing.T) {
			m := load(t, ck, pipeline.Options{Backend: openBackend(t, backend), MaxCache: 512, PrefillSizes: []int{512}})
			run := func(ctx context.Context, first int) error {
				// A different second token each time: nothing comes from
				// the cache.
				p := append([]int{1, first}, prompt[2:]...)
				var last error
				for _, err := range m.NewSession().Generate(ctx, pipeline.Prompt{IDs: p}, pipeline.GenerateOptions{MaxTokens: 1}) {
					last = err
				}
				return last
			}
			start := time.Now()
			if err := run(context.Background(), 300); err != nil {
				t.Fatal(err)
			}
			whole := time.Since(start)
			ctx, cancel := context.WithCancel(context.Background())
			const after = 100 * time.Millisecond
			time.AfterFunc(after, cancel)
			start = time.Now()
			err := run(ctx, 301)
			took := time.Since(start)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("error %v after %v, want cancellation (the uncancelled prefill took %v)", err, took, whole)
			}
			if took-after > whole/4 {
				t.Errorf("returned %v after the cancel; the whole submission takes %v", took-after, whole)
			}
			t.Logf("one submission %v; cancelled after %v, returned %v later", whole, after, took-after)
		})
	}
}
