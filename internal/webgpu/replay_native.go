//go:build cgo && !js

package webgpu

// replay is nothing natively: wgpu-native's calls cost no crossing.
type replay struct{}

// replayAhead is nothing natively: encoding costs no crossing to overlap.
type replayAhead struct{}

// submitReplay leaves every submission to Submit's generic path.
func submitReplay(*Device, []*commands) (bool, error) { return false, nil }

// readReplay leaves every read to read's generic path.
func readReplay(*Device, *buffer, int64, []byte) (bool, error) { return false, nil }

// pageStamps is nothing natively: a timestamp read costs no round trip.
type pageStamps struct{}

// noteSubmit has nothing to note natively.
func noteSubmit(*Device, []*commands) {}

// cachedTimestamps: none natively.
func cachedTimestamps(*Device, int) ([]uint64, bool) { return nil, false }

// writeBuffer is the queue's WriteBuffer. d.mu is held.
func writeBuffer(d *Device, wb *buffer, off int64, data []byte) error {
	return d.queue.WriteBuffer(wb.b, uint64(off), data)
}
