//go:build unix

package main

import (
	"syscall"
	"testing"
)

// mkfifo makes a FIFO at path.
func mkfifo(t *testing.T, path string) error {
	t.Helper()
	return syscall.Mkfifo(path, 0o644)
}
