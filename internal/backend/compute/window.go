package compute

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
)

// Windows of decode steps (gpu.Program.StartSteps, Caps().ReadAhead).
// RunSteps writes the step tensor, submits n steps, and waits for their
// ids: the device then idles while the host reads them back and submits
// again, which on the page is a round trip through the browser's GPU
// process (3-4 ms a submission, where native reads take microseconds). A
// window writes the step tensor once for all its steps (Steps up to
// shaders.MaxSteps) and submits the n-step list again and again: each
// submission continues from the step tensor the one before it left (the
// picking kernel, or the advance kernel at the step's index in the
// window, stores the next id at ids[count] and moves the position on),
// and each is followed by a copy of the step tensor into a map-readable
// buffer of its own (gpu.Device.SubmitRead), which the host maps while
// the next submissions run. A stop id ends the work on the device as in
// RunSteps: the submissions queued after it run no rows. The ids the
// device picks are those RunSteps would pick, step for step: the same
// kernels on the same inputs (each submission's list is the one of its
// span, lenlists.go, which computes what the whole one does).
//
// A window's submissions grow to perSubmit steps (windowEnds): 1, 2, 4,
// ... A submission is recorded before the device can start it (its
// dispatches encoded by the host; on the page, the driver's command
// buffer recorded by the browser's GPU process when it gets the submit),
// and at a window's start nothing else runs: a first submission of one
// step lets the device start after one step's recording instead of
// perSubmit's, and each larger one is recorded while the ones before it
// run.

// windowAhead is how many submissions of perSubmit steps a window keeps
// queued behind the one the host reads (stepWindow.fill): while the host
// reads one, those run. The device idles when the read's round trip and
// the next submit take longer than the device time queued behind the
// read: on the page that is 4-6 ms (a round trip of 3-4 ms and a
// queue.submit of 1-2 ms), which two submissions behind cover for 8-step
// submissions of 0.3 ms steps (a 110M model on a desktop GPU), where one
// would need 0.7 ms steps. The window's first, smaller submissions are
// queued as many as that takes (1, 2, 4, 8 and 8 for perSubmit 8). A
// stop mid-window discards the submissions queued past it: after a
// device stop they run no rows; after a host stop (a stop string) they
// run fewer than 3 * StepsPerSubmit steps whose ids are dropped.
const windowAhead = 2

// stepWindow is a window StartSteps started (gpu.StepWindow).
type stepWindow struct {
	p      *program
	out    fusion.Buf
	pos    int   // position of the window's first step
	per    int   // steps of a full submission
	ends   []int // each submission's end: its last step's index in the window + 1 (windowEnds)
	timed  bool
	next   int           // the next submission to queue
	queued []queuedSteps // submissions queued and not yet read, in order
	count  int           // ids handed out
	over   bool          // the device reported the window's end or a stop
	failed error         // a read that failed: the window is over
	closed bool
}

// queuedSteps is a queued submission of a window and its read.
type queuedSteps struct {
	j    int // its index in the window
	read gpu.PendingRead
	n    int // bytes read: the step tensor's header and ids up to the submission's last
}

// StartSteps (gpu.Program, Caps().ReadAhead): see stepWindow.
func (p *program) StartSteps(ctx context.Context, token int32, pos, steps, perSubmit int, stops []int32, timed bool) (gpu.StepWindow, error) {
	if !p.b.devCaps.ReadAhead {
		return nil, fmt.Errorf("compute: decode step windows: the device does not read ahead: %w", gpu.ErrUnsupported)
	}
	if timed && !p.b.devCaps.Timestamps {
		return nil, fmt.Errorf("compute: timed decode step windows: the device keeps no timestamps: %w", gpu.ErrUnsupported)
	}
	out, err := p.checkSteps(ctx, token, pos, steps, stops)
	if err != nil {
		return nil, err
	}
	if len(p.states) > 0 {
		// A submission queued past a stop would move the recurrent states
		// on, and states do not roll back.
		return nil, fmt.Errorf("%w: a window of decode steps of a program with recurrent states: %w", ErrRun, gpu.ErrUnsupported)
	}
	if perSubmit < 1 || perSubmit > steps {
		return nil, fmt.Errorf("%w: %d steps a submission in a window of %d", ErrRun, perSubmit, steps)
	}
	st := p.encodeStep(stepWords{Pos: uint32(pos), Rows: 1, Tokens: []uint32{uint32(token)}, Steps: uint32(steps), Stops: stops})
	p.lastT = 0
	if err := p.b.dev.Write(p.step, 0, st); err != nil {
		return nil, fmt.Errorf("compute: start steps: %w", err)
	}
	w := &stepWindow{p: p, out: out, pos: pos, per: perSubmit, ends: windowEnds(steps, perSubmit), timed: timed}
	if err := w.fill(); err != nil {
		_, _ = w.Close(ctx)
		return nil, err
	}
	return w, nil
}

// windowEnds is where a window's submissions end, each ends[j] steps
// into the window: the first runs one step, each next twice the one
// before up to perSubmit (1, 2, 4, 8, 8, ... for perSubmit 8), the last
// what is left of steps.
func windowEnds(steps, perSubmit int) []int {
	var ends []int
	for end, n := 0, 1; end < steps; n = min(2*n, perSubmit) {
		end = min(end+n, steps)
		ends = append(ends, end)
	}
	return ends
}

