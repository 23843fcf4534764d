package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
)

// Continuous batching. With more than one slot on a backend that runs
// batched graphs (gpu.Caps.Batch), for a model for which it pays (on the
// CPU only from BatchMinWeightBytes), the
// decode steps of the sessions generating at once are gathered into one
// batched step per round (fusion.Graph.Batch: one row per session, each at
// its own position in its own slot's cache), so the weights are read once
// per round for all of them and the aggregate tok/s grows with the number
// of sessions. The CPU backend and both GPU backends run batched graphs.
// Sessions join and leave between rounds; a new session's prefill runs on
// its slot's own prefill programs, beside the rounds. Sampling, stop rules
// and cancellation stay per session, in the session's goroutine: a round
// only computes logits (greedy sessions too: with batching the device's
// argmax program is not used). A round of one row runs that slot's own
// decode program. Backends without batched graphs step each session with
// its own decode program, serialized on the device.

// batcher runs the rounds in its own goroutine (started with the model,
// stopped by Close). The variants of a model (FromCheckpointVariants) share
// one: its rows are the slots of all of them, each row applying its
// variant's adapters (arch.BuildOptions.RowLoRA).
type batcher struct {
	slots  []*slot      // by row sequence (slot.seq)
	device *sync.Mutex  // the models' device lock (nil on the CPU)
	users  atomic.Int32 // models holding it; the last to close stops it
	prog   gpu.BatchProgram
	vocab  int
	reqs   chan *stepReq // capacity: one per slot, so a send never blocks
	wake   chan struct{} // a session left its decode loop (capacity 1)
	quit   chan struct{}
	done   chan struct{}
	active atomic.Int32 // sessions in their decode loop
	rows   []gpu.Row
	batch  []*stepReq
	logits []float32
	// rounds and rowsRun count the rounds run and their rows; mixed the
	// rounds whose rows applied more than one adapter set.
	rounds, rowsRun, mixed atomic.Int64
	gather                 int // tuning.Options.GatherRows
}

// RoundStats counts a model's batched decode rounds (of all its variants
// when they share them: FromCheckpointVariants).
type RoundStats struct {
	Rounds int64 // rounds run (a round of one row included)
	Rows   int64 // their rows in all
	// Mixed is the rounds whose rows applied different adapter sets.
	Mixed int64
}

// Rounds reports the batched rounds so far (zeros without batching).
func (m *Model) Rounds() RoundStats {
	if m.batch == nil {
		return RoundStats{}
	}
	return RoundStats{Rounds: m.batch.rounds.Load(), Rows: m.batch.rowsRun.Load(), Mixed: m.batch.mixed.Load()}
}

// stepReq is one session's decode step in a round.
type stepReq struct {
	row    gpu.Row
	logits []float32 // the row's logits are copied here
	err    error
	done   chan struct{} // receives when the round has run
}

// newBatcher compiles the batched decode graph over every slot's cache and
// starts the rounds; it returns nil, nil when the backend runs no batched
// graphs (gpu.ErrUnsupported).
func (m *Model) newBatcher() (*batcher, error) {
	for i, sl := range m.slots {
		sl.seq, sl.adapter = i, 0
	}
	return startBatcher(m, m.slots, arch.BuildOptions{LoRA: m.lora})
}

// startBatcher compiles the batched decode graph of m's config over the
// caches of slots (each at its seq), with opts' adapters, and starts the
// rounds; nil, nil when the backend runs no such graph (gpu.Caps.Batch,
// or gpu.ErrUnsupported for this one).
func startBatcher(m *Model, slots []*slot, opts arch.BuildOptions) (*batcher, error) {
	if !m.caps.Batch {
		return nil, nil
	}
	n := len(slots)
	opts.Tokens, opts.Batch = n, true
	g, err := m.graph(opts)
	if err != nil {
		return nil, fmt.Errorf("pipeline: batched graph: %w", err)
	}
	kvs := make([]gpu.KVCache, n)
	for i, sl := range slots {
		kvs[i] = sl.kv
	}
	m.lockDevice()
	prog, err := m.backend.CompileBatch(g, m.weights, kvs)
	m.unlockDevice()
	if errors.Is(err, gpu.ErrUnsupported) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pipeline: compile batched graph of %d rows: %w", n, err)
	}
	b := &batcher{slots: slots, device: m.device, prog: prog, vocab: m.cfg.VocabSize,
		reqs: make(chan *stepReq, n), wake: make(chan struct{}, 1),
		quit: make(chan struct{}), done: make(chan struct{}),
		logits: make([]float32, n*m.cfg.VocabSize), gather: m.gatherRows}
	b.users.Store(1)
	go b.loop()
	return b, nil
}

// stop ends the rounds and releases the program once its last user
// stops it. No session of that user may be decoding (Close holds every
// turn).
func (b *batcher) stop() {
	if b.users.Add(-1) > 0 {
		return
	}
	close(b.quit)
	<-b.done
	b.prog.Release()
}

