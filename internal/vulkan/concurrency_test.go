//go:build cgo

package vulkan

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
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

// TestConcurrentNewKernel creates kernels from several goroutines at once
// (NewKernel builds pipelines outside the device's lock) while others
// submit work; each kernel must then run correctly, and a device closed
// while kernels are being created must end with them released (Close
// waits for creations under way).
func TestConcurrentNewKernel(t *testing.T) {
	d := openTest(t, false)
	spv := testKernelSPIRV(t, "add")
	spec := shaders.KernelSpec{Name: "add", SPIRV: spv, Bindings: []shaders.BindingKind{shaders.Uniform, shaders.StorageRW}}
	const workers = 4
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers)
	for w := range workers {
		wg.Go(func() {
			k, err := d.NewKernel(spec)
			if err != nil {
				errs <- err
				return
			}
			defer k.Release()
			errs <- worker(d, k, uint32(w+1), 2, 64)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}

	d2, err := openDevice(context.Background(), -1, false)
	if err != nil {
		t.Fatal(err)
	}
	results := make(chan error, workers)
	for range workers {
		go func() {
			_, err := d2.NewKernel(spec)
			results <- err
		}()
	}
	if err := d2.Close(); err != nil {
		t.Errorf("Close while creating kernels: %v", err)
	}
	for range workers {
		if err := <-results; err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("NewKernel racing Close: %v (want success or ErrClosed)", err)
		}
	}
	if _, err := d2.NewKernel(spec); !errors.Is(err, ErrClosed) {
		t.Errorf("NewKernel after Close: %v, want ErrClosed", err)
	}
}

func testKernelSPIRV(t *testing.T, name string) []byte {
	t.Helper()
	spv, err := os.ReadFile(filepath.Join("testdata", name+".spv"))
	if err != nil {
		t.Fatal(err)
	}
	return spv
}
