package pipeline

import (
	"sync"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
)

// Prefix cache. A slot's KV cache serves the next session that takes the
// slot for the prefix it shares with what the slot holds. With a prefix
// cache (Options.PrefixCacheBytes) the keys and values a slot held are
// not lost when another session takes it over: before they are
// overwritten they are copied (gpu.Backend.CopyKV) into an entry of their own, a
// KV cache just long enough, and a later session whose context starts
// with an entry's tokens gets that prefix copied into its slot, so its
// prefill runs only the rest. Entries are kept up to a budget of bytes,
// the least recently used evicted first. The copies are exact, so a
// context prefilled from an entry yields the same logits as from scratch
// wherever a token's keys and values do not depend on how the prompt was
// split into prefill chunks (the CPU backend; tested bitwise).

// DefaultPrefixCacheBytes is the prefix cache budget of `gpurun serve` and
// `gpurun chat` unless told otherwise (--prefix-cache-mb).
const DefaultPrefixCacheBytes = 512 << 20

type prefixCache struct {
	mu      sync.Mutex
	budget  int64 // bytes
	used    int64
	perPos  int64
	tick    uint64
	entries []*prefixEntry
	// hits and saves count entries used and made (tests).
	hits, saves int
}

// prefixEntry is one kept context: its tokens and a cache of exactly their
// positions.
type prefixEntry struct {
	tokens []int
	kv     gpu.KVCache
	bytes  int64
	used   uint64 // the tick of its last use
	// points: on a hybrid, checkpoints of the states of prefixes of
	// tokens (kv's own states describe all of them), ascending.
	points []*checkpoint
}

func newPrefixCache(m *Model, budget int64) *prefixCache {
	return &prefixCache{budget: budget, perPos: kvBytesPerPosition(&m.cfg, m.kvF16, m.cacheK, m.cacheV)}
}

// release frees every entry (Model.Close).
func (pc *prefixCache) release(m *Model) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for _, e := range pc.entries {
		e.release(m)
	}
	pc.entries, pc.used = nil, 0
}

// prepare readies sl, which the caller holds, for context: when sl holds
// tokens that context does not keep, they are saved as an entry first;
// when an entry shares a longer prefix with context than sl does, that
// prefix is copied into sl. Failures only cost the reuse: the cache never
// holds rows it has not copied whole.
//
// On a hybrid a source (sl itself or an entry) serves a prefix only up to
// where its recurrent states are known: its end, which its own states
// describe, or within it its latest state checkpoint (checkpoint.go). An
// entry made from sl takes sl's checkpoints along; when the prefix served
// is one sl's cache still holds, only the states are copied.
func (m *Model) preparePrefix(sl *slot, context []int) {
	pc := m.prefix
	if pc == nil {
		return
	}
	// At least the last token runs (feed), so its row is never needed.
	want := len(context) - 1
	keep := min(commonPrefix(sl.cached, context), want)
	hybrid := m.recurrent()
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.tick++
	if keep < len(sl.cached) {
		pc.save(m, sl)
	}
	// The slot's own prefix: keep, or on a hybrid whose states are past
	// it, its latest checkpoint (feed restores it).
	bestN := keep
	if hybrid && keep < len(sl.cached) {
		bestN = 0
		if ck := m.states.latest(sl.points, keep); ck != nil {
			bestN = ck.pos
		}
	}
	var best *prefixEntry
	var bestCk *checkpoint
	for _, e := range pc.entries {
		n := min(commonPrefix(e.tokens, context), want)
		var ck *checkpoint
		if hybrid && n < len(e.tokens) {
			// The entry's states hold all its tokens: within them it
			// serves up to its latest checkpoint.
			if ck = m.states.latest(e.points, n); ck == nil {
				continue
			}
			n = ck.pos
		}
		if n > bestN {
			best, bestN, bestCk = e, n, ck
		}
	}
	if best == nil {
		return
	}
	if !m.copyPrefix(sl, best, bestN, bestCk) {
		// The slot's rows may be partly overwritten: trust none of them.
		sl.cut(0)
		return
	}
	best.used = pc.tick
	pc.hits++
	sl.retoken(best.tokens[:bestN])
}

