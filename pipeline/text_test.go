package pipeline

import (
	"strings"
	"testing"
)

func TestStopText(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stops   []string
		pieces  []string
		want    []string // released per piece
		stopped int      // index of the piece that completes a stop, -1 none
	}{
		{"no stops", nil, []string{"a", "b"}, []string{"a", "b"}, -1},
		{"whole piece", []string{"END"}, []string{"x", "END", "y"}, []string{"x", ""}, 1},
		{"split over pieces", []string{"END"}, []string{"xE", "N", "Dy"}, []string{"x", "", ""}, 2},
		{"false start released", []string{"END"}, []string{"xE", "Nq"}, []string{"x", "ENq"}, -1},
		{"text before stop kept", []string{"\n\n"}, []string{"ab\n", "\ncd"}, []string{"ab", ""}, 1},
		{"earliest of two", []string{"c", "ab"}, []string{"xabc"}, []string{"x"}, 0},
		{"empty stop ignored", []string{""}, []string{"ab"}, []string{"ab"}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &stopText{stops: tc.stops}
			stoppedAt := -1
			for i, p := range tc.pieces {
				got, stop := s.add(p, false)
				if got != tc.want[i] {
					t.Errorf("piece %d %q: released %q, want %q", i, p, got, tc.want[i])
				}
				if stop {
					stoppedAt = i
					break
				}
			}
			if stoppedAt != tc.stopped {
				t.Errorf("stopped at %d, want %d", stoppedAt, tc.stopped)
			}
		})
	}
	// A final add releases what was held back.
	s := &stopText{stops: []string{"END"}}
	if got, _ := s.add("abEN", false); got != "ab" {
		t.Fatalf("held: released %q", got)
	}
	if got, stop := s.add("", true); got != "EN" || stop {
		t.Errorf("final: %q %v", got, stop)
	}
	if strings.Contains(s.held, "EN") {
		t.Errorf("held %q after final", s.held)
	}
}
