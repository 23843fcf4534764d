package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// The policy of a Multi server's models (pool): a model loads on its
// first request, within a memory budget, evicting the least recently used
// idle models when the load would exceed it (never one with requests in
// flight: then the load waits for room, as long as the request lasts, up
// to a bound, and the request gets 503 with Retry-After). A model idle for
// its keep_alive is unloaded (sweep); keep_alive 0 unloads it when its
// last request ends, a negative one never. Concurrent first requests for
// one model load it once. Time comes from now, so that tests drive a fake
// clock.

// instance is a loaded model: the handler serving it and how to free it.
type instance struct {
	h     http.Handler
	srv   *Server // nil in tests of the policy alone
	close func() error
}

// poolEntry is one served model's state.
type poolEntry struct {
	id       string
	estimate int64     // bytes, before it loads
	bytes    int64     // bytes counted against the budget: 0 unloaded, estimate while loading, the measured size once loaded
	inst     *instance // nil unless loaded
	loading  *loadCall // non-nil while loading
	inFlight int       // requests holding it (the one loading it included)
	lastUsed time.Time
	keep     time.Duration // idle time before unloading; < 0 never
}

// loadCall is one load under way; the requests that wait for it get its
// error.
type loadCall struct {
	done chan struct{}
	err  error
}

// errNoRoom is a load that found no idle model to evict within the wait.
var errNoRoom = errors.New("no memory for the model: the other models have requests running")

// errTooLarge is a model whose estimate alone exceeds the budget.
var errTooLarge = errors.New("the model is larger than the memory budget")

type pool struct {
	mu      sync.Mutex
	budget  int64         // bytes; <= 0: no limit
	keep    time.Duration // default keep_alive
	wait    time.Duration // how long a load waits for room
	now     func() time.Time
	load    func(ctx context.Context, id string) (*instance, int64, error)
	entries map[string]*poolEntry
	closing int64         // bytes of unloaded models still being freed
	changed chan struct{} // closed (and replaced) when a model is released or freed
	loads   int           // loads started (tests read it)
	log     func(format string, args ...any)
}

func newPool(budget int64, keep, wait time.Duration, now func() time.Time, load func(context.Context, string) (*instance, int64, error)) *pool {
	return &pool{budget: budget, keep: keep, wait: wait, now: now, load: load,
		entries: map[string]*poolEntry{}, changed: make(chan struct{})}
}

// add declares a model with its size estimate.
func (p *pool) add(id string, estimate int64) {
	p.entries[id] = &poolEntry{id: id, estimate: estimate, keep: p.keep}
}

// signal wakes the loads waiting for room. p.mu is held.
func (p *pool) signal() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// used is the bytes counted against the budget. p.mu is held.
func (p *pool) used() int64 {
	n := p.closing
	for _, e := range p.entries {
		n += e.bytes
	}
	return n
}

// unload takes e out of the loaded models and returns what frees it.
// p.mu is held.
func (p *pool) unload(e *poolEntry) func() {
	inst, bytes := e.inst, e.bytes
	e.inst, e.bytes = nil, 0
	p.closing += bytes
	if p.log != nil {
		p.log("unloaded %q", e.id)
	}
	return func() {
		if inst.close != nil {
			inst.close()
		}
		p.mu.Lock()
		p.closing -= bytes
		p.signal()
		p.mu.Unlock()
	}
}

// makeRoom unloads the least recently used idle models until need more
// bytes fit the budget, and returns what frees them; false (and nothing
// unloaded) when the idle ones do not free enough. p.mu is held.
func (p *pool) makeRoom(need int64, except *poolEntry) ([]func(), bool) {
	if p.budget <= 0 {
		return nil, true
	}
	over := p.used() + need - p.budget
	if over <= 0 {
		return nil, true
	}
	var idle []*poolEntry
	var free int64
	for _, e := range p.entries {
		if e != except && e.inst != nil && e.inFlight == 0 {
			idle = append(idle, e)
			free += e.bytes
		}
	}
	if free < over {
		return nil, false
	}
	slices.SortFunc(idle, func(a, b *poolEntry) int { return a.lastUsed.Compare(b.lastUsed) })
	var frees []func()
	for _, e := range idle {
		if over <= 0 {
			break
		}
		over -= e.bytes
		frees = append(frees, p.unload(e))
	}
	return frees, true
}

