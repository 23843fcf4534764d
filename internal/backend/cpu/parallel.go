package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// minParallelWork is the number of multiply-adds below which splitting a
// loop across the workers costs more than it saves.
const minParallelWork = 1 << 14

// spinTime is how long an idle worker polls for the next loop before it
// sleeps: a decode step's ops follow each other within microseconds, and
// waking a sleeping goroutine costs more than that (a worker that slept
// through the start of a loop finds most of its chunks taken). Bounded, so
// that a machine shared with other processes gets the core back.
const spinTime = 200 * time.Microsecond

// task is a loop body: run covers [lo, hi) on worker w (0 is the caller),
// which selects that worker's scratch memory. Tasks are structs the
// program keeps, so handing one to the pool allocates nothing.
type task interface {
	run(w, lo, hi int)
}

// pool is a fixed set of worker goroutines, started once, that share loops
// with the calling goroutine. A loop is cut into chunks that the caller and
// the workers take in turn from an atomic counter, so a worker that the
// machine delays does not hold up the others. A worker takes part in a loop
// only if it joins it before the caller has finished taking chunks: the
// caller then waits for the workers that joined, never for one that the
// machine has not run yet (on a loaded machine, waking a sleeping worker
// can take a scheduler time slice, milliseconds, longer than a small
// model's whole decode step).
type pool struct {
	threads int

	busy      sync.Mutex // one loop at a time; a concurrent caller runs alone
	closeOnce sync.Once

	// state is the loop's generation (bumped per loop; workers wait for a
	// change) in the high 32 bits, loopClosed once the caller has stopped
	// waiting for workers to join, and the number of workers in the loop
	// in the bits below.
	state    atomic.Uint64
	t        task
	n, chunk int
	next     atomic.Int64
	sleeping atomic.Int32
	stopped  atomic.Bool
	mu       sync.Mutex
	wake     *sync.Cond
}

const (
	genShift   = 32
	loopClosed = 1 << 31
	joinedMask = loopClosed - 1
)

// newPool starts threads-1 workers (the caller is the last thread).
func newPool(threads int) *pool {
	p := &pool{threads: threads}
	p.wake = sync.NewCond(&p.mu)
	for w := 1; w < threads; w++ {
		go p.worker(w)
	}
	return p
}

// close stops the workers. It waits for a loop in progress and keeps the
// pool's busy lock, so every later run (a program may outlive its backend,
// whose cleanup calls close) runs inline instead of waiting for workers
// that have exited.
func (p *pool) close() { p.closeOnce.Do(p.stop) }

func (p *pool) stop() {
	p.busy.Lock()
	p.stopped.Store(true)
	p.mu.Lock()
	p.state.Store((p.state.Load()>>genShift+1)<<genShift | loopClosed)
	p.wake.Broadcast()
	p.mu.Unlock()
}

// run calls t.run on chunks of [0, n) that cover it exactly once, on every
// thread when work (an estimate of the multiply-adds) is large enough, in
// chunks of at least grain (a multiple of grain unless at the end). It
// returns when every chunk is done.
func (p *pool) run(n, work, grain int, t task) {
	if p.threads <= 1 || n <= grain || work < minParallelWork || p.stopped.Load() || !p.busy.TryLock() {
		t.run(0, 0, n)
		return
	}
	chunk := max(grain, (n/(4*p.threads)+grain-1)/grain*grain)
	p.t, p.n, p.chunk = t, n, chunk
	p.next.Store(0)
	// A new generation, open, no worker in it (the last loop's workers
	// have all left).
	p.state.Store((p.state.Load()>>genShift + 1) << genShift)
	if p.sleeping.Load() > 0 {
		p.mu.Lock()
		p.wake.Broadcast()
		p.mu.Unlock()
	}
	p.work(0)
	// Every chunk is taken: close the loop to workers not in it yet and
	// wait for those in it to finish their chunks.
	p.state.Or(loopClosed)
	for spins := 0; p.state.Load()&joinedMask != 0; spins++ {
		if spins > 64 {
			runtime.Gosched()
		}
	}
	p.t = nil
	p.busy.Unlock()
}

// work takes chunks of the current loop until none is left.
func (p *pool) work(w int) {
	for {
		lo := int(p.next.Add(int64(p.chunk))) - p.chunk
		if lo >= p.n {
			return
		}
		p.t.run(w, lo, min(lo+p.chunk, p.n))
	}
}

func (p *pool) worker(w int) {
	// Generation 0 is the pool's start (newPool runs before any loop).
	var seen uint64
	for {
		var start time.Time
		for spins := 0; p.state.Load()>>genShift == seen; spins++ {
			if spins&255 != 255 {
				continue
			}
			if start.IsZero() {
				start = time.Now()
				continue
			}
			if time.Since(start) < spinTime {
				continue
			}
			p.mu.Lock()
			p.sleeping.Add(1)
			for p.state.Load()>>genShift == seen {
				p.wake.Wait()
			}
			p.sleeping.Add(-1)
			p.mu.Unlock()
		}
		s := p.state.Load()
		seen = s >> genShift
		if p.stopped.Load() {
			return
		}
		// Join the loop unless the caller has closed it (or moved on).
		for s&loopClosed == 0 && s>>genShift == seen && !p.state.CompareAndSwap(s, s+1) {
			s = p.state.Load()
		}
		if s&loopClosed != 0 || s>>genShift != seen {
			continue
		}
		p.work(w)
		p.state.Add(^uint64(0)) // leave: one worker fewer
	}
}
