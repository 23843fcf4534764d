//go:build cgo

package vulkan

import (
	"time"

	vk "github.com/vulkan-go/vulkan"
)

// A software device (gpu.CPU, such as lavapipe) runs its submissions on
// this machine's cores, in threads of this process that hand every
// dispatch to one another (lavapipe: its queue thread to the compute
// pool's threads and back). A waiter blocked in vkWaitForFences for a
// whole submission lets the cores go idle between those handoffs, and
// each handoff then waits for an idle core to wake up: on a 2-core VM
// (lavapipe, stories260K) a submission of 8 decode steps ran 5-10% longer
// per step than 8 one-step submissions while using less CPU time, and
// device sampling (8 steps a submission) decoded slower than host
// sampling (one). The WebGPU backend, on the same driver, polls its
// device (pollUntil) and shows no such gap; so does this wait on a
// software device: it polls the fence, sleeping from firstPoll, doubling
// up to maxPoll, between polls. A hardware device's waiter keeps
// blocking: there the work runs elsewhere and polling would only cost
// CPU time.
const (
	firstPoll = 5 * time.Microsecond
	maxPoll   = 100 * time.Microsecond
)

// pollFence waits up to limit for a fence: status returns its status
// (vkGetFenceStatus), sleep sleeps, now reads the clock. It returns the
// first status that is not vk.NotReady, or vk.Timeout once limit has
// passed.
func pollFence(limit time.Duration, status func() vk.Result, sleep func(time.Duration), now func() time.Time) vk.Result {
	start := now()
	for delay := firstPoll; ; delay = min(2*delay, maxPoll) {
		if r := status(); r != vk.NotReady {
			return r
		}
		left := limit - now().Sub(start)
		if left <= 0 {
			return vk.Timeout
		}
		sleep(min(delay, left))
	}
}
