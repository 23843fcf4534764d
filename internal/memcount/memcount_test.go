package memcount

import (
	"sync"
	"testing"

	"github.com/gpurun/gpurun/gpu"
)

func TestCounter(t *testing.T) {
	var c Counter
	steps := []struct {
		add, sub int64
		reset    bool
		want     gpu.MemoryUse
	}{
		{add: 100, want: gpu.MemoryUse{Current: 100, Peak: 100}},
		{add: 50, want: gpu.MemoryUse{Current: 150, Peak: 150}},
		{sub: 100, want: gpu.MemoryUse{Current: 50, Peak: 150}},
		{reset: true, want: gpu.MemoryUse{Current: 50, Peak: 50}},
		{add: 10, want: gpu.MemoryUse{Current: 60, Peak: 60}},
		{sub: 60, want: gpu.MemoryUse{Current: 0, Peak: 60}},
	}
	for i, s := range steps {
		if s.add != 0 {
			c.Add(s.add)
		}
		if s.sub != 0 {
			c.Sub(s.sub)
		}
		if s.reset {
			c.ResetPeak()
		}
		if got := c.Use(); got != s.want {
			t.Fatalf("step %d: %+v, want %+v", i, got, s.want)
		}
	}
}

// TestCounterConcurrent: the peak is never below what was held at once.
func TestCounterConcurrent(t *testing.T) {
	var c Counter
	c.Add(1000) // held throughout
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				c.Add(7)
				c.Sub(7)
			}
		})
	}
	wg.Wait()
	u := c.Use()
	if u.Current != 1000 || u.Peak < 1007 || u.Peak > 1000+8*7 {
		t.Fatalf("%+v: want current 1000 and a peak in [1007, 1056]", u)
	}
}
