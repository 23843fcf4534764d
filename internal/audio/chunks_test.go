package audio

import "testing"

// TestChunks: Chunks counts the chunks WhisperMel cuts the samples into,
// on both sides of the length where two chunks become three (60 s less
// 30 s of zeros' share and a frame: 959840 samples).
func TestChunks(t *testing.T) {
	for _, tc := range []struct{ n, want int }{
		{1, 2}, {959839, 2}, {959840, 3},
	} {
		if got := Chunks(tc.n); got != tc.want {
			t.Errorf("Chunks(%d) = %d, want %d", tc.n, got, tc.want)
		}
		mels, err := WhisperMel(make([]float32, tc.n), 1, Variant{})
		if err != nil {
			t.Fatal(err)
		}
		if len(mels) != tc.want {
			t.Errorf("WhisperMel of %d samples: %d chunks, want %d", tc.n, len(mels), tc.want)
		}
	}
}