func runAll(fs []func()) {
	for _, f := range fs {
		f()
	}
}

// acquire returns the model id loaded, loading it first if need be, and
// holds it (no eviction) until release.
func (p *pool) acquire(ctx context.Context, id string) (*instance, error) {
	var deadline <-chan time.Time
	for {
		p.mu.Lock()
		e := p.entries[id]
		if e.inst != nil {
			e.inFlight++
			e.lastUsed = p.now()
			p.mu.Unlock()
			return e.inst, nil
		}
		if c := e.loading; c != nil {
			p.mu.Unlock()
			select {
			case <-c.done:
				if c.err != nil {
					return nil, c.err
				}
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if p.budget > 0 && e.estimate > p.budget {
			p.mu.Unlock()
			return nil, fmt.Errorf("%w: %q needs about %d MiB, the budget is %d MiB", errTooLarge, id, e.estimate>>20, p.budget>>20)
		}
		frees, ok := p.makeRoom(e.estimate, e)
		if !ok {
			ch := p.changed
			p.mu.Unlock()
			if deadline == nil {
				t := time.NewTimer(p.wait)
				defer t.Stop()
				deadline = t.C
			}
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-deadline:
				return nil, fmt.Errorf("loading %q: %w", id, errNoRoom)
			}
		}
		c := &loadCall{done: make(chan struct{})}
		e.loading, e.bytes = c, e.estimate
		e.inFlight++
		p.loads++
		p.mu.Unlock()
		runAll(frees)
		// The load serves every request waiting for it: the first one's
		// cancellation does not stop it.
		inst, bytes, err := p.load(context.WithoutCancel(ctx), id)
		p.mu.Lock()
		e.loading = nil
		c.err = err
		if err != nil {
			e.bytes = 0
			e.inFlight--
		} else {
			e.inst, e.bytes, e.lastUsed = inst, bytes, p.now()
			if bytes > e.estimate {
				// Measured larger than estimated: unload idle models
				// (best effort) so that the budget holds again.
				frees, _ = p.makeRoom(0, e)
			} else {
				frees = nil
			}
			e.estimate = bytes
		}
		p.signal()
		close(c.done)
		p.mu.Unlock()
		runAll(frees)
		return inst, err
	}
}

// release ends a request on id; keep, when non-nil, is its keep_alive,
// the model's idle time from now on (the server default otherwise).
func (p *pool) release(id string, keep *time.Duration) {
	p.mu.Lock()
	e := p.entries[id]
	e.inFlight--
	e.lastUsed = p.now()
	e.keep = p.keep
	if keep != nil {
		e.keep = *keep
	}
	var free func()
	if e.inFlight == 0 && e.keep == 0 && e.inst != nil {
		free = p.unload(e)
	}
	p.signal()
	p.mu.Unlock()
	if free != nil {
		free()
	}
}

// sweep unloads the idle models whose keep_alive has passed.
func (p *pool) sweep() {
	p.mu.Lock()
	now := p.now()
	var frees []func()
	for _, e := range p.entries {
		if e.inst != nil && e.inFlight == 0 && e.keep >= 0 && !now.Before(e.lastUsed.Add(e.keep)) {
			frees = append(frees, p.unload(e))
		}
	}
	p.mu.Unlock()
	runAll(frees)
}

// loadedModel is a loaded model as /api/ps lists it.
type loadedModel struct {
	id      string
	bytes   int64
	expires time.Time // zero: never
}

// loaded lists the loaded models by id.
func (p *pool) loaded() []loadedModel {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []loadedModel
	now := p.now()
	for _, e := range p.entries {
		if e.inst == nil {
			continue
		}
		l := loadedModel{id: e.id, bytes: e.bytes}
		if e.keep >= 0 {
			from := e.lastUsed
			if e.inFlight > 0 {
				from = now
			}
			l.expires = from.Add(e.keep)
		}
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b loadedModel) int { return strings.Compare(a.id, b.id) })
	return out
}

// closeAll unloads every model (the server stopped).
func (p *pool) closeAll() {
	p.mu.Lock()
	var frees []func()
	for _, e := range p.entries {
		if e.inst != nil {
			frees = append(frees, p.unload(e))
		}
	}
	p.mu.Unlock()
	runAll(frees)
}
