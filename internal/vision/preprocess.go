package vision

import (
	"fmt"
	"math"
)

// FixedSize is Gemma 3's preprocessor (llama.cpp's
// mtmd_image_preprocessor_fixed_size): an image that is not size x size
// is resized preserving its aspect ratio (scale = min(size/w, size/h) in
// float32, new sides min(ceil(side*scale), size)) by ResizeBilinear and
// pasted at ((size-nw)/2, (size-nh)/2) on a black size x size canvas.
func FixedSize(img *RGB, size int) *RGB {
	if img.W == size && img.H == size {
		return img
	}
	scale := min(float32(size)/float32(img.W), float32(size)/float32(img.H))
	nw := min(int(math.Ceil(float64(float32(img.W)*scale))), size)
	nh := min(int(math.Ceil(float64(float32(img.H)*scale))), size)
	nw, nh = max(nw, 1), max(nh, 1)
	r := ResizeBilinear(img, nw, nh)
	out := &RGB{W: size, H: size, Pix: make([]uint8, 3*size*size)}
	x0, y0 := (size-nw)/2, (size-nh)/2
	for y := range nh {
		copy(out.Pix[((y0+y)*size+x0)*3:], r.Pix[y*nw*3:(y+1)*nw*3])
	}
	return out
}

// ResizeBilinear resizes with align-corners ratios ((src-1)/(dst-1), 0 for
// a side of 1), the four neighbours lerped in float32 and the result
// truncated to uint8, as llama.cpp's resize_bilinear does.
func ResizeBilinear(img *RGB, w, h int) *RGB {
	out := &RGB{W: w, H: h, Pix: make([]uint8, 3*w*h)}
	ratio := func(src, dst int) float32 {
		if dst <= 1 {
			return 0
		}
		return float32(src-1) / float32(dst-1)
	}
	xr, yr := ratio(img.W, w), ratio(img.H, h)
	lerp := func(a, b uint8, t float32) float32 { return float32(a) + t*(float32(b)-float32(a)) }
	for y := range h {
		py := yr * float32(y)
		y1 := int(py)
		y2 := min(y1+1, img.H-1)
		fy := py - float32(y1)
		for x := range w {
			px := xr * float32(x)
			x1 := int(px)
			x2 := min(x1+1, img.W-1)
			fx := px - float32(x1)
			for c := range 3 {
				at := func(xx, yy int) uint8 { return img.Pix[(yy*img.W+xx)*3+c] }
				top := lerp(at(x1, y1), at(x2, y1), fx)
				bot := top + fy*(lerp(at(x1, y2), at(x2, y2), fx)-top)
				out.Pix[(y*w+x)*3+c] = uint8(bot)
			}
		}
	}
	return out
}

// Normalize returns the planar [3][H][W] values x/255 then (x-mean[c])/std[c].
func Normalize(img *RGB, mean, std [3]float32) []float32 {
	n := img.W * img.H
	out := make([]float32, 3*n)
	for i := range n {
		for c := range 3 {
			v := float32(img.Pix[i*3+c]) / 255
			out[c*n+i] = (v - mean[c]) / std[c]
		}
	}
	return out
}

// Patches unfolds planar [3][size][size] values into the rows of the patch
// embedding's product: row k is patch (k / n, k % n), n = size/patch
// (row-major over the grid), holding its 3*patch*patch values in
// (channel, y, x) order, the order of a conv kernel's weights.
func Patches(planar []float32, size, patch int) ([]float32, error) {
	if patch <= 0 || size%patch != 0 || len(planar) != 3*size*size {
		return nil, fmt.Errorf("vision: %d values for a %d-pixel square in patches of %d", len(planar), size, patch)
	}
	n, k := size/patch, 3*patch*patch
	out := make([]float32, n*n*k)
	for py := range n {
		for px := range n {
			row := out[(py*n+px)*k:]
			i := 0
			for c := range 3 {
				for y := range patch {
					src := planar[c*size*size+(py*patch+y)*size+px*patch:]
					copy(row[i:i+patch], src[:patch])
					i += patch
				}
			}
		}
	}
	return out, nil
}
