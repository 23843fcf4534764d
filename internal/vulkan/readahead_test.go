//go:build cgo

package vulkan

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/gpurun/gpurun/gpu"
)

// freeReadBufs counts the pool's free read-back buffers.
func freeReadBufs(d *Device) (free, all int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.readBufs {
		if r.free {
			free++
		}
	}
	return free, len(d.readBufs)
}

// TestSubmitRead: a read ahead gives the bytes its own submission left,
// not those of the submissions queued after it, which changed them before
// the first read was waited for (a compute kernel's writes and a copy's,
// a source copied whole and one copied by range, unaligned ranges); the
// read-back buffers go back to the pool and are reused; a second Wait, a
// Wait into the wrong length, bad ranges and another device's buffer or
// commands are errors; a wait cancelled while its submission runs wraps
// the context's error and its buffer is not handed out again while the
// device may still write it; reads outstanding at Close end in an error,
// not a crash. On the mapped and the staging path.
func TestSubmitRead(t *testing.T) {
	memoryModes(t, func(t *testing.T, d *Device) {
		if !d.Caps().ReadAhead {
			t.Fatal("the Vulkan device does not read ahead")
		}
		ctx := context.Background()
		k := addKernel(t, d)
		// 64 bytes are copied whole (minReadBuf); 6000 by range.
		for _, size := range []int64{64, 6000} {
			words := size / 4
			data := newBuffer(t, d, size)
			one := params(t, d, uint32(words), 1)
			add := record(t, d, func(c gpu.Commands) error {
				return c.Dispatch(k, []gpu.Binding{{Buf: one}, {Buf: data}}, groups(int(words)), 1, 1)
			})
			// A copy from a buffer of 7s into data's second word.
			sevens := newBuffer(t, d, 8)
			if err := d.Write(sevens, 0, bytes.Repeat([]byte{7}, 8)); err != nil {
				t.Fatal(err)
			}
			cp := record(t, d, func(c gpu.Commands) error { return c.Copy(data, 4, sevens, 0, 4) })
			for round := range 2 {
				_, all0 := freeReadBufs(d)
				var reads []gpu.PendingRead
				var wants [][]byte
				for i := range 4 {
					// data: every word 4*round+i+1, but word 1 is 0x07070707
					// after the copy of submission 3.
					cmds := []gpu.Commands{add}
					if i == 3 {
						cmds = append(cmds, cp)
					}
					off, n := int64(0), int(size)
					if i == 1 {
						off, n = 5, 6 // unaligned
					}
					if i == 2 {
						off, n = size-8, 8
					}
					r, err := d.SubmitRead(data, off, n, cmds...)
					if err != nil {
						t.Fatal(err)
					}
					want := make([]byte, size)
					for w := range words {
						binary.LittleEndian.PutUint32(want[4*w:], uint32(4*round+i+1))
					}
					if i == 3 {
						copy(want[4:8], bytes.Repeat([]byte{7}, 4))
					}
					reads = append(reads, r)
					wants = append(wants, want[off:off+int64(n)])
				}
				if free, all := freeReadBufs(d); all-free != 4 {
					t.Errorf("size %d round %d: %d of %d read-back buffers taken with four reads pending, want 4", size, round, all-free, all)
				}
				for i, r := range reads {
					got := make([]byte, len(wants[i]))
					if err := r.Wait(ctx, got); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, wants[i]) {
						t.Errorf("size %d round %d: read %d: % x, want % x (its own submission's bytes)", size, round, i, got, wants[i])
					}
				}
				if free, all := freeReadBufs(d); free != all || (round == 1 && all != all0) {
					t.Errorf("size %d round %d: %d of %d read-back buffers free after the waits (%d before the round), want all, none new in the second round", size, round, free, all, all0)
				}
				if err := reads[0].Wait(ctx, make([]byte, size)); !errors.Is(err, errWaited) {
					t.Errorf("second Wait: %v, want errWaited", err)
				}
				// Every word was 4*round+4 but word 1 (7s): make it so too.
				if err := d.Write(data, 4, binary.LittleEndian.AppendUint32(nil, uint32(4*round+4))); err != nil {
					t.Fatal(err)
				}
			}
		}

		data := newBuffer(t, d, 64)
		for _, c := range []struct {
			off int64
			n   int
		}{{60, 8}, {0, 0}, {-4, 4}, {0, -1}} {
			if _, err := d.SubmitRead(data, c.off, c.n); !errors.Is(err, ErrInvalid) {
				t.Errorf("SubmitRead(%d, %d) of a 64-byte buffer: %v, want ErrInvalid", c.off, c.n, err)
			}
		}
		r, err := d.SubmitRead(data, 0, 8)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Wait(ctx, make([]byte, 4)); !errors.Is(err, ErrInvalid) {
			t.Errorf("Wait into 4 bytes for a read of 8: %v, want ErrInvalid", err)
		}
		if free, all := freeReadBufs(d); free != all {
			t.Errorf("%d of %d read-back buffers free after a refused Wait, want all (it still gives its buffer back)", free, all)
		}
		other := openTest(t, false)
		ob := newBuffer(t, other, 64)
		oc := record(t, other, func(c gpu.Commands) error { return c.Copy(ob, 0, ob, 32, 32) })
		if _, err := d.SubmitRead(ob, 0, 8); !errors.Is(err, ErrInvalid) {
			t.Errorf("SubmitRead of another device's buffer: %v, want ErrInvalid", err)
		}
		if _, err := d.SubmitRead(data, 0, 8, oc); !errors.Is(err, ErrInvalid) {
			t.Errorf("SubmitRead after another device's commands: %v, want ErrInvalid", err)
		}
		unfinished, err := d.NewCommands()
		if err != nil {
			t.Fatal(err)
		}
		defer unfinished.Release()
		if _, err := d.SubmitRead(data, 0, 8, unfinished); !errors.Is(err, ErrInvalid) {
			t.Errorf("SubmitRead after an unfinished list: %v, want ErrInvalid", err)
		}
		if free, all := freeReadBufs(d); free != all {
			t.Errorf("%d of %d read-back buffers free after refused reads, want all", free, all)
		}
	})
}

