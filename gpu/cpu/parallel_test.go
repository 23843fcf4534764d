package cpu

import (
	"sync/atomic"
	"testing"
	"time"
)

type countTask struct{ done atomic.Int64 }

func (c *countTask) run(_, lo, hi int) {
	time.Sleep(time.Millisecond)
	c.done.Add(int64(hi - lo))
}

// TestPoolCloseDuringRun closes the pool (as the backend's cleanup does
// when a program outlives its backend) while loops run: every loop must
// still cover its range and return, before and after the close, and a
// second close must not block.
func TestPoolCloseDuringRun(t *testing.T) {
	p := newPool(2)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for range 50 {
			var c countTask
			p.run(64, minParallelWork, 1, &c)
			if c.done.Load() != 64 {
				t.Errorf("loop covered %d of 64", c.done.Load())
			}
		}
	}()
	time.Sleep(5 * time.Millisecond)
	p.close()
	p.close()
	select {
	case <-finished:
	case <-time.After(30 * time.Second):
		t.Fatal("a loop never returned after the pool was closed")
	}
}
