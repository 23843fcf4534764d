package testmodels

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// GGUFWithString writes a copy of the GGUF file at path with one more
// string metadata entry, key = value, and returns its path. The entry goes
// first, followed by a padding entry ("gpurun.test.padding") that makes the
// two a multiple of 32 bytes (GGUF's default alignment), so every later
// offset moves by that multiple and the tensor data stays aligned.
func GGUFWithString(t testing.TB, path, key, value string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) < 24 || string(data[:4]) != "GGUF" {
		t.Fatalf("%s is not a GGUF file", path)
	}
	kv := ggufString(nil, key, value)
	const padKey = "gpurun.test.padding"
	pad := 32 - (len(kv)+len(ggufString(nil, padKey, "")))%32
	kv = ggufString(kv, padKey, strings.Repeat(" ", pad%32))
	out := append(append([]byte(nil), data[:24]...), kv...)
	out = append(out, data[24:]...)
	binary.LittleEndian.PutUint64(out[16:], binary.LittleEndian.Uint64(data[16:])+2)
	dst := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(dst, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// ggufString appends a string metadata entry.
func ggufString(b []byte, key, value string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.LittleEndian.AppendUint32(b, 8) // string
	b = binary.LittleEndian.AppendUint64(b, uint64(len(value)))
	return append(b, value...)
}