// slowLists returns command lists that run long on any device: a list
// of 64 adds over 8 MiB, repeated so that they run for about a quarter
// of a second (one submission of the list is timed first: on lavapipe it
// takes about that, on a discrete GPU well under a millisecond).
func slowLists(t *testing.T, d *Device) []gpu.Commands {
	t.Helper()
	c := slowList(t, d)
	start := time.Now()
	if err := d.Submit(c); err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(); err != nil {
		t.Fatal(err)
	}
	took := max(time.Since(start), time.Microsecond)
	reps := int(min(max(250*time.Millisecond/took, 1), 4096))
	cs := make([]gpu.Commands, reps)
	for i := range cs {
		cs[i] = c
	}
	return cs
}

func slowList(t *testing.T, d *Device) gpu.Commands {
	t.Helper()
	k := addKernel(t, d)
	const words = 1 << 21
	big := newBuffer(t, d, 4*words)
	p := params(t, d, words, 1)
	return record(t, d, func(c gpu.Commands) error {
		for range 64 {
			if err := c.Dispatch(k, []gpu.Binding{{Buf: p}, {Buf: big}}, groups(words), 1, 1); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestSubmitReadCancel: a Wait whose context is done while its submission
// runs returns an error wrapping the context's; its read-back buffer is
// handed out again only once no pending submission may write it; later
// reads give their own bytes.
func TestSubmitReadCancel(t *testing.T) {
	d := openTest(t, false)
	slow := slowLists(t, d)
	data := newBuffer(t, d, 64)
	if err := d.Write(data, 0, bytes.Repeat([]byte{3}, 64)); err != nil {
		t.Fatal(err)
	}
	r, err := d.SubmitRead(data, 0, 64, slow...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Wait(ctx, make([]byte, 64)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a cancelled context behind 64 dispatches over 8 MiB: %v, want context.Canceled", err)
	}
	if err := r.Wait(context.Background(), make([]byte, 64)); !errors.Is(err, errWaited) {
		t.Errorf("Wait after a cancelled Wait: %v, want errWaited", err)
	}
	rb := r.(*pendingRead).buf
	d.mu.Lock()
	taken, err := d.takeReadBufLocked(64)
	if err == nil {
		if taken == rb && d.busyLocked(rb.b) {
			t.Error("the read-back buffer of a cancelled read was handed out while its submission may still write it")
		}
		taken.free = true
	}
	d.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	// The data buffer is written after the slow list (a mapped buffer's
	// Write waits for the submissions using it).
	if err := d.Write(data, 0, bytes.Repeat([]byte{9}, 64)); err != nil {
		t.Fatal(err)
	}
	r2, err := d.SubmitRead(data, 8, 16)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 16)
	if err := r2.Wait(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	if want := bytes.Repeat([]byte{9}, 16); !bytes.Equal(got, want) {
		t.Errorf("read after a cancelled one: % x, want % x", got, want)
	}
	if err := d.Wait(); err != nil {
		t.Fatal(err)
	}
	if free, all := freeReadBufs(d); free != all {
		t.Errorf("%d of %d read-back buffers free at the end, want all", free, all)
	}
}

// TestSubmitReadClose: Close with reads outstanding waits for them and
// frees their buffers; their Waits then fail with ErrClosed.
func TestSubmitReadClose(t *testing.T) {
	for _, staging := range []bool{false, true} {
		d, err := openDevice(context.Background(), -1, staging)
		if err != nil {
			t.Fatal(err)
		}
		slow := slowList(t, d)
		data := newBuffer(t, d, 64)
		var reads []gpu.PendingRead
		for i := range 3 {
			var cmds []gpu.Commands
			if i == 1 {
				cmds = append(cmds, slow)
			}
			r, err := d.SubmitRead(data, 0, 64, cmds...)
			if err != nil {
				t.Fatal(err)
			}
			reads = append(reads, r)
		}
		if err := reads[0].Wait(context.Background(), make([]byte, 64)); err != nil {
			t.Fatal(err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		for i, r := range reads[1:] {
			if err := r.Wait(context.Background(), make([]byte, 64)); !errors.Is(err, ErrClosed) {
				t.Errorf("staging %v: read %d waited for after Close: %v, want ErrClosed", staging, i+1, err)
			}
		}
		if use := d.MemoryUse(); use.Current != 0 {
			t.Errorf("staging %v: %d bytes still allocated after Close", staging, use.Current)
		}
		if _, err := d.SubmitRead(data, 0, 8); err == nil {
			t.Errorf("staging %v: SubmitRead after Close: no error", staging)
		}
	}
}
