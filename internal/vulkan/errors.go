//go:build cgo

package vulkan

import (
	"errors"
	"fmt"

	vk "github.com/vulkan-go/vulkan"
)

// Errors callers can test for with errors.Is. Failures to find a driver or
// device wrap gpu.ErrNoDevice instead.
var (
	// ErrClosed reports use of a closed device.
	ErrClosed = errors.New("vulkan: device closed")
	// ErrReleased reports use of a released buffer, kernel or command list.
	ErrReleased = errors.New("vulkan: use of a released resource")
	// ErrInvalid reports a bad argument: out-of-range offsets, misaligned
	// bindings, resources of another device, wrong binding counts.
	ErrInvalid = errors.New("vulkan: invalid argument")
	// ErrTooLarge reports a buffer above the device's allocation limit or a
	// binding above maxStorageBufferRange / maxUniformBufferRange; callers
	// split big tensors into several bindings.
	ErrTooLarge = errors.New("vulkan: size exceeds a device limit")
	// ErrTimeout reports submitted work that did not finish in time (see
	// waitTimeout): a lost device, a runaway kernel, or a software driver
	// that stopped making progress.
	ErrTimeout = errors.New("vulkan: submitted work timed out")
)

// check turns a VkResult into an error naming the call.
func check(call string, res vk.Result) error {
	if res == vk.Success {
		return nil
	}
	return fmt.Errorf("vulkan: %s: %w (VkResult %d)", call, vk.Error(res), int32(res))
}
