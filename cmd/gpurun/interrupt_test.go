package main

import (
	"context"
	"testing"
	"time"
)

// TestInterruptWatchdog: after an interrupt, a command still loading a
// model ends the process (exit is called); one that returned, one past
// its load (generation ends on the context by itself: run prints the text
// so far, chat goes on) and one never interrupted do not.
func TestInterruptWatchdog(t *testing.T) {
	run := func(interrupt, returns, loading bool) bool {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan struct{})
		exited := make(chan struct{})
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			interruptWatchdog(ctx, done, time.Millisecond, func() bool { return loading }, func() { close(exited) })
		}()
		if returns {
			close(done)
		}
		if interrupt {
			cancel()
		}
		if !returns && !interrupt {
			close(done)
		}
		<-ended
		select {
		case <-exited:
			return true
		default:
			return false
		}
	}
	if !run(true, false, true) {
		t.Error("an interrupted load that did not return did not end the process")
	}
	if run(true, false, false) {
		t.Error("an interrupted generation (no load under way) ended the process")
	}
	if run(false, false, true) {
		t.Error("a command that returned without an interrupt ended the process")
	}
	if run(false, true, true) {
		t.Error("a command that returned ended the process")
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
