package main

import (
	"context"
	"testing"
	"time"
)

// TestInterruptWatchdog: after an interrupt, a command that does not
// return ends the process (exit is called); one that returns, or that
// runs without an interrupt, does not.
func TestInterruptWatchdog(t *testing.T) {
	run := func(interrupt, finish bool) bool {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan struct{})
		exited := make(chan struct{})
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			interruptWatchdog(ctx, done, time.Millisecond, func() { close(exited) })
		}()
		if finish {
			close(done)
		}
		if interrupt {
			cancel()
		}
		if !finish && !interrupt {
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
	if !run(true, false) {
		t.Error("a command still running after an interrupt did not end the process")
	}
	if run(false, false) {
		t.Error("a command that returned without an interrupt ended the process")
	}
	if run(false, true) {
		t.Error("a command that returned ended the process")
	}
}
