package main

import (
	"bytes"
	"testing"
)

// TestVEXVPDPBUSD checks the VEX encoder of VPDPBUSD against GNU as: each
// want is what `as` (GNU Binutils 2.40, Debian 12) assembles from the AT&T
// text (operands rm, v, dst), registers chosen so that every register
// field takes its low and high values; Y16 and above have no VEX
// encoding and are refused.
func TestVEXVPDPBUSD(t *testing.T) {
	for _, c := range []struct {
		dst, v, rm int
		text       string
		want       []byte
	}{
		{1, 2, 3, "{vex} vpdpbusd %ymm3, %ymm2, %ymm1", []byte{0xc4, 0xe2, 0x6d, 0x50, 0xcb}},
		{9, 2, 11, "{vex} vpdpbusd %ymm11, %ymm2, %ymm9", []byte{0xc4, 0x42, 0x6d, 0x50, 0xcb}},
		{1, 12, 3, "{vex} vpdpbusd %ymm3, %ymm12, %ymm1", []byte{0xc4, 0xe2, 0x1d, 0x50, 0xcb}},
		{15, 15, 15, "{vex} vpdpbusd %ymm15, %ymm15, %ymm15", []byte{0xc4, 0x42, 0x05, 0x50, 0xff}},
		{0, 0, 0, "{vex} vpdpbusd %ymm0, %ymm0, %ymm0", []byte{0xc4, 0xe2, 0x7d, 0x50, 0xc0}},
		{6, 7, 8, "{vex} vpdpbusd %ymm8, %ymm7, %ymm6", []byte{0xc4, 0xc2, 0x45, 0x50, 0xf0}},
	} {
		got, err := vexVPDPBUSDBytes(c.dst, c.v, c.rm)
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("%s: % x, %v; want % x", c.text, got, err, c.want)
		}
	}
	if _, err := vexVPDPBUSDBytes(16, 0, 0); err == nil {
		t.Error("Y16 encoded")
	}
}
