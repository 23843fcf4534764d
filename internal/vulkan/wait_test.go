//go:build cgo

package vulkan

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	vk "github.com/vulkan-go/vulkan"
)

// TestWaitSubmissions drives waitSubmissions with scripted fence results
// and CPU times: each submission is waited for in order with its own
// limit, and a software driver's submission is waited for past the limit
// only while the process works.
func TestWaitSubmissions(t *testing.T) {
	type call struct {
		i     int
		limit time.Duration
	}
	for _, tc := range []struct {
		name     string
		n        int
		software bool
		results  map[int][]vk.Result // per submission, in turn; Success once exhausted
		cpuStep  time.Duration       // CPU time the process uses per wait
		cpuKnown bool
		calls    int // waits made
		timeout  string
	}{
		{name: "all finish", n: 3, calls: 3},
		{name: "hardware hang", n: 3, results: map[int][]vk.Result{1: {vk.Timeout}}, cpuStep: time.Minute, cpuKnown: true,
			calls: 2, timeout: "submission 2 of 3"},
		{name: "software busy", n: 2, software: true, results: map[int][]vk.Result{0: {vk.Timeout, vk.Timeout, vk.Timeout}},
			cpuStep: waitTimeout, cpuKnown: true, calls: 5},
		{name: "software idle", n: 2, software: true, results: map[int][]vk.Result{0: {vk.Timeout, vk.Timeout, vk.Timeout}},
			cpuStep: waitTimeout / 20, cpuKnown: true, calls: 2, timeout: "no progress"},
		{name: "software, cpu time unknown", n: 1, software: true, results: map[int][]vk.Result{0: {vk.Timeout, vk.Timeout}},
			cpuStep: waitTimeout, calls: 2, timeout: "no progress"},
		{name: "software busy forever", n: 1, software: true, results: map[int][]vk.Result{0: repeat(vk.Timeout, 100)},
			cpuStep: waitTimeout, cpuKnown: true, calls: int(maxSoftwareWait / waitTimeout), timeout: "still working"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls []call
			var cpu time.Duration
			cpuReads, timeouts := 0, 0
			left := map[int][]vk.Result{}
			for k, v := range tc.results {
				left[k] = append([]vk.Result(nil), v...)
			}
			wait := func(i int, limit time.Duration) vk.Result {
				calls = append(calls, call{i, limit})
				cpu += tc.cpuStep
				if r := left[i]; len(r) > 0 {
					left[i] = r[1:]
					if r[0] == vk.Timeout {
						timeouts++
					}
					return r[0]
				}
				return vk.Success
			}
			cpuTime := func() (time.Duration, bool) { cpuReads++; return cpu, tc.cpuKnown }
			_, err := waitSubmissions(context.Background(), tc.n, wait, tc.software, cpuTime)
			if len(calls) != tc.calls {
				t.Fatalf("%d waits %v, want %d", len(calls), calls, tc.calls)
			}
			for k, c := range calls {
				if c.limit != waitTimeout {
					t.Errorf("wait %d: limit %v, want %v", k, c.limit, waitTimeout)
				}
				if k > 0 && c.i < calls[k-1].i {
					t.Errorf("wait %d for submission %d after submission %d: out of order", k, c.i, calls[k-1].i)
				}
			}
			// The CPU time is read only after a software driver's timeout.
			if !tc.software && cpuReads != 0 || tc.software && cpuReads > timeouts {
				t.Errorf("cpu time read %d times (%d timeouts, software %v)", cpuReads, timeouts, tc.software)
			}
			if tc.timeout == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), tc.timeout) {
				t.Fatalf("error %v, want ErrTimeout saying %q", err, tc.timeout)
			}
		})
	}
	// A failure other than a timeout (a lost device) is reported as such.
	_, err := waitSubmissions(context.Background(), 2, func(int, time.Duration) vk.Result { return vk.ErrorDeviceLost }, true,
		func() (time.Duration, bool) { return 0, true })
	if err == nil || errors.Is(err, ErrTimeout) {
		t.Fatalf("device lost: %v", err)
	}
}

func repeat(r vk.Result, n int) []vk.Result {
	out := make([]vk.Result, n)
	for i := range out {
		out[i] = r
	}
	return out
}

// TestWaitSubmissionsCancel: with a context that can be cancelled, a wait
// polls in slices of pollSlice and returns the context's error once it is
// done, counting the submissions that finished before.
func TestWaitSubmissionsCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	polls := 0
	wait := func(i int, limit time.Duration) vk.Result {
		if limit > pollSlice {
			t.Errorf("wait of %v with a cancellable context, want at most %v", limit, pollSlice)
		}
		if i == 0 {
			return vk.Success
		}
		if polls++; polls == 3 {
			cancel()
		}
		return vk.Timeout
	}
	finished, err := waitSubmissions(ctx, 2, wait, false, func() (time.Duration, bool) { return 0, false })
	if !errors.Is(err, context.Canceled) || finished != 1 || polls != 3 {
		t.Errorf("finished %d, error %v after %d polls; want 1, cancellation after 3", finished, err, polls)
	}
}
