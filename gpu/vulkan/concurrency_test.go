package vulkan

import (
	"fmt"
	"sync"
	"testing"

	"github.com/gpurun/gpurun/gpu"
)

// TestConcurrentUse records, submits, writes and reads from several
// goroutines on one device; every goroutine must see exactly its own
// increments.
func TestConcurrentUse(t *testing.T) {
	d := openTest(t, false)
	k := addKernel(t, d)
	const workers, rounds, n = 4, 8, 64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- worker(d, k, uint32(w+1), rounds, n)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func worker(d *Device, k gpu.Kernel, add uint32, rounds, n int) error {
	p, err := d.NewBuffer(16)
	if err != nil {
		return err
	}
	defer p.Release()
	data, err := d.NewBuffer(int64(4 * n))
	if err != nil {
		return err
	}
	defer data.Release()
	if err := d.Write(p, 0, words(uint32(n), add)); err != nil {
		return err
	}
	c, err := d.NewCommands()
	if err != nil {
		return err
	}
	defer c.Release()
	if err := c.Dispatch(k, []gpu.Binding{{Buf: p}, {Buf: data}}, groups(n), 1, 1); err != nil {
		return err
	}
	if err := c.Finish(); err != nil {
		return err
	}
	raw := make([]byte, 4*n)
	for r := 1; r <= rounds; r++ {
		if err := d.Submit(c); err != nil {
			return err
		}
		if err := d.Read(data, 0, raw); err != nil {
			return err
		}
		want := words(uint32(r) * add)
		for i := 0; i < n; i++ {
			if string(raw[4*i:4*i+4]) != string(want) {
				return fmt.Errorf("worker add=%d round %d: word %d = %x, want %x", add, r, i, raw[4*i:4*i+4], want)
			}
		}
	}
	return nil
}
