package vision

import (
	"fmt"
	"math"
)

// LFM2-VL's preprocessing (llama.cpp's mtmd_image_preprocessor_lfm2 with
// PROJECTOR_TYPE_LFM2's hyperparameters) and the host-side parts of its
// SigLIP2 NaFlex encoder: the per-image position table and the patch
// order that makes the pixel unshuffle a plain reshape.

// LFM2 image-token limits (clip.cpp: set_limit_image_tokens(64, 256)):
// the resized image has between these many merged tokens.
const (
	LFM2MinTokens = 64
	LFM2MaxTokens = 256
)

// SmartResize is llama.cpp's calc_size_preserved_ratio with pixel bounds
// (transformers' smart_resize), in float32 as there: both sides rounded
// to multiples of align (at least align), then, if the area is above
// maxPixels, scaled down by sqrt(area/maxPixels) and floored to multiples,
// or if below minPixels, scaled up by sqrt(minPixels/area) and ceiled.
func SmartResize(w, h, align, minPixels, maxPixels int) (int, int) {
	f := float32(align)
	round := func(x float32) int { return int(math.Round(float64(x/f))) * align }
	ceil := func(x float32) int { return int(math.Ceil(float64(x/f))) * align }
	floor := func(x float32) int { return int(math.Floor(float64(x/f))) * align }
	hb, wb := max(align, round(float32(h))), max(align, round(float32(w)))
	switch {
	case hb*wb > maxPixels:
		beta := float32(math.Sqrt(float64(float32(h*w) / float32(maxPixels))))
		hb, wb = max(align, floor(float32(h)/beta)), max(align, floor(float32(w)/beta))
	case hb*wb < minPixels:
		beta := float32(math.Sqrt(float64(float32(minPixels) / float32(h*w))))
		hb, wb = ceil(float32(h)*beta), ceil(float32(w)*beta)
	}
	return wb, hb
}

// LFM2Size is the size an image is resized to for an lfm2 projector of
// the given patch size and merge factor: the whole image, or the
// thumbnail of a tiled one (SplitLFM2).
func LFM2Size(img *RGB, patch, merge int) (int, int, error) {
	if patch <= 0 || merge <= 0 || img.W <= 0 || img.H <= 0 {
		return 0, 0, fmt.Errorf("%w: a %dx%d image for patches of %d merged by %d", ErrImage, img.W, img.H, patch, merge)
	}
	a := patch * merge
	w, h := SmartResize(img.W, img.H, a, LFM2MinTokens*a*a, LFM2MaxTokens*a*a)
	return w, h, nil
}

// LFM2Resize resizes img as llama.cpp's lfm2 overview: to LFM2Size by
// ResizeBilinear without padding (unchanged when already that size).
func LFM2Resize(img *RGB, patch, merge int) (*RGB, error) {
	w, h, err := LFM2Size(img, patch, merge)
	if err != nil {
		return nil, err
	}
	if w == img.W && h == img.H {
		return img, nil
	}
	return ResizeBilinear(img, w, h), nil
}

// MergeOrder is the order of a gw x gh patch grid (gw, gh multiples of
// merge) in which the pixel unshuffle (llama.cpp's
// build_patch_merge_permute) is a reshape: entry r is the row-major patch
// index y*gw+x of row r, where r = t*merge*merge + j for merged token t
// (row-major over the (gw/merge) x (gh/merge) grid) and j = dy*merge+dx,
// the patch (t's row*merge+dy, t's column*merge+dx). Token t's feature
// vector is then its merge*merge rows concatenated, block j at columns
// j*W .. (j+1)*W-1, as ggml's permutes lay it out.
func MergeOrder(gw, gh, merge int) []int {
	mw, mh := gw/merge, gh/merge
	out := make([]int, 0, gw*gh)
	for ty := range mh {
		for tx := range mw {
			for dy := range merge {
				for dx := range merge {
					out = append(out, (ty*merge+dy)*gw+tx*merge+dx)
				}
			}
		}
	}
	return out
}

// PatchRows unfolds planar [3][h][w] values into patch rows in the given
// order (indices into the row-major gw x gh patch grid, gw = w/patch):
// each row holds its patch's 3*patch*patch values in (channel, y, x)
// order, the order of a conv kernel's weights.
func PatchRows(planar []float32, w, h, patch int, order []int) ([]float32, error) {
	if patch <= 0 || w%patch != 0 || h%patch != 0 || len(planar) != 3*w*h {
		return nil, fmt.Errorf("vision: %d values for a %dx%d image in patches of %d", len(planar), w, h, patch)
	}
	gw, gh, k := w/patch, h/patch, 3*patch*patch
	out := make([]float32, len(order)*k)
	for r, idx := range order {
		if idx < 0 || idx >= gw*gh {
			return nil, fmt.Errorf("vision: patch %d of a %dx%d grid", idx, gw, gh)
		}
		py, px := idx/gw, idx%gw
		row := out[r*k:]
		i := 0
		for c := range 3 {
			for y := range patch {
				src := planar[c*w*h+(py*patch+y)*w+px*patch:]
				copy(row[i:i+patch], src[:patch])
				i += patch
			}
		}
	}
	return out, nil
}

// ResizePositions is SigLIP2 NaFlex's position table for a gw x gh patch
// grid (llama.cpp's resize_position_embeddings): the side x side table
// (row k = cell (k/side, k%side), width cols) resampled by ggml's bilinear
// upscale with antialiasing (GGML_SCALE_MODE_BILINEAR |
// GGML_SCALE_FLAG_ANTIALIAS: half-pixel centres, a triangle filter
// stretched by the downscale factor, weights renormalized at the edges),
// in float32 and ggml's summation order; rows in the given order (indices
// y*gw+x). The table is returned unchanged (reordered) when the grid is
// side x side.
func ResizePositions(table []float32, side, cols, gw, gh int, order []int) []float32 {
	grid := table
	if gw != side || gh != side {
		grid = make([]float32, gw*gh*cols)
		sf0, sf1 := float32(gw)/float32(side), float32(gh)/float32(side)
		support0, support1 := max(1, 1/sf0), max(1, 1/sf1)
		inv0, inv1 := 1/support0, 1/support1
		tri := func(x float32) float32 { return max(1-float32(math.Abs(float64(x))), 0) }
		const off = float32(0.5)
		for i1 := range gh {
			y := (float32(i1) + off) / sf1
			ymin, ymax := max(int(y-support1+off), 0), min(int(y+support1+off), side)
			for i0 := range gw {
				x := (float32(i0) + off) / sf0
				xmin, xmax := max(int(x-support0+off), 0), min(int(x+support0+off), side)
				dst := grid[(i1*gw+i0)*cols:][:cols]
				for c := range cols {
					var val, total float32
					for sy := ymin; sy < ymax; sy++ {
						wy := tri((float32(sy) - y + off) * inv1)
						for sx := xmin; sx < xmax; sx++ {
							wx := tri((float32(sx) - x + off) * inv0)
							wgt := wx * wy
							if wgt <= 0 {
								continue
							}
							val += table[(sy*side+sx)*cols+c] * wgt
							total += wgt
						}
					}
					if total > 0 {
						val /= total
					}
					dst[c] = val
				}
			}
		}
	}
	out := make([]float32, len(order)*cols)
	for r, idx := range order {
		copy(out[r*cols:(r+1)*cols], grid[idx*cols:(idx+1)*cols])
	}
	return out
}
