//go:build cgo

package vulkan

// hazards tracks, per command list, which buffers the commands since the
// last barrier read and wrote, so a barrier is recorded only before a
// command that depends on them: read-after-write, write-after-write or
// write-after-read on the same buffer (windows of one buffer count as the
// same buffer). Independent dispatches, like the Q, K and V projections of a
// layer, then run without a barrier between them.
//
// The first command of a list always gets a barrier: earlier submissions
// may still be running and the list cannot know what they touched.
type hazards struct {
	started bool
	read    map[*buffer]struct{}
	written map[*buffer]struct{}
}

// access records a command reading reads and writing writes and reports
// whether a full barrier must precede it.
func (h *hazards) access(reads, writes []*buffer) bool {
	barrier := !h.started
	for _, b := range reads {
		if _, ok := h.written[b]; ok {
			barrier = true
		}
	}
	for _, b := range writes {
		_, w := h.written[b]
		_, r := h.read[b]
		if w || r {
			barrier = true
		}
	}
	if barrier || h.read == nil {
		h.started = true
		h.read = map[*buffer]struct{}{}
		h.written = map[*buffer]struct{}{}
	}
	for _, b := range reads {
		h.read[b] = struct{}{}
	}
	for _, b := range writes {
		h.written[b] = struct{}{}
	}
	return barrier
}
