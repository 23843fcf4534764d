package main

import (
	"slices"
	"testing"
)

func TestLlamaCacheFlags(t *testing.T) {
	got := llamaCacheFlags([]string{"run", "m.gguf", "-ctk", "q8_0", "-ctv=q4_0", "--ctk", "q4_0", "-p", "-ctk", "--", "-ctv"})
	want := []string{"run", "m.gguf", "--ctk", "q8_0", "--ctv=q4_0", "--ctk", "q4_0", "-p", "--ctk", "--", "-ctv"}
	if !slices.Equal(got, want) {
		t.Errorf("%q\nwant %q", got, want)
	}
}
