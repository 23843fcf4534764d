package vision

import (
	"errors"
	"slices"
	"testing"
)

// TestSmartResize: llama.cpp's calc_size_preserved_ratio for an lfm2
// projector with patch 4 and merge 2 (align 8, 64..256 tokens = 4096..16384
// pixels), worked by hand from clip.cpp's formulas.
func TestSmartResize(t *testing.T) {
	for _, c := range []struct{ w, h, ww, wh int }{
		{72, 44, 88, 56},     // 72x48 = 3456 < 4096: beta = sqrt(4096/3168), ceil(81.9/8), ceil(50.0/8)
		{64, 64, 64, 64},     // exactly the minimum
		{1000, 600, 160, 96}, // 1000x600 > 16384: beta = sqrt(600000/16384) = 6.05, floor(165.2/8), floor(99.1/8)
		{3, 500, 8, 832},     // 8x504 = 4032 < 4096: beta = sqrt(4096/1500) = 1.65, ceil(0.62)*8, ceil(103.3)*8
	} {
		a := 8
		w, h := SmartResize(c.w, c.h, a, 64*a*a, 256*a*a)
		if w != c.ww || h != c.wh {
			t.Errorf("%dx%d -> %dx%d, want %dx%d", c.w, c.h, w, h, c.ww, c.wh)
		}
	}
	if _, err := LFM2Resize(&RGB{}, 4, 2); !errors.Is(err, ErrImage) {
		t.Errorf("an empty image: err %v, want ErrImage", err)
	}
}

// TestMergeOrder: on a 4x2 grid with merge 2, token 0 is patches (0,0),
// (0,1), (1,0), (1,1) and token 1 the next two columns.
func TestMergeOrder(t *testing.T) {
	if got, want := MergeOrder(4, 2, 2), []int{0, 1, 4, 5, 2, 3, 6, 7}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestResizePositions: upsampling a 2x2 table (one column) to 4x4 with
// ggml's antialiased bilinear gives the half-pixel bilinear values, edges
// clamped: row 0 is a, 0.75a+0.25b, 0.25a+0.75b, b.
func TestResizePositions(t *testing.T) {
	table := []float32{0, 4, 8, 12} // (0,0)=0 (0,1)=4 (1,0)=8 (1,1)=12
	order := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	got := ResizePositions(table, 2, 1, 4, 4, order)
	want := []float32{0, 1, 3, 4, 2, 3, 5, 6, 6, 7, 9, 10, 8, 9, 11, 12}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
