package gguf

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// reader is a bounds-checked little-endian cursor over the file bytes. Every
// read fails with io.ErrUnexpectedEOF instead of running past the end, so a
// count read from the file can be checked against remaining() before anything
// is allocated for it.
type reader struct {
	data []byte
	off  int
}

func (r *reader) remaining() int { return len(r.data) - r.off }

func (r *reader) eof(what string, n uint64) error {
	return fmt.Errorf("%w: %w: %s needs %d bytes at offset %d, %d left", ErrFormat, io.ErrUnexpectedEOF, what, n, r.off, r.remaining())
}

// bytes returns the next n bytes (aliasing the input) and advances.
func (r *reader) bytes(n uint64, what string) ([]byte, error) {
	if n > uint64(r.remaining()) {
		return nil, r.eof(what, n)
	}
	b := r.data[r.off : r.off+int(n) : r.off+int(n)]
	r.off += int(n)
	return b, nil
}

func (r *reader) u8(what string) (uint8, error) {
	b, err := r.bytes(1, what)
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

func (r *reader) u32(what string) (uint32, error) {
	b, err := r.bytes(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (r *reader) u64(what string) (uint64, error) {
	b, err := r.bytes(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// str reads a GGUF string: uint64 byte length, then the bytes (no NUL).
func (r *reader) str(what string) ([]byte, error) {
	n, err := r.u64(what + " length")
	if err != nil {
		return nil, err
	}
	return r.bytes(n, what)
}

// count reads a uint64 element count and checks that count elements of at
// least minSize bytes each fit in what is left of the file.
func (r *reader) count(what string, minSize int) (int, error) {
	n, err := r.u64(what)
	if err != nil {
		return 0, err
	}
	if n > uint64(r.remaining()/minSize) {
		return 0, fmt.Errorf("%w: %w: %s %d cannot fit in the %d bytes left", ErrFormat, io.ErrUnexpectedEOF, what, n, r.remaining())
	}
	return int(n), nil
}

// f32 decodes a little-endian binary32.
func f32(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }
