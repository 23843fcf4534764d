// Package mmap maps a file read-only into memory so model weights can be used
// in place without copying them onto the Go heap.
package mmap

import "errors"

// ErrClosed is returned by Close on a Map that was already closed.
var ErrClosed = errors.New("mmap: already closed")

// Map is a read-only view of a whole file. The bytes stay valid until Close;
// touching them afterwards faults (unix) or reads stale data (fallback), so
// callers must not keep slices of Bytes past Close.
type Map struct {
	data   []byte
	closer func([]byte) error
}

// Bytes returns the mapped file contents. It must not be written to.
func (m *Map) Bytes() []byte { return m.data }

// Len is the size of the mapped file in bytes.
func (m *Map) Len() int { return len(m.data) }

// Close releases the mapping. It is safe to call on a nil Map.
func (m *Map) Close() error {
	if m == nil {
		return nil
	}
	if m.closer == nil {
		return ErrClosed
	}
	c, d := m.closer, m.data
	m.closer, m.data = nil, nil
	return c(d)
}
