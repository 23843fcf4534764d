//go:build cgo

package vulkan

import (
	"bytes"
	"testing"
)

// TestNoHiddenWaits: on mapped memory, Write and Read of a buffer wait for
// the submissions that use it and for no other: a write to a buffer no
// pending list uses leaves that list pending, a read of the list's
// destination waits for it. A host buffer (NewHostBuffer) takes part in
// lists and round-trips like any other.
func TestNoHiddenWaits(t *testing.T) {
	d := openTest(t, false)
	if !d.mapped {
		t.Skip("buffers go through the staging path on this device")
	}
	src, err := d.NewHostBuffer(64)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := d.NewBuffer(64)
	if err != nil {
		t.Fatal(err)
	}
	other, err := d.NewBuffer(64)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte{1, 2, 3, 4}, 16)
	if err := d.Write(src, 0, want); err != nil {
		t.Fatal(err)
	}
	cmds, err := d.NewCommands()
	if err != nil {
		t.Fatal(err)
	}
	defer cmds.Release()
	if err := cmds.Copy(dst, 0, src, 0, 64); err != nil {
		t.Fatal(err)
	}
	if err := cmds.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := d.Submit(cmds); err != nil {
		t.Fatal(err)
	}
	pending := func() int {
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(d.pending)
	}
	if err := d.Write(other, 0, []byte{9, 9, 9, 9}); err != nil {
		t.Fatal(err)
	}
	if n := pending(); n != 1 {
		t.Errorf("after writing an unrelated buffer: %d pending submissions, want 1 (the write waited for the copy)", n)
	}
	got := make([]byte, 64)
	if err := d.Read(dst, 0, got); err != nil {
		t.Fatal(err)
	}
	if n := pending(); n != 0 {
		t.Errorf("after reading the copy's destination: %d pending submissions, want 0", n)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("copied %v, want %v", got, want)
	}
}
