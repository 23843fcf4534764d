package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/gpurun/gpurun/gpu"
)

// windowStep is the stepper of a multi-step generation on a backend that
// reads ahead (gpu.Caps.ReadAhead): a window of up to Caps().MaxSteps
// steps (no more than the generation may still produce and the cache
// holds) runs as multiStep's submissions, but the device continues each
// submission from its own step tensor and the next one is queued before
// the host reads one (gpu.Program.StartSteps), so the read's
// round trip (on the page, through the browser's GPU process) overlaps
// the device's work instead of idling it. The ids are multiStep's, one for
// one: the same steps on the same inputs, a device stop id ending the
// work on the device. A stop the host finds (a stop string, a stop id
// past the device's, the consumer) ends the generation mid-window: close
// then waits out the submissions still queued, whose steps wrote cache
// positions past the ids taken, which the slot's cached tokens do not
// claim. Where the program cannot run windows (recurrent states), the
// generation goes on as multiStep.
type windowStep struct {
	multi *multiStep
	win   gpu.StepWindow  // the window running, nil between windows
	ctx   context.Context // the generation's, which started win: closing it after a cancel waits for nothing
	tail  int             // the token the window's next step runs (its last id handed to the cache's bookkeeping)
	off   bool            // the program runs no windows: multiStep steps
}

func (w *windowStep) next(ctx context.Context, history []int, left int) (int, error) {
	s := w.multi
	d := s.single
	if len(s.queue) == 0 && !d.host.fresh && !w.off {
		if err := w.fill(ctx, history, left); err != nil {
			return -1, err
		}
	}
	if len(s.queue) > 0 {
		id := s.queue[0]
		s.queue = s.queue[1:]
		d.picked++
		return id, nil
	}
	return s.next(ctx, history, left)
}

// fill queues the ids of the window's next submission, starting a window
// where none runs; it leaves the queue empty where no window can run.
func (w *windowStep) fill(ctx context.Context, history []int, left int) error {
	s := w.multi
	m, sl := s.single.host.m, s.single.host.sl
	for range 2 {
		if w.win == nil {
			if ok, err := w.start(ctx, history, left); !ok {
				return err
			}
		}
		m.lockDevice()
		ids, err := w.win.Next(ctx)
		m.unlockDevice()
		if err != nil {
			w.end()
			return fmt.Errorf("pipeline: decode steps at position %d: %w", len(history)-1, err)
		}
		if len(ids) == 0 {
			// The window is over: the next one starts from history.
			if err := w.end(); err != nil {
				return err
			}
			continue
		}
		out := make([]int, len(ids))
		for i, v := range ids {
			if v < 0 || int(v) >= m.cfg.VocabSize {
				w.end()
				return fmt.Errorf("%w: %d for a vocabulary of %d", ErrDeviceID, v, m.cfg.VocabSize)
			}
			out[i] = int(v)
		}
		// Every step but the submission's last ran the id the one before
		// it picked; its first ran tail.
		sl.cached = append(sl.cached, w.tail)
		sl.cached = append(sl.cached, out[:len(out)-1]...)
		w.tail = out[len(out)-1]
		s.queue = out
		return nil
	}
	return nil
}

// start starts a window from the last token of history: ok is false
// (and nothing ran) where fewer than two steps fit, the cache does not
// hold the rest of history, or the program runs no windows.
func (w *windowStep) start(ctx context.Context, history []int, left int) (ok bool, err error) {
	s := w.multi
	m, sl := s.single.host.m, s.single.host.sl
	nc := len(history)
	n := min(m.caps.MaxSteps, m.maxCache-nc+1, left)
	if n < 2 || nc == 0 || len(sl.cached) != nc-1 || !slices.Equal(sl.cached, history[:nc-1]) {
		return false, nil
	}
	m.lockDevice()
	win, err := s.single.prog.prog.StartSteps(ctx, int32(history[nc-1]), nc-1, n, min(s.most, n), s.stops, false)
	m.unlockDevice()
	if errors.Is(err, gpu.ErrUnsupported) {
		w.off = true
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pipeline: %d decode steps at position %d: %w", n, nc-1, err)
	}
	w.win, w.tail, w.ctx = win, history[nc-1], ctx
	return true, nil
}

// end closes the window running, if any.
func (w *windowStep) end() error {
	if w.win == nil {
		return nil
	}
	m := w.multi.single.host.m
	m.lockDevice()
	_, err := w.win.Close(w.ctx)
	m.unlockDevice()
	w.win = nil
	if err != nil {
		return fmt.Errorf("pipeline: decode step window: %w", err)
	}
	return nil
}

func (w *windowStep) close(mt *Metrics) {
	_ = w.end()
	w.multi.close(mt)
}
