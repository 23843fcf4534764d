package vision

import (
	"fmt"
	"math"
)

// LFM2-VL's tiling (llama.cpp's mtmd_image_preprocessor_lfm2, after
// transformers' Lfm2VlImageProcessor): an image wider or taller than
// LFM2TileSize * 2 is cut into a grid of LFM2TileSize-square tiles, 2 to
// LFM2MaxTiles of them in a grid of the aspect ratio closest to the image's, and
// also encoded whole as a smart-resized thumbnail (the overview).

// LFM2 tiling constants (LFM2.5-VL's processor_config.json as llama.cpp
// hard-codes them).
const (
	LFM2TileSize = 512
	// LFM2MaxTiles: the most tiles of an image (plus its thumbnail).
	LFM2MaxTiles = 10
	// lfm2Tolerance: tiling applies past LFM2TileSize * lfm2Tolerance.
	lfm2Tolerance = 2
)

// LFM2Tiled reports whether llama.cpp tiles an image of this size: either
// side above 1024 pixels.
func LFM2Tiled(w, h int) bool {
	return w > LFM2TileSize*lfm2Tolerance || h > LFM2TileSize*lfm2Tolerance
}

// lfm2Ratios are the candidate grids (cols, rows) with 2..10 tiles in
// the order llama.cpp visits them: get_target_ratios' list (by tile count
// n, then cols, then rows, first occurrence) after libstdc++'s std::sort
// by tile count, which is not stable on these 26 entries (2x1 before 1x2).
// The order decides ties (equal aspect differences); found by running that
// code (the README of testdata/vision/lfm2 says how).
var lfm2Ratios = [...][2]int{
	{2, 1}, {1, 2}, {1, 3}, {3, 1}, {2, 2}, {4, 1}, {1, 4}, {1, 5}, {5, 1}, {3, 2}, {2, 3}, {1, 6}, {6, 1},
	{1, 7}, {7, 1}, {2, 4}, {4, 2}, {1, 8}, {8, 1}, {3, 3}, {1, 9}, {9, 1}, {10, 1}, {1, 10}, {5, 2}, {2, 5},
}

// LFM2Grid is the tile grid (cols, rows) llama.cpp picks for a w x h
// image (find_closest_aspect_ratio, in float32): the candidate whose
// cols/rows is closest to w/h; on a tie a later (larger) grid wins when
// the image's area is above half of the grid's pixel area.
func LFM2Grid(w, h int) (cols, rows int) {
	aspect := float32(w) / float32(h)
	area := float32(w * h)
	best, bestDiff := [2]int{1, 1}, float32(math.MaxFloat32)
	for _, r := range lfm2Ratios {
		diff := float32(math.Abs(float64(aspect - float32(r[0])/float32(r[1]))))
		switch {
		case diff < bestDiff:
			best, bestDiff = r, diff
		case diff == bestDiff && area > 0.5*float32(LFM2TileSize*LFM2TileSize*r[0]*r[1]):
			best = r
		}
	}
	return best[0], best[1]
}

// ResizePadCeil is llama.cpp's img_tool::resize with PAD_CEIL (the
// refined image of its llava-uhd slicing): the image scaled by the
// smaller of w/W and h/H (float32), each side ceiled and capped at the
// target, resized by ResizeBilinear and centred (offsets floored) on
// black; a copy when the sizes are equal.
func ResizePadCeil(img *RGB, w, h int) *RGB {
	out := &RGB{W: w, H: h, Pix: make([]uint8, 3*w*h)}
	if img.W == w && img.H == h {
		copy(out.Pix, img.Pix)
		return out
	}
	scale := min(float32(w)/float32(img.W), float32(h)/float32(img.H))
	nw := min(int(math.Ceil(float64(float32(img.W)*scale))), w)
	nh := min(int(math.Ceil(float64(float32(img.H)*scale))), h)
	r := ResizeBilinear(img, nw, nh)
	ox, oy := (w-nw)/2, (h-nh)/2
	for y := range nh {
		copy(out.Pix[((oy+y)*w+ox)*3:][:3*nw], r.Pix[y*nw*3:][:3*nw])
	}
	return out
}

// Crop is the w x h region of img at (x, y), which must lie inside it.
func Crop(img *RGB, x, y, w, h int) (*RGB, error) {
	if x < 0 || y < 0 || w <= 0 || h <= 0 || x+w > img.W || y+h > img.H {
		return nil, fmt.Errorf("vision: crop %dx%d at (%d, %d) of a %dx%d image", w, h, x, y, img.W, img.H)
	}
	out := &RGB{W: w, H: h, Pix: make([]uint8, 3*w*h)}
	for r := range h {
		copy(out.Pix[r*w*3:][:3*w], img.Pix[((y+r)*img.W+x)*3:][:3*w])
	}
	return out, nil
}

// LFM2Split is an image cut as llama.cpp's lfm2 preprocessing cuts it:
// the tiles row by row (none for an image that is not tiled) and the
// thumbnail (LFM2Resize), which the prompt puts after them.
type LFM2Split struct {
	Cols, Rows int    // the tile grid; 0, 0 when not tiled
	Tiles      []*RGB // Cols*Rows tiles of LFM2TileSize square, row-major
	Thumbnail  *RGB
}

// SplitLFM2 cuts img for an lfm2 projector of the given patch size and
// merge factor: the thumbnail always; when LFM2Tiled, the image resized
// by ResizePadCeil to the grid's LFM2TileSize multiples and cropped into
// tiles.
func SplitLFM2(img *RGB, patch, merge int) (*LFM2Split, error) {
	thumb, err := LFM2Resize(img, patch, merge)
	if err != nil {
		return nil, err
	}
	s := &LFM2Split{Thumbnail: thumb}
	if !LFM2Tiled(img.W, img.H) {
		return s, nil
	}
	s.Cols, s.Rows = LFM2Grid(img.W, img.H)
	refined := ResizePadCeil(img, s.Cols*LFM2TileSize, s.Rows*LFM2TileSize)
	for r := range s.Rows {
		for c := range s.Cols {
			t, err := Crop(refined, c*LFM2TileSize, r*LFM2TileSize, LFM2TileSize, LFM2TileSize)
			if err != nil {
				return nil, err
			}
			s.Tiles = append(s.Tiles, t)
		}
	}
	return s, nil
}
