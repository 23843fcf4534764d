package compute

import "testing"

func TestLaneCount(t *testing.T) {
	for _, tc := range []struct {
		chunks, max, want int
		why               string
	}{
		{1, 64, 4, "at least 4"},
		{7, 64, 4, "7 chunks: 4 lanes, never fewer"},
		{8, 64, 8, "two passes of 4 would idle none either: the wider group stays"},
		{16, 64, 16, "one pass, none idle"},
		{48, 64, 16, "768 columns of 16-element chunks: 32 lanes idle 16 in the second pass, 16 lanes none"},
		{40, 64, 16, "32 lanes idle 24, 16 idle 8"},
		{96, 64, 32, "64 lanes idle 32, 32 none"},
		{100, 64, 64, "64 and 32 lanes idle 28 each: the wider group stays"},
		{128, 64, 64, "2048 columns: 64 lanes, none idle"},
		{352, 64, 32, "5632 columns: 64 lanes idle 32, 32 none"},
		{4096, 64, 64, "at most the workgroup"},
		{48, 32, 16, "a smaller workgroup caps the first choice"},
	} {
		if got := laneCount(tc.chunks, tc.max); got != tc.want {
			t.Errorf("laneCount(%d, %d) = %d, want %d (%s)", tc.chunks, tc.max, got, tc.want, tc.why)
		}
	}
}
