package main

import (
	"context"
	"testing"
	"time"
)

// TestInterruptWatchdog: after an interrupt, a command still loading a
// model, or closing one (waiting for the device's queued work), ends the
// process (exit is called with the phase's reason), also when that phase
// begins after the grace; one that returned, one past its load that
// returns (generation ends on the context by itself: run prints the text
// so far, chat goes on) and one never interrupted do not.
func TestInterruptWatchdog(t *testing.T) {
	const grace = time.Millisecond
	for _, tc := range []struct {
		name      string
		interrupt bool
		phase     string        // what cuttable says once phaseAt passed
		phaseAt   time.Duration // after the interrupt
		returnsAt time.Duration // the command returns (closes done); -1: before the interrupt
		exits     bool
	}{
		{"interrupted load", true, "loading", 0, time.Hour, true},
		{"close begun after the grace", true, "closing", 20 * time.Millisecond, time.Hour, true},
		{"generation overdue", true, "overdue", 40 * time.Millisecond, time.Hour, true},
		{"interrupted generation that returns", true, "", 0, 30 * time.Millisecond, false},
		{"returned before the interrupt", true, "loading", 0, -1, false},
		{"no interrupt", false, "loading", 0, 30 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan struct{})
			if tc.returnsAt < 0 {
				close(done)
			}
			cuttable := func(since time.Duration) string {
				if since >= tc.phaseAt {
					return tc.phase
				}
				return ""
			}
			exited := make(chan string, 1)
			ended := make(chan struct{})
			go func() {
				defer close(ended)
				interruptWatchdog(ctx, done, grace, cuttable, func(why string) { exited <- why })
			}()
			if tc.interrupt {
				cancel()
			}
			if tc.returnsAt >= 0 {
				select {
				case <-ended:
				case <-time.After(tc.returnsAt):
					close(done)
				}
			}
			<-ended
			select {
			case why := <-exited:
				if !tc.exits {
					t.Errorf("the process was ended (%q)", why)
				} else if why != tc.phase {
					t.Errorf("ended with %q, want %q", why, tc.phase)
				}
			default:
				if tc.exits {
					t.Error("the process was not ended")
				}
			}
		})
	}
}

// TestLoadModelCounts: loadModel counts the load while it runs.
func TestLoadModelCounts(t *testing.T) {
	var during int32
	if _, err := loadModel(func() (int, error) { during = loadsUnderWay.Load(); return 0, nil }); err != nil {
		t.Fatal(err)
	}
	if during != 1 || loadsUnderWay.Load() != 0 {
		t.Errorf("loads under way: %d during the load, %d after; want 1 and 0", during, loadsUnderWay.Load())
	}
}
