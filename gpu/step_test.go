package gpu

import (
	"errors"
	"testing"

	"github.com/gpurun/gpurun/fusion"
)

func TestCheckStep(t *testing.T) {
	g := &fusion.Graph{Tokens: 8}
	for _, tc := range []struct {
		n, pos, maxLen int
		want           error
	}{
		{1, 0, 16, nil},
		{8, 8, 16, nil},
		{3, 100, 0, nil}, // no cache: any position
		{0, 0, 16, ErrStep},
		{9, 0, 16, ErrStep},
		{1, -1, 16, ErrStep},
		{1, 1 << 31, 0, ErrStep},
		{8, 9, 16, ErrCacheFull},
		{1, 16, 16, ErrCacheFull},
	} {
		err := CheckStep(g, tc.n, tc.pos, tc.maxLen)
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("CheckStep(n=%d, pos=%d, maxLen=%d) = %v, want %v", tc.n, tc.pos, tc.maxLen, err, tc.want)
		}
	}
}

func TestCheckBatch(t *testing.T) {
	g := &fusion.Graph{Tokens: 3, Batch: true}
	for _, tc := range []struct {
		rows []Row
		want error
	}{
		{[]Row{{Pos: 0, Seq: 0}}, nil},
		{[]Row{{Pos: 15, Seq: 2}, {Pos: 3, Seq: 0}, {Pos: 0, Seq: 1}}, nil},
		{nil, ErrStep},
		{[]Row{{Seq: 0}, {Seq: 1}, {Seq: 2}, {Seq: 3}}, ErrStep}, // more rows than the graph
		{[]Row{{Seq: 3}}, ErrStep},
		{[]Row{{Seq: -1}}, ErrStep},
		{[]Row{{Seq: 1}, {Seq: 1, Pos: 2}}, ErrStep}, // a sequence twice
		{[]Row{{Pos: -1}}, ErrStep},
		{[]Row{{Pos: 16, Seq: 1}}, ErrCacheFull},
	} {
		err := CheckBatch(g, tc.rows, 3, 16)
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("CheckBatch(%v) = %v, want %v", tc.rows, err, tc.want)
		}
	}
}