// copyPrefix makes sl's cache hold e's first n tokens: their keys and
// values (unless sl's cache holds them already, on a hybrid) and the
// states at n, those of ck (nil: e's own, n being its end).
func (m *Model) copyPrefix(sl *slot, e *prefixEntry, n int, ck *checkpoint) bool {
	own := m.recurrent() && commonPrefix(sl.cached, e.tokens) >= n
	if !own {
		rows := n
		if m.recurrent() {
			// CopyKV copies the states with the rows of every position
			// they describe; ck's replace them after.
			rows = len(e.tokens)
		}
		m.lockDevice()
		err := m.backend.CopyKV(sl.kv, e.kv, rows)
		m.unlockDevice()
		if err != nil {
			return false
		}
	}
	switch {
	case ck != nil:
		return m.states.restore(m, sl.kv, ck)
	case own:
		m.lockDevice()
		defer m.unlockDevice()
		return m.backend.CopyState(sl.kv, e.kv) == nil
	}
	return true
}

// save keeps the rows of the tokens sl holds in a new entry, unless an
// entry already holds them; an entry holding a prefix of them gives way.
// On a hybrid the new entry takes sl's state checkpoints.
func (pc *prefixCache) save(m *Model, sl *slot) {
	tokens, kv := sl.cached, sl.kv
	if len(tokens) == 0 {
		return
	}
	bytes := pc.perPos*int64(len(tokens)) + stateBytes(m.kvSpec)
	if bytes > pc.budget {
		return
	}
	kept := pc.entries[:0]
	for _, e := range pc.entries {
		n := commonPrefix(e.tokens, tokens)
		switch {
		case n == len(tokens) && (len(e.tokens) == n || !m.recurrent()):
			// e holds them all already (on a hybrid, with its states
			// at their end).
			e.used = pc.tick
			return
		case n == len(e.tokens) && !m.recurrent():
			// tokens extend e: e gives way. (On a hybrid e stays: its
			// states hold its end, which the new entry's do not, so it
			// still serves contexts that extend it and not tokens.)
			e.release(m)
			pc.used -= e.bytes
			continue
		}
		kept = append(kept, e)
	}
	clear(pc.entries[len(kept):])
	pc.entries = kept
	for pc.used+bytes > pc.budget && len(pc.entries) > 0 {
		pc.evictOldest(m)
	}
	spec := fusion.KVSpec{Layers: m.cfg.Layers, KVHeads: m.cfg.KVHeads, HeadDim: m.kvSpec.HeadDim, MaxLen: len(tokens), F16: m.kvF16, HeadDims: m.kvSpec.HeadDims, State: m.kvSpec.State, K: m.kvSpec.K, V: m.kvSpec.V, SWA: m.kvSpec.SWA}
	m.lockDevice()
	defer m.unlockDevice()
	dst, err := m.backend.NewKVCache(spec)
	if err != nil {
		return
	}
	if err := m.backend.CopyKV(dst, kv, len(tokens)); err != nil {
		dst.Release()
		return
	}
	// The slot's checkpoints describe prefixes of tokens: they move to
	// the entry (sl's record of them ends here).
	pc.entries = append(pc.entries, &prefixEntry{tokens: append([]int(nil), tokens...), kv: dst, bytes: bytes, used: pc.tick, points: sl.points})
	sl.points = nil
	pc.used += bytes
	pc.saves++
}

// release frees the entry's cache and gives back its state checkpoints.
func (e *prefixEntry) release(m *Model) {
	e.kv.Release()
	m.states.drop(e.points)
	e.points = nil
}

// stateBytes is the f32 recurrent states of a cache of spec (a prefix
// entry holds them besides its keys and values).
func stateBytes(spec fusion.KVSpec) int64 {
	var n int64
	for _, st := range spec.State {
		n += 4 * int64(st.Values())
	}
	return n
}

func (pc *prefixCache) evictOldest(m *Model) {
	old := 0
	for i, e := range pc.entries {
		if e.used < pc.entries[old].used {
			old = i
		}
	}
	e := pc.entries[old]
	e.release(m)
	pc.used -= e.bytes
	pc.entries = append(pc.entries[:old], pc.entries[old+1:]...)
}