// join and leave bracket a session's decode loop: a round waits for the
// steps of the sessions that joined (bounded by minWait..maxWait, see loop).
func (b *batcher) join() { b.active.Add(1) }

func (b *batcher) leave() {
	b.active.Add(-1)
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Bounds of how long a round waits for the steps of sessions still busy
// sampling or streaming their last token: about one round's time, so a
// slow consumer costs the others at most a round's delay.
const (
	minWait = 10 * time.Microsecond
	maxWait = 100 * time.Millisecond
	// gatherWait bounds a round's wait for tuning.Options.GatherRows.
	gatherWait = 2 * time.Second
)

func (b *batcher) loop() {
	defer close(b.done)
	last := minWait // the last round's duration
	for {
		b.batch = b.batch[:0]
		select {
		case r := <-b.reqs:
			b.batch = append(b.batch, r)
		case <-b.quit:
			return
		}
		wait, least := min(max(last, minWait), maxWait), 0
		if b.gather > 0 && b.mixed.Load() == 0 {
			wait, least = gatherWait, b.gather // tuning.Options.GatherRows
		}
		timer := time.NewTimer(wait)
	gather:
		for len(b.batch) < max(int(b.active.Load()), least) {
			select {
			case r := <-b.reqs:
				b.batch = append(b.batch, r)
			case <-b.wake:
			case <-timer.C:
				break gather
			}
		}
		timer.Stop()
		start := time.Now()
		b.run()
		last = time.Since(start)
	}
}

// run executes one round and hands every request its logits or the error.
func (b *batcher) run() {
	b.rows = b.rows[:0]
	for _, r := range b.batch {
		b.rows = append(b.rows, r.row)
	}
	err := b.step()
	b.rounds.Add(1)
	b.rowsRun.Add(int64(len(b.rows)))
	for _, r := range b.rows[1:] {
		if r.Adapter != b.rows[0].Adapter {
			b.mixed.Add(1)
			break
		}
	}
	for t, r := range b.batch {
		r.err = err
		if err == nil {
			copy(r.logits, b.logits[t*b.vocab:(t+1)*b.vocab])
		}
		r.done <- struct{}{}
	}
}

func (b *batcher) step() error {
	if b.device != nil {
		b.device.Lock()
		defer b.device.Unlock()
	}
	// A round serves several sessions: no one session's context cancels
	// it (each waits at most one round after its own cancellation).
	if len(b.rows) == 1 {
		// One row: the slot's own decode step, which the GPU backends run
		// with their one-token kernels (a batched step computes its rows
		// with kernels for several tokens, slower for one).
		r := b.rows[0]
		prog := b.slots[r.Seq].decode
		if err := prog.Run(context.Background(), []int32{r.Token}, r.Pos); err != nil {
			return fmt.Errorf("pipeline: decode step: %w", err)
		}
		if _, err := prog.Logits(b.logits); err != nil {
			return fmt.Errorf("pipeline: decode logits: %w", err)
		}
		return nil
	}
	if err := b.prog.RunBatch(context.Background(), b.rows); err != nil {
		return fmt.Errorf("pipeline: batched step of %d rows: %w", len(b.rows), err)
	}
	if _, err := b.prog.Logits(b.logits); err != nil {
		return fmt.Errorf("pipeline: batched logits: %w", err)
	}
	return nil
}

// decodeStep runs the last token of history (the only one sl's cache lacks)
// in the next round and writes its logits into logits. req is the
// session's reusable request.
func (b *batcher) decodeStep(sl *slot, history []int, logits []float32, req *stepReq) error {
	pos := len(history) - 1
	*req = stepReq{row: gpu.Row{Token: int32(history[pos]), Pos: pos, Seq: sl.seq, Adapter: sl.adapter}, logits: logits, done: req.done}
	b.reqs <- req
	<-req.done
	if req.err != nil {
		// The cache may hold part of the step: trust none of it.
		sl.distrust(pos)
		return req.err
	}
	sl.cached = append(sl.cached[:pos], history[pos])
	return nil
}

// batchRound is the stepper of a generation on a model that batches its
// slots' decode steps: each step runs in the next round, shared with the
// other sessions decoding at once, and the host picks from the row of
// logits it gets back (host). A step the cache is not ready for (more than
// the last token missing) runs on the slot's own programs.
type batchRound struct {
	host *hostPick
	b    *batcher
	req  *stepReq // the session's reusable request
}

func (r *batchRound) next(ctx context.Context, history []int, left int) (int, error) {
	sl := r.host.sl
	if !r.host.fresh && len(sl.cached) == len(history)-1 && commonPrefix(sl.cached, history) == len(sl.cached) {
		if err := r.b.decodeStep(sl, history, r.host.row, r.req); err != nil {
			return -1, err
		}
		r.host.fresh = true
	}
	return r.host.next(ctx, history, left)
}

// close leaves the rounds.
func (r *batchRound) close(mt *Metrics) {
	r.b.leave()
	r.host.close(mt)
}
