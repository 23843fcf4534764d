//go:build cgo

package vulkan

import "testing"

func TestHazardBarriers(t *testing.T) {
	a, b, c := &buffer{}, &buffer{}, &buffer{}
	type access struct {
		reads, writes []*buffer
		barrier       bool
	}
	cases := []struct {
		name string
		seq  []access
	}{
		{"first command always", []access{{nil, []*buffer{a}, true}}},
		{"read after write", []access{{nil, []*buffer{a}, true}, {[]*buffer{a}, []*buffer{b}, true}}},
		{"write after write", []access{{nil, []*buffer{a}, true}, {nil, []*buffer{a}, true}}},
		{"write after read", []access{{[]*buffer{a}, []*buffer{b}, true}, {nil, []*buffer{a}, true}}},
		{"independent writers", []access{{[]*buffer{a}, []*buffer{b}, true}, {[]*buffer{a}, []*buffer{c}, false}}},
		{"read after read", []access{{[]*buffer{a}, nil, true}, {[]*buffer{a}, nil, false}}},
		{"barrier clears history", []access{
			{nil, []*buffer{a}, true}, {[]*buffer{a}, []*buffer{b}, true}, {nil, []*buffer{c}, false}, {[]*buffer{a}, nil, false}, {[]*buffer{c}, nil, true}}},
		{"in-place kernel", []access{{nil, []*buffer{a}, true}, {[]*buffer{b}, []*buffer{a}, true}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h hazards
			for i, acc := range tc.seq {
				if got := h.access(acc.reads, acc.writes); got != acc.barrier {
					t.Fatalf("command %d: barrier %v, want %v", i, got, acc.barrier)
				}
			}
		})
	}
}
