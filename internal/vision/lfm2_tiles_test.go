package vision

import (
	"testing"
)

// TestLFM2Grid: llama.cpp's grid choice (find_closest_aspect_ratio over
// its sorted candidates), worked by hand from its rules: tiling only past
// 1024 pixels; the closest aspect ratio; on a tie a larger grid wins when
// the image covers more than half of its pixels.
func TestLFM2Grid(t *testing.T) {
	for _, c := range []struct{ w, h, cols, rows int }{
		{1100, 1000, 2, 2}, // aspect 1.1: 2x2 (diff 0.1) ties 3x3, whose 2.36 Mpx half (1.18 M) the 1.1 Mpx image does not cover
		{1200, 1000, 3, 3}, // the same tie, 1.2 Mpx > 1.18 M: 3x3
		{1100, 20, 10, 1},  // aspect 55: the widest grid
		{600, 2000, 1, 3},  // aspect 0.3: 1x3 (0.333)
		{1025, 700, 3, 2},  // aspect 1.46: 3x2 (1.5)
		{1448, 724, 2, 1},  // aspect 2: 2x1, then 4x2 ties, whose half (1048576 px) the image (1048352) does not cover
		{2048, 1024, 4, 2}, // the same tie, 2097152 px: 4x2
		{1030, 1030, 2, 2}, // aspect 1: 2x2
	} {
		if cols, rows := LFM2Grid(c.w, c.h); cols != c.cols || rows != c.rows {
			t.Errorf("%dx%d: grid %dx%d, want %dx%d", c.w, c.h, cols, rows, c.cols, c.rows)
		}
	}
	for _, c := range []struct {
		w, h  int
		tiled bool
	}{{1024, 1024, false}, {1025, 10, true}, {10, 1025, true}, {1024, 1, false}} {
		if LFM2Tiled(c.w, c.h) != c.tiled {
			t.Errorf("%dx%d tiled %v, want %v", c.w, c.h, !c.tiled, c.tiled)
		}
	}
}

// TestResizePadCeil: a 4x2 image into 4x4 keeps its size (scale 1,
// ceil(2) = 2) and sits at rows 1-2 on black; into 2x2 it is scaled by
// 0.5 to 2x1 at row 0 (offset floor(1/2) = 0).
func TestResizePadCeil(t *testing.T) {
	img := &RGB{W: 4, H: 2, Pix: make([]uint8, 3*8)}
	for i := range img.Pix {
		img.Pix[i] = uint8(10 + i)
	}
	out := ResizePadCeil(img, 4, 4)
	for y := range 4 {
		for x := range 4 {
			got := out.Pix[(y*4+x)*3]
			want := uint8(0)
			if y == 1 || y == 2 {
				want = img.Pix[((y-1)*4+x)*3]
			}
			if got != want {
				t.Fatalf("(%d, %d) = %d, want %d", x, y, got, want)
			}
		}
	}
	small := ResizePadCeil(img, 2, 2)
	if small.Pix[2*2*3-1] != 0 || small.Pix[0] != img.Pix[0] {
		t.Errorf("2x2: %v", small.Pix)
	}
	if _, err := Crop(img, 1, 1, 4, 1); err == nil {
		t.Error("a crop past the image's edge is no error")
	}
}
