//go:build cgo && !js

package webgpu

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

// TestSubmitRead: a read ahead gives the bytes its submission left, not
// those of a submission queued after it (which overwrote them before
// the first read was waited for), for an unaligned range too; its
// read-back buffers go back to the pool; bad arguments fail.
func TestSubmitRead(t *testing.T) {
	d := open(t)
	if !d.Caps().ReadAhead {
		t.Fatal("the WebGPU device does not read ahead")
	}
	ctx := context.Background()
	const n = 64
	dst, err := d.NewBuffer(n)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Release()
	// Each submission copies its own pattern into dst.
	var pendings []*pendingRead
	var wants [][]byte
	for i := range 3 {
		pat := bytes.Repeat([]byte{byte(10 + i)}, n)
		pat[0] = byte(i)
		src, err := d.NewBuffer(n)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Release()
		if err := d.Write(src, 0, pat); err != nil {
			t.Fatal(err)
		}
		c, err := d.NewCommands()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		if err := c.Copy(dst, 0, src, 0, n); err != nil {
			t.Fatal(err)
		}
		if err := c.Finish(); err != nil {
			t.Fatal(err)
		}
		// An unaligned range: bytes 1..6 of the pattern.
		off, size := int64(0), n
		if i == 1 {
			off, size = 1, 6
		}
		r, err := d.SubmitRead(dst, off, size, c)
		if err != nil {
			t.Fatal(err)
		}
		pendings = append(pendings, r.(*pendingRead))
		wants = append(wants, pat[off:off+int64(size)])
	}
	if got := len(d.readBufs); got != 0 {
		t.Errorf("%d free read-back buffers with three reads pending, want 0", got)
	}
	for i, r := range pendings {
		got := make([]byte, len(wants[i]))
		if err := r.Wait(ctx, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, wants[i]) {
			t.Errorf("read %d: %v, want %v (its own submission's bytes)", i, got, wants[i])
		}
	}
	if got := len(d.readBufs); got != 3 {
		t.Errorf("%d free read-back buffers after the waits, want 3", got)
	}
	if err := pendings[0].Wait(ctx, make([]byte, n)); !errors.Is(err, errWaited) {
		t.Errorf("second Wait: %v, want errWaited", err)
	}
	if _, err := d.SubmitRead(dst, 60, 8); err == nil {
		t.Error("a read past the buffer's end: no error")
	}
	if _, err := d.SubmitRead(dst, 0, 0); err == nil {
		t.Error("a read of 0 bytes: no error")
	}
	r, err := d.SubmitRead(dst, 0, 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(ctx, make([]byte, 4)); err == nil {
		t.Error("Wait into 4 bytes for a read of 8: no error")
	}
	if got := len(d.readBufs); got != 3 {
		t.Errorf("%d free read-back buffers after a refused Wait, want 3 (it still gives its buffer back)", got)
	}
}
