package vision

import (
	"bytes"
	"encoding/base64"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"testing"
)

func encoded(t testing.TB, kind string, w, h int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetNRGBA(x, y, color.NRGBA{uint8(x * 40), uint8(y * 30), uint8(x + y), 255})
		}
	}
	var b bytes.Buffer
	var err error
	switch kind {
	case "png":
		err = png.Encode(&b, img)
	case "jpeg":
		err = jpeg.Encode(&b, img, nil)
	case "gif":
		err = gif.Encode(&b, img, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestDecodeFormats: PNG keeps its exact values; JPEG and GIF decode to
// the declared size.
func TestDecodeFormats(t *testing.T) {
	for _, kind := range []string{"png", "jpeg", "gif"} {
		img, err := Decode(encoded(t, kind, 5, 3), 0)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if img.W != 5 || img.H != 3 || len(img.Pix) != 45 {
			t.Fatalf("%s: %dx%d, %d bytes", kind, img.W, img.H, len(img.Pix))
		}
		if kind == "png" && (img.Pix[(2*5+4)*3] != 160 || img.Pix[(2*5+4)*3+1] != 60 || img.Pix[(2*5+4)*3+2] != 6) {
			t.Errorf("png pixel (4, 2) = %v", img.Pix[(2*5+4)*3:(2*5+4)*3+3])
		}
	}
}

// TestDecodeWebP: a 1x1 lossless WebP (the well-known feature-detection
// image) decodes through golang.org/x/image/webp.
func TestDecodeWebP(t *testing.T) {
	data, err := base64.StdEncoding.DecodeString("UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==")
	if err != nil {
		t.Fatal(err)
	}
	img, err := Decode(data, 0)
	if err != nil {
		t.Fatal(err)
	}
	if img.W != 1 || img.H != 1 || len(img.Pix) != 3 {
		t.Fatalf("%dx%d, %d bytes", img.W, img.H, len(img.Pix))
	}
	if _, err := Decode(data[:20], 0); !errors.Is(err, ErrImage) {
		t.Errorf("truncated webp: err %v", err)
	}
}

// TestDecodeRefuses: truncated and garbage files, and a header over the
// pixel limit, are ErrImage.
func TestDecodeRefuses(t *testing.T) {
	p := encoded(t, "png", 8, 8)
	for name, tc := range map[string]struct {
		data []byte
		max  int
	}{
		"truncated":   {p[:len(p)/2], 0},
		"header only": {p[:33], 0},
		"garbage":     {[]byte("not an image at all"), 0},
		"empty":       {nil, 0},
		"over limit":  {p, 63},
		"jpeg cut":    {encoded(t, "jpeg", 16, 16)[:100], 0},
	} {
		if _, err := Decode(tc.data, tc.max); !errors.Is(err, ErrImage) {
			t.Errorf("%s: err %v, want ErrImage", name, err)
		}
	}
	// A PNG header declaring 100000 x 100000 pixels fails before decoding.
	bomb := append([]byte(nil), p[:33]...)
	copy(bomb[16:24], []byte{0, 1, 0x86, 0xa0, 0, 1, 0x86, 0xa0})
	if _, err := Decode(bomb, 0); !errors.Is(err, ErrImage) {
		t.Errorf("bomb: err %v", err)
	}
}

// TestResizeBilinear: align-corners ratios and truncation, by hand: a
// 2x1 row 0..255 stretched to 4 columns samples at 0, 1/3, 2/3, 1.
func TestResizeBilinear(t *testing.T) {
	src := &RGB{W: 2, H: 1, Pix: []uint8{0, 0, 0, 255, 100, 10}}
	got := ResizeBilinear(src, 4, 1)
	want := []uint8{0, 0, 0, 85, 33, 3, 170, 66, 6, 255, 100, 10}
	for i := range want {
		if got.Pix[i] != want[i] {
			t.Fatalf("got %v, want %v", got.Pix, want)
		}
	}
	// FixedSize: 4x2 into 4x4 keeps the aspect (4x2) and centres it.
	wide := &RGB{W: 4, H: 2, Pix: bytes.Repeat([]byte{200}, 24)}
	sq := FixedSize(wide, 4)
	for y := range 4 {
		v := sq.Pix[(y*4)*3]
		if want := uint8(0); y == 1 || y == 2 {
			want = 200
			if v != want {
				t.Errorf("row %d = %d, want %d", y, v, want)
			}
		} else if v != want {
			t.Errorf("row %d = %d, want %d", y, v, want)
		}
	}
}

// FuzzDecode: any bytes give an image or ErrImage, never a panic, and a
// decoded image's pixels fill its size.
func FuzzDecode(f *testing.F) {
	f.Add(encoded(f, "png", 3, 2))
	f.Add(encoded(f, "gif", 2, 2))
	f.Add(encoded(f, "jpeg", 8, 8))
	f.Fuzz(func(t *testing.T, data []byte) {
		img, err := Decode(data, 1<<16)
		if err != nil {
			if !errors.Is(err, ErrImage) {
				t.Fatalf("error %v is not ErrImage", err)
			}
			return
		}
		if len(img.Pix) != 3*img.W*img.H || img.W*img.H > 1<<16 {
			t.Fatalf("%dx%d with %d bytes", img.W, img.H, len(img.Pix))
		}
		FixedSize(img, 16)
	})
}
