package pipeline

import (
	"slices"
	"sync"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
)

// State checkpoints (hybrid models). A recurrent layer's state describes
// one position and cannot be cut back as keys and values are
// (fusion.LayerState), so without checkpoints a slot whose next context
// shares only part of what it holds restarts at position 0. A checkpoint
// keeps a sequence's states after its first pos tokens in a cache of one
// position (gpu.Backend.CopyState; its keys and values are never read),
// and a copy back restores them: the sequence resumes at pos, its keys and
// values below pos being the slot's own or copied from a prefix cache
// entry (preparePrefix).
//
// They are taken:
//   - by feed, at the multiples of the checkpoint interval
//     (stateStore.every) and before a context's last token, where a
//     prompt or a chat turn ends: a later context that extends the
//     prompt but not the reply after it (a chat template that renders the
//     reply otherwise, drops its reasoning, a request sent again) resumes
//     there;
//   - by a hybrid draft model after each drafted token, and by the
//     speculative verifier before each verification (stateRollback).
//
// The slot whose sequence they describe holds them (slot.points, by
// position), and when another context takes the slot over they move with
// its tokens into a prefix cache entry. Every checkpoint of a model counts
// in one budget of bytes (Options.StateCheckpointBytes); the least
// recently used (taken or restored) is evicted first, and its holder skips
// it from then on.

// DefaultStateCheckpointBytes is Options.StateCheckpointBytes' default.
const DefaultStateCheckpointBytes = 256 << 20

// DefaultCheckpointEvery is the interval, in positions, of the checkpoints
// a prefill takes on a hybrid model besides the one before its last
// token: a context sharing a prefix with an earlier one that diverges
// before that one's end resumes at most this many positions before the
// divergence. A prefill then runs in chunks that end at its multiples (at
// most one chunk more per interval than it would, each still at least
// half the largest default prefill program).
const DefaultCheckpointEvery = 256

// checkpoint is a sequence's recurrent states after its first pos tokens.
type checkpoint struct {
	pos  int
	kv   gpu.KVCache // nil once evicted or dropped
	used uint64      // the store's tick at its last use
}

// stateStore holds a model's checkpoints within its budget.
type stateStore struct {
	mu     sync.Mutex
	spec   fusion.KVSpec // a checkpoint's cache: the slots', one position
	bytes  int64         // one checkpoint's
	budget int64
	every  int
	used   int64 // bytes of the held checkpoints and the spare caches
	tick   uint64
	held   []*checkpoint
	spare  []gpu.KVCache // caches of dropped checkpoints, for the next
	// Counts (tests and reports): checkpoints taken, restored, evicted
	// for room.
	taken, restored, evicted int
}

// newStateStore is the store of m's checkpoints, nil where m keeps no
// recurrent states, the backend copies none (gpu.Caps.CopyState) or the
// budget is negative; budget 0 means DefaultStateCheckpointBytes, every 0
// DefaultCheckpointEvery.
func newStateStore(m *Model, budget int64, every int) *stateStore {
	if !m.recurrent() || !m.caps.CopyState || budget < 0 {
		return nil
	}
	if budget == 0 {
		budget = DefaultStateCheckpointBytes
	}
	if every <= 0 {
		every = DefaultCheckpointEvery
	}
	spec := m.kvSpec
	spec.MaxLen, spec.Ring = 1, nil
	return &stateStore{spec: spec, bytes: cacheBytes(spec), budget: budget, every: every}
}

// cacheBytes is the memory of a cache of spec: keys and values of every
// layer that keeps its own, and the f32 states.
func cacheBytes(spec fusion.KVSpec) int64 {
	var n int64
	for l := range spec.Layers {
		if spec.LayerState(l).Recurrent() {
			continue
		}
		pos := int64(spec.MaxLen)
		if r := spec.RingLen(l); r > 0 {
			pos = 2 * int64(r)
		}
		vals := pos * int64(spec.KVHeads) * int64(spec.LayerHeadDim(l))
		n += fusion.KVBytes(spec.K, spec.F16, vals) + fusion.KVBytes(spec.V, spec.F16, vals)
	}
	return n + stateBytes(spec)
}

// stop is where the chunk of a feed of a context of total tokens that
// starts at pos ends at the latest: the next position a checkpoint is
// taken at (checkpointAt), else total.
func (st *stateStore) stop(pos, total int) int {
	if st == nil {
		return total
	}
	next := (pos/st.every + 1) * st.every
	if pos < total-1 {
		next = min(next, total-1)
	}
	return min(next, total)
}

// checkpointAt reports whether a feed of a context of total tokens takes
// a checkpoint where a chunk ends at pos.
func (st *stateStore) checkpointAt(pos, total int) bool {
	return st != nil && pos > 0 && pos < total && (pos%st.every == 0 || pos == total-1)
}

// take checkpoints kv's states, which describe position pos: nil when the
// budget cannot hold one or the copy fails (the sequence then resumes from
// an earlier one).
func (st *stateStore) take(m *Model, kv gpu.KVCache, pos int) *checkpoint {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.bytes > st.budget {
		return nil
	}
	st.tick++
	var c gpu.KVCache
	if n := len(st.spare); n > 0 {
		c, st.spare = st.spare[n-1], st.spare[:n-1]
	} else {
		for st.used+st.bytes > st.budget && st.evictOne() {
		}
		if st.used+st.bytes > st.budget {
			return nil
		}
		var err error
		m.lockDevice()
		c, err = m.backend.NewKVCache(st.spec)
		m.unlockDevice()
		if err != nil {
			return nil
		}
		st.used += st.bytes
	}
	m.lockDevice()
	err := m.backend.CopyState(c, kv)
	m.unlockDevice()
	if err != nil {
		st.spare = append(st.spare, c)
		return nil
	}
	ck := &checkpoint{pos: pos, kv: c, used: st.tick}
	st.held = append(st.held, ck)
	st.taken++
	return ck
}

