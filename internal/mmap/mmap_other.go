//go:build !unix && !windows

package mmap

import (
	"fmt"
	"os"
)

// Open reads the whole file: platforms without mmap get a heap copy with the
// same read-only contract.
func Open(path string) (*Map, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mmap: %w", err)
	}
	return &Map{data: data, closer: func([]byte) error { return nil }}, nil
}