// submissions is how many submissions the window takes.
func (w *stepWindow) submissions() int { return len(w.ends) }

// fill queues the window's next submissions until windowAhead *
// perSubmit steps are queued behind the oldest one not yet read, or none
// is left.
func (w *stepWindow) fill() error {
	for w.next < w.submissions() && (len(w.queued) == 0 || w.ends[w.next-1]-w.ends[w.queued[0].j] < windowAhead*w.per) {
		if err := w.queue(); err != nil {
			return err
		}
	}
	return nil
}

// queue submits the window's next submission with its read.
func (w *stepWindow) queue() error {
	j := w.next
	first := 0
	if j > 0 {
		first = w.ends[j-1]
	}
	n := w.ends[j] - first
	stampAt := -1
	if w.timed {
		stampAt = 2 * j
	}
	p := w.p
	cmds, err := p.stepListAt(w.out, n, p.span(w.pos+first+n), first, stampAt)
	if err != nil {
		return fmt.Errorf("compute: window steps %d..%d: %w", first, first+n-1, err)
	}
	bytes := shaders.DecodeStepHeader + 4*(first+n)
	read, err := p.b.dev.SubmitRead(p.step, 0, bytes, cmds)
	if err != nil {
		return fmt.Errorf("compute: window steps %d..%d: %w", first, first+n-1, err)
	}
	w.queued = append(w.queued, queuedSteps{j: j, read: read, n: bytes})
	w.next++
	return nil
}

// Next (gpu.StepWindow) reads the oldest queued submission's step tensor
// and, unless the window is over, queues the next submissions (fill)
// before it returns the new ids.
func (w *stepWindow) Next(ctx context.Context) ([]int32, error) {
	if w.closed {
		return nil, fmt.Errorf("%w: window closed", ErrRun)
	}
	if w.failed != nil {
		return nil, w.failed
	}
	if w.over || len(w.queued) == 0 {
		return nil, nil
	}
	q := w.queued[0]
	w.queued = w.queued[1:]
	raw := make([]byte, q.n)
	if err := q.read.Wait(ctx, raw); err != nil {
		w.failed = fmt.Errorf("compute: window steps: %w", err)
		return nil, w.failed
	}
	got, err := decodeStep(raw)
	if err != nil {
		w.failed = err
		return nil, err
	}
	last := w.ends[q.j]
	if int(got.Count) < w.count || int(got.Count) > last || got.ValidLen != uint32(w.pos)+got.Count ||
		(got.Done == shaders.StepRunning && int(got.Count) != last) {
		w.failed = fmt.Errorf("compute: window steps: the device reports %d ids (done %d) and %d valid positions after the steps up to %d of a window of %d from %d",
			got.Count, got.Done, got.ValidLen, last, w.ends[len(w.ends)-1], w.pos)
		return nil, w.failed
	}
	ids := make([]int32, int(got.Count)-w.count)
	for i := range ids {
		ids[i] = int32(got.IDs[w.count+i])
	}
	w.count = int(got.Count)
	if got.Done != shaders.StepRunning {
		w.over = true
		return ids, nil
	}
	if err := w.fill(); err != nil {
		w.failed = err
		return ids, err
	}
	return ids, nil
}

// Close (gpu.StepWindow) waits for the reads still queued and, for a
// timed window, reads its submissions' timestamps. Once ctx ended, each
// queued read is given back without its bytes (gpu.PendingRead.Wait with
// an ended ctx returns at once): a cancelled generation does not wait
// for the submissions still queued (seconds each on a software device).
// The device still runs them; the next write of the step tensor or
// submission of the program is ordered after them by the device.
func (w *stepWindow) Close(ctx context.Context) (uint64, error) {
	if w.closed {
		return 0, nil
	}
	w.closed = true
	var errs []error
	for _, q := range w.queued {
		if err := q.read.Wait(ctx, make([]byte, q.n)); err != nil {
			errs = append(errs, err)
		}
	}
	w.queued = nil
	// The picked buffer holds whichever step ran last, perhaps one past
	// the ids taken: no Logits until the next run.
	w.p.lastT = 0
	if err := ctx.Err(); err != nil && len(errs) > 0 {
		return 0, fmt.Errorf("compute: window steps: %d queued submissions left to the device: %w", len(errs), err)
	}
	if err := errors.Join(errs...); err != nil {
		return 0, fmt.Errorf("compute: window steps: %w", err)
	}
	if !w.timed || w.next == 0 {
		return 0, nil
	}
	ts, err := w.p.b.dev.ReadTimestamps(2 * w.next)
	if err != nil {
		return 0, fmt.Errorf("compute: timed window steps: %w", err)
	}
	var nanos uint64
	for j := range w.next {
		if ts[2*j+1] < ts[2*j] {
			return 0, fmt.Errorf("compute: timed window steps: the device's timestamps run backwards (%d, then %d)", ts[2*j], ts[2*j+1])
		}
		nanos += ts[2*j+1] - ts[2*j]
	}
	return nanos, nil
}
