package cpu

import (
	"sync"
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

// markTask counts how often each index of its loop is run.
type markTask struct{ hits []atomic.Int32 }

func (m *markTask) run(_, lo, hi int) {
	for i := lo; i < hi; i++ {
		m.hits[i].Add(1)
	}
}

// TestPoolLoops: many short loops, from callers running at once (one takes
// the pool, the others run alone), with workers that join some loops and
// miss others: every loop covers each index exactly once.
func TestPoolLoops(t *testing.T) {
	p := newPool(4)
	defer p.close()
	var wg sync.WaitGroup
	for c := range 3 {
		wg.Go(func() {
			for i := range 300 {
				n := 1 + (c*300+i)%97
				m := &markTask{hits: make([]atomic.Int32, n)}
				p.run(n, minParallelWork, 1, m)
				for j := range m.hits {
					if h := m.hits[j].Load(); h != 1 {
						t.Errorf("caller %d loop %d: index %d of %d run %d times", c, i, j, n, h)
						return
					}
				}
				if i%50 == 0 {
					// Let the workers fall asleep now and then.
					time.Sleep(300 * time.Microsecond)
				}
			}
		})
	}
	wg.Wait()
}
