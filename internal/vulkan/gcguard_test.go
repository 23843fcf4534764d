//go:build cgo

package vulkan

import (
	"runtime/debug"
	"sync"
	"testing"
)

// TestNoGCRestores checks that nested and concurrent noGC calls keep the
// collector off while any runs and restore the previous percentage after
// the last one.
func TestNoGCRestores(t *testing.T) {
	prev := debug.SetGCPercent(73)
	defer debug.SetGCPercent(prev)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				noGC(func() int {
					if p := debug.SetGCPercent(-1); p != -1 {
						t.Errorf("inside noGC the GC percent is %d, want -1", p)
					}
					return noGC(func() int { return 0 })
				})
			}
		})
	}
	wg.Wait()
	if p := debug.SetGCPercent(prev); p != 73 {
		t.Fatalf("after noGC the GC percent is %d, want 73", p)
	}
}
