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
}

func newPrefixCache(m *Model, budget int64) *prefixCache {
	return &prefixCache{budget: budget, perPos: kvBytesPerPosition(&m.cfg, m.kvF16)}
}

// release frees every entry (Model.Close).
func (pc *prefixCache) release() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for _, e := range pc.entries {
		e.kv.Release()
	}
	pc.entries, pc.used = nil, 0
}

// prepare readies sl, which the caller holds, for context: when sl holds
// tokens that context does not keep, they are saved as an entry first;
// when an entry shares a longer prefix with context than sl does, that
// prefix is copied into sl. Failures only cost the reuse: the cache never
// holds rows it has not copied whole.
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
		pc.save(m, sl.cached, sl.kv)
	}
	var best *prefixEntry
	bestN := keep
	if hybrid && keep < len(sl.cached) {
		bestN = 0 // feed restarts the slot at 0
	}
	for _, e := range pc.entries {
		n := min(commonPrefix(e.tokens, context), want)
		if hybrid && n < len(e.tokens) {
			// An entry's recurrent states hold all its tokens, not
			// a prefix of them (states are not checkpointed along
			// the way): only an entry the context extends serves.
			continue
		}
		if n > bestN {
			best, bestN = e, n
		}
	}
	if best == nil {
		return
	}
	m.lockDevice()
	err := m.backend.CopyKV(sl.kv, best.kv, bestN)
	m.unlockDevice()
	if err != nil {
		// The slot's rows may be partly overwritten: trust none of them.
		sl.cached = sl.cached[:0]
		return
	}
	best.used = pc.tick
	pc.hits++
	sl.cached = append(sl.cached[:0], best.tokens[:bestN]...)
}

// save keeps the rows of tokens held by kv in a new entry, unless an entry
// already holds them; an entry holding a prefix of them gives way.
func (pc *prefixCache) save(m *Model, tokens []int, kv gpu.KVCache) {
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
			e.kv.Release()
			pc.used -= e.bytes
			continue
		}
		kept = append(kept, e)
	}
	clear(pc.entries[len(kept):])
	pc.entries = kept
	for pc.used+bytes > pc.budget && len(pc.entries) > 0 {
		pc.evictOldest()
	}
	spec := fusion.KVSpec{Layers: m.cfg.Layers, KVHeads: m.cfg.KVHeads, HeadDim: m.kvSpec.HeadDim, MaxLen: len(tokens), F16: m.kvF16, HeadDims: m.kvSpec.HeadDims, State: m.kvSpec.State}
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
	pc.entries = append(pc.entries, &prefixEntry{tokens: append([]int(nil), tokens...), kv: dst, bytes: bytes, used: pc.tick})
	pc.used += bytes
	pc.saves++
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

func (pc *prefixCache) evictOldest() {
	old := 0
	for i, e := range pc.entries {
		if e.used < pc.entries[old].used {
			old = i
		}
	}
	e := pc.entries[old]
	e.kv.Release()
	pc.used -= e.bytes
	pc.entries = append(pc.entries[:old], pc.entries[old+1:]...)
}
