//go:build cgo

package vulkan

import (
	"testing"
	"time"

	vk "github.com/vulkan-go/vulkan"
)

// TestPollFence drives pollFence with scripted fence statuses and a fake
// clock that only sleeping advances: it returns the first status that is
// not NotReady (success or an error, as it is), sleeps from firstPoll
// doubling up to maxPoll between polls, and times out once limit has
// passed, its last sleep cut to what is left.
func TestPollFence(t *testing.T) {
	for _, tc := range []struct {
		name     string
		notReady int // polls that report NotReady before final
		final    vk.Result
		limit    time.Duration
		want     vk.Result
		sleeps   []time.Duration
	}{
		{name: "signaled", final: vk.Success, limit: time.Second, want: vk.Success},
		{name: "after polls", notReady: 7, final: vk.Success, limit: time.Second, want: vk.Success,
			sleeps: []time.Duration{5 * time.Microsecond, 10 * time.Microsecond, 20 * time.Microsecond,
				40 * time.Microsecond, 80 * time.Microsecond, 100 * time.Microsecond, 100 * time.Microsecond}},
		{name: "device lost", notReady: 2, final: vk.ErrorDeviceLost, limit: time.Second, want: vk.ErrorDeviceLost,
			sleeps: []time.Duration{5 * time.Microsecond, 10 * time.Microsecond}},
		{name: "timeout", notReady: 1000, final: vk.Success, limit: 50 * time.Microsecond, want: vk.Timeout,
			sleeps: []time.Duration{5 * time.Microsecond, 10 * time.Microsecond, 20 * time.Microsecond, 15 * time.Microsecond}},
		{name: "zero limit", notReady: 1000, final: vk.Success, limit: 0, want: vk.Timeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := time.Unix(0, 0)
			polls := 0
			var sleeps []time.Duration
			got := pollFence(tc.limit, func() vk.Result {
				polls++
				if polls <= tc.notReady {
					return vk.NotReady
				}
				return tc.final
			}, func(d time.Duration) {
				sleeps = append(sleeps, d)
				clock = clock.Add(d)
			}, func() time.Time { return clock })
			if got != tc.want {
				t.Errorf("pollFence = %v, want %v", got, tc.want)
			}
			if len(sleeps) != len(tc.sleeps) {
				t.Fatalf("sleeps %v, want %v", sleeps, tc.sleeps)
			}
			for i := range sleeps {
				if sleeps[i] != tc.sleeps[i] {
					t.Fatalf("sleeps %v, want %v", sleeps, tc.sleeps)
				}
			}
		})
	}
}