// evictOne frees a spare cache, else the least recently used checkpoint;
// false when there is neither.
func (st *stateStore) evictOne() bool {
	if n := len(st.spare); n > 0 {
		st.spare[n-1].Release()
		st.spare = st.spare[:n-1]
		st.used -= st.bytes
		return true
	}
	if len(st.held) == 0 {
		return false
	}
	old := 0
	for i, ck := range st.held {
		if ck.used < st.held[old].used {
			old = i
		}
	}
	ck := st.held[old]
	st.held = slices.Delete(st.held, old, old+1)
	ck.kv.Release()
	ck.kv = nil
	st.used -= st.bytes
	st.evicted++
	return true
}

// restore copies ck's states into dst; false when ck was evicted or the
// copy failed (dst's states are then not to be trusted).
func (st *stateStore) restore(m *Model, dst gpu.KVCache, ck *checkpoint) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if ck.kv == nil {
		return false
	}
	m.lockDevice()
	err := m.backend.CopyState(dst, ck.kv)
	m.unlockDevice()
	if err != nil {
		return false
	}
	st.tick++
	ck.used = st.tick
	st.restored++
	return true
}

// latest is the checkpoint of points (ascending by position) at the
// largest position up to n that is still held; nil when none.
func (st *stateStore) latest(points []*checkpoint, n int) *checkpoint {
	if st == nil {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for i := len(points) - 1; i >= 0; i-- {
		if ck := points[i]; ck.pos <= n && ck.kv != nil {
			return ck
		}
	}
	return nil
}

// drop gives the checkpoints' caches back to the store (kept as spares,
// within the budget, for the next checkpoints).
func (st *stateStore) drop(points []*checkpoint) {
	if st == nil || len(points) == 0 {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, ck := range points {
		if ck.kv == nil {
			continue
		}
		if i := slices.Index(st.held, ck); i >= 0 {
			st.held = slices.Delete(st.held, i, i+1)
		}
		if len(st.spare) < maxSpares {
			st.spare = append(st.spare, ck.kv)
		} else {
			ck.kv.Release()
			st.used -= st.bytes
		}
		ck.kv = nil
	}
}

// maxSpares bounds the caches a store keeps for its next checkpoints: a
// speculative step drops what it took (up to a drafted step's tokens).
const maxSpares = 8

// release frees every cache (Model.Close).
func (st *stateStore) release() {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, ck := range st.held {
		ck.kv.Release()
		ck.kv = nil
	}
	for _, c := range st.spare {
		c.Release()
	}
	st.held, st.spare, st.used = nil, nil, 0
}

// checkpoint checkpoints sl's states, which describe len(sl.cached), unless
// it holds a checkpoint there already.
func (m *Model) checkpoint(sl *slot) *checkpoint {
	pos := len(sl.cached)
	if n := len(sl.points); n > 0 && sl.points[n-1].pos == pos {
		if ck := m.states.latest(sl.points[n-1:], pos); ck != nil {
			return ck
		}
		sl.points = sl.points[:n-1] // evicted
	}
	ck := m.states.take(m, sl.kv, pos)
	if ck != nil {
		sl.points = append(sl.points, ck)
	}
	return ck
}

// cut makes sl hold only its first n cached tokens, dropping the
// checkpoints past them.
func (sl *slot) cut(n int) {
	sl.cached = sl.cached[:min(n, len(sl.cached))]
	i := len(sl.points)
	for i > 0 && sl.points[i-1].pos > len(sl.cached) {
		i--
	}
	sl.states.drop(sl.points[i:])
	clear(sl.points[i:])
	sl.points = sl.points[:i]
}

// forget drops points from sl's checkpoints.
func (sl *slot) forget(points []*checkpoint) {
	if len(points) == 0 {
		return
	}
	sl.points = slices.DeleteFunc(sl.points, func(ck *checkpoint) bool { return slices.Contains(points, ck) })
	sl.states.drop(points)
}

// retoken makes sl's record of its cache tokens (every position below
// len(tokens) now holding them), keeping the checkpoints of the prefix it
// shares with what sl held.
func (sl *slot) retoken(tokens []int) {
	sl.cut(commonPrefix(sl.cached, tokens))
	sl.cached = append(sl.cached[:0], tokens...)
}

// rollback brings a hybrid slot whose states are past keep back to its
// latest checkpoint at or before keep and returns that position (0 where
// there is none: a step at 0 starts the states afresh).
func (m *Model) rollback(sl *slot, keep int) int {
	ck := m.states.latest(sl.points, keep)
	if ck == nil || !m.states.restore(m, sl.kv, ck) {
		return 0
	}
	return ck.pos
}

// StateCheckpointStats counts a model's state checkpoints: held now and
// their bytes, the budget, and those taken, restored and evicted for
// room so far (zeros on a model that keeps none).
type StateCheckpointStats struct {
	Held, Bytes, Budget, PerCheckpoint int64
	Taken, Restored, Evicted           int
}

// StateCheckpoints reports the model's state checkpoints.
func (m *Model) StateCheckpoints() StateCheckpointStats {
	st := m.states
	if st == nil {
		return StateCheckpointStats{}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return StateCheckpointStats{Held: int64(len(st.held)), Bytes: st.used, Budget: st.budget, PerCheckpoint: st.bytes,
		Taken: st.taken, Restored: st.restored, Evicted: st.evicted}
}
