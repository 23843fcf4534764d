package cpu

import "sync"

// minParallelWork is the number of multiply-adds below which splitting a
// loop across goroutines costs more than it saves.
const minParallelWork = 1 << 15

// pool splits loops across a fixed number of goroutines.
type pool struct{ threads int }

// run calls fn on contiguous chunks of [0, n) covering it exactly once,
// concurrently when work (an estimate of the multiply-adds) is large enough.
// It returns when every chunk is done.
func (p pool) run(n, work int, fn func(lo, hi int)) {
	workers := min(p.threads, n)
	if workers <= 1 || work < minParallelWork {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(w*n/workers, (w+1)*n/workers)
		}()
	}
	fn(0, n/workers)
	wg.Wait()
}
