// Package vision turns image files into the inputs of a vision encoder
// as llama.cpp's mtmd prepares them: decoding (PNG, JPEG, GIF with Go's
// standard packages, WebP with golang.org/x/image/webp) to 8-bit RGB under
// a pixel limit checked from the header, the fixed-size preprocessor of
// Gemma 3 (an aspect-preserving bilinear resize with align-corners ratios
// and uint8 truncation, centred on a black square canvas), normalization
// by the projector's mean and std, and the patches of the encoder's
// patch embedding, row-major over the patch grid; for LFM2-VL (lfm2.go)
// the smart resize, the resampled position table and the patch order of
// its pixel unshuffle.
package vision

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	_ "image/gif"  // registers GIF
	_ "image/jpeg" // registers JPEG
	_ "image/png"  // registers PNG

	_ "golang.org/x/image/webp" // registers WebP
)

// ErrImage reports an image that cannot be used: an unknown format, a
// truncated or malformed file, or one over the pixel limit.
var ErrImage = errors.New("vision: bad image")

// DefaultMaxPixels bounds width*height of a decoded image (a
// decompression bomb declares a huge size in a few bytes): 64 megapixels.
const DefaultMaxPixels = 64 << 20

// RGB is an 8-bit RGB image, interleaved row-major: pixel (x, y) channel c
// is Pix[(y*W+x)*3+c].
type RGB struct {
	W, H int
	Pix  []uint8
}

// Decode decodes a PNG, JPEG, GIF (its first frame) or WebP file to
// 8-bit RGB. The size in the header is checked against maxPixels (<= 0:
// DefaultMaxPixels) before any pixel is decoded. Transparent pixels keep
// their colour values (the alpha channel is dropped, not composited), as
// stb_image's 3-channel load in llama.cpp does.
func Decode(data []byte, maxPixels int) (*RGB, error) {
	if maxPixels <= 0 {
		maxPixels = DefaultMaxPixels
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrImage, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return nil, fmt.Errorf("%w: %s of %dx%d pixels", ErrImage, format, cfg.Width, cfg.Height)
	}
	if int64(cfg.Width)*int64(cfg.Height) > int64(maxPixels) {
		return nil, fmt.Errorf("%w: %s of %dx%d pixels, over the limit of %d", ErrImage, format, cfg.Width, cfg.Height, maxPixels)
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrImage, err)
	}
	b := img.Bounds()
	if b.Dx() != cfg.Width || b.Dy() != cfg.Height {
		return nil, fmt.Errorf("%w: %s decoded to %dx%d, header says %dx%d", ErrImage, format, b.Dx(), b.Dy(), cfg.Width, cfg.Height)
	}
	out := &RGB{W: b.Dx(), H: b.Dy(), Pix: make([]uint8, 3*b.Dx()*b.Dy())}
	i := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			var r, g, bl uint8
			switch im := img.(type) {
			case *image.NRGBA:
				o := im.PixOffset(x, y)
				r, g, bl = im.Pix[o], im.Pix[o+1], im.Pix[o+2]
			case *image.RGBA:
				// Premultiplied: an opaque pixel's values as they are; a
				// transparent one's colour is recovered as NRGBA does.
				c := color.NRGBAModel.Convert(im.RGBAAt(x, y)).(color.NRGBA)
				r, g, bl = c.R, c.G, c.B
			default:
				c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
				r, g, bl = c.R, c.G, c.B
			}
			out.Pix[i], out.Pix[i+1], out.Pix[i+2] = r, g, bl
			i += 3
		}
	}
	return out, nil
}
