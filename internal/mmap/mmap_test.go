package mmap

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"small", []byte("hello, mapped world")},
		{"pages", bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7}, 3000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name)
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			m, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(m.Bytes(), tc.data) || m.Len() != len(tc.data) {
				t.Fatalf("mapped %d bytes, want %d matching the file", m.Len(), len(tc.data))
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			if err := m.Close(); !errors.Is(err, ErrClosed) {
				t.Fatalf("second Close: %v, want ErrClosed", err)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{filepath.Join(dir, "missing"), dir} {
		if m, err := Open(path); err == nil {
			m.Close()
			t.Errorf("Open(%s) succeeded", path)
		}
	}
	var nilMap *Map
	if err := nilMap.Close(); err != nil {
		t.Errorf("nil Close: %v", err)
	}
}
