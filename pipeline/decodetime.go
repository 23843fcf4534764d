package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpurun/gpurun/gpu"
)

// DecodeTime is the device's share of greedy decode steps (Model.TimeDecode).
type DecodeTime struct {
	Steps int // decode steps that ran
	// Submissions is how many submissions they took, as a generation's:
	// Options.StepsPerSubmit steps each, or in windows (gpu.Caps.ReadAhead)
	// growing to that from one step (gpu.Program.StartSteps).
	Submissions int
	// Device is the device time of those submissions, from timestamps
	// before the first dispatch and after the last of each.
	Device time.Duration
	// Wall is the host's clock around those submissions (each submit, wait
	// and read of the ids, and the read of its two timestamps): beside
	// Device, a host share measured in the same moment as the device's,
	// which a busy machine's swings between runs do not blur, though one
	// timestamp read per submission larger than a generation's. Where
	// the backend reads ahead (gpu.Caps.ReadAhead) the steps run in
	// windows as a generation's do (windowStep), each submission with
	// timestamps of its own, and Wall runs from each window's start to
	// its last ids, its timestamps read after: Wall - Device is then the
	// device's idle time between and around the submissions, which the
	// queued submissions shrink to a window's first submit and last read.
	Wall time.Duration
}

// PerStep is the device time of one step.
func (d DecodeTime) PerStep() time.Duration {
	if d.Steps == 0 {
		return 0
	}
	return d.Device / time.Duration(d.Steps)
}

// TimeDecode runs the prompt and then steps greedy decode steps as a
// generation does (the device picks, Options.StepsPerSubmit steps per
// submission) with device timestamps around each submission, where the
// backend reports gpu.Caps.Timestamps and picks on the device (else
// gpu.ErrUnsupported). Set against the wall time of a generation's decode
// steps (1 / its decode rate), the device time per step leaves the host's
// share: submissions, waits, reads and bookkeeping, which no faster device
// removes. The steps run twice, the first pass untimed: it records the
// command lists of the timed submissions (their first use, which a
// generation's steady state does not pay: on the page each list's bind
// groups cost crossings into JavaScript, a second and more for 64 steps
// under load). Like Profile it overwrites the KV cache of the slot it
// takes.
func (m *Model) TimeDecode(ctx context.Context, prompt []int, steps int) (DecodeTime, error) {
	if len(prompt) == 0 || steps < 1 || len(prompt)+steps > m.maxCache {
		return DecodeTime{}, fmt.Errorf("%w: timed decode: %d prompt tokens and %d steps for a cache of %d", ErrPrompt, len(prompt), steps, m.maxCache)
	}
	if !m.caps.Timestamps {
		return DecodeTime{}, fmt.Errorf("pipeline: timed decode: the %s backend keeps no device timestamps: %w", m.backend.Info().Backend, gpu.ErrUnsupported)
	}
	sl, err := m.acquire(ctx, nil)
	if err != nil {
		return DecodeTime{}, err
	}
	defer m.release(sl)
	sl.cut(0) // whatever happens, the cache no longer holds a known prefix
	defer sl.cut(0)
	if sl.argmax == nil {
		return DecodeTime{}, fmt.Errorf("pipeline: timed decode: the %s backend does not pick tokens on the device: %w", m.backend.Info().Backend, gpu.ErrUnsupported)
	}
	if _, err := m.timeSteps(ctx, sl, prompt, steps); err != nil {
		return DecodeTime{}, err
	}
	return m.timeSteps(ctx, sl, prompt, steps)
}

// timeSteps is one pass of TimeDecode on sl, from an empty cache.
func (m *Model) timeSteps(ctx context.Context, sl *slot, prompt []int, steps int) (DecodeTime, error) {
	sl.cut(0)
	if len(prompt) > 1 {
		// The logits are read (and dropped) so that the prompt's work is
		// done before the clock starts: a device whose Run returns before
		// its work ends (the page's WebGPU: its queue is only awaited by
		// reads) would put the prompt into the first submission's wall time
		// (the page's host time per step came out milliseconds too high).
		if _, err := m.feed(ctx, sl, prompt[:len(prompt)-1], make([]float32, m.cfg.VocabSize)); err != nil {
			return DecodeTime{}, fmt.Errorf("pipeline: timed decode: %w", err)
		}
	}
	most := 1
	if sl.argmax.multiStep {
		most = m.stepsPerSubmit
	}
	var out DecodeTime
	token, pos := int32(prompt[len(prompt)-1]), len(prompt)-1
	if most > 1 && m.caps.ReadAhead && !m.noWindows {
		switch out, err := m.timeWindows(ctx, sl, token, pos, steps, most); {
		case err == nil:
			return out, nil
		case !errors.Is(err, gpu.ErrUnsupported):
			return DecodeTime{}, err
		}
	}
	for out.Steps < steps {
		n := min(most, steps-out.Steps)
		start := time.Now()
		m.lockDevice()
		ids, nanos, err := sl.argmax.prog.TimeSteps(ctx, token, pos, n, nil)
		m.unlockDevice()
		out.Wall += time.Since(start)
		if err != nil {
			return DecodeTime{}, fmt.Errorf("pipeline: timed decode: %d steps at position %d: %w", n, pos, err)
		}
		if len(ids) == 0 {
			return DecodeTime{}, fmt.Errorf("pipeline: timed decode: %d steps at position %d ran none", n, pos)
		}
		out.Steps += len(ids)
		out.Submissions++
		out.Device += time.Duration(nanos)
		token, pos = ids[len(ids)-1], pos+len(ids)
	}
	return out, nil
}

// timeWindows times steps as a generation on a backend that reads ahead
// runs them (windowStep): windows of up to Caps().MaxSteps steps, most a
// submission, each submission bracketed with timestamps. Wall runs from
// each window's start to its last ids (its timestamps are read after).
func (m *Model) timeWindows(ctx context.Context, sl *slot, token int32, pos, steps, most int) (DecodeTime, error) {
	var out DecodeTime
	for out.Steps < steps {
		n := min(m.caps.MaxSteps, steps-out.Steps)
		per := min(most, n)
		start := time.Now()
		m.lockDevice()
		win, err := sl.argmax.prog.StartSteps(ctx, token, pos, n, per, nil, true)
		m.unlockDevice()
		if err != nil {
			return DecodeTime{}, fmt.Errorf("pipeline: timed decode: %d steps at position %d: %w", n, pos, err)
		}
		got := 0
		for {
			m.lockDevice()
			ids, err := win.Next(ctx)
			m.unlockDevice()
			if err != nil {
				win.Close(ctx)
				return DecodeTime{}, fmt.Errorf("pipeline: timed decode: steps at position %d: %w", pos, err)
			}
			if len(ids) == 0 {
				break
			}
			got += len(ids)
			out.Submissions++
			token = ids[len(ids)-1]
		}
		out.Wall += time.Since(start)
		m.lockDevice()
		nanos, err := win.Close(ctx)
		m.unlockDevice()
		if err != nil {
			return DecodeTime{}, fmt.Errorf("pipeline: timed decode: %w", err)
		}
		if got == 0 {
			return DecodeTime{}, fmt.Errorf("pipeline: timed decode: %d steps at position %d ran none", n, pos)
		}
		out.Steps += got
		out.Device += time.Duration(nanos)
		pos += got
	}
	return out, nil
}
