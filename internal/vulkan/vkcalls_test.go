//go:build cgo

package vulkan

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"unsafe"

	vk "github.com/vulkan-go/vulkan"

	"github.com/gpurun/gpurun/shaders"
)

// TestHandleSizes holds the assumption of toC and fromC: every
// non-dispatchable handle type they convert is 64 bits, as
// C.gr_handle is.
func TestHandleSizes(t *testing.T) {
	sizes := map[string]uintptr{
		"ShaderModule":        sizeOf[vk.ShaderModule](),
		"DescriptorSetLayout": sizeOf[vk.DescriptorSetLayout](),
		"PipelineLayout":      sizeOf[vk.PipelineLayout](),
		"Pipeline":            sizeOf[vk.Pipeline](),
		"PipelineCache":       sizeOf[vk.PipelineCache](),
		"DescriptorPool":      sizeOf[vk.DescriptorPool](),
		"DescriptorSet":       sizeOf[vk.DescriptorSet](),
		"Buffer":              sizeOf[vk.Buffer](),
		"Fence":               sizeOf[vk.Fence](),
		"CommandPool":         sizeOf[vk.CommandPool](),
	}
	for name, size := range sizes {
		if size != 8 {
			t.Errorf("vk.%s is %d bytes, want 8", name, size)
		}
	}
}

func sizeOf[H nondispatchable]() uintptr {
	var h H
	return unsafe.Sizeof(h)
}

// TestCallsUnderCollections creates kernels and records, submits and reads
// back work from several goroutines while another forces one garbage
// collection after another: the calls of vkcalls.c must not depend on Go
// memory that a collection may free or move (with the Go binding's
// wrappers, memory owned by a finalizer was freed during
// vkCreateComputePipelines). Under TestValidationClean the rerun also
// checks that every structure the driver read was well formed.
func TestCallsUnderCollections(t *testing.T) {
	for _, staging := range []bool{false, true} {
		t.Run(fmt.Sprintf("staging=%v", staging), func(t *testing.T) {
			d := openTest(t, staging)
			spec := shaders.KernelSpec{Name: "add", SPIRV: testKernelSPIRV(t, "add"), Bindings: []shaders.BindingKind{shaders.Uniform, shaders.StorageRW}}
			stop := make(chan struct{})
			collected := make(chan int)
			go func() {
				n := 0
				for {
					select {
					case <-stop:
						collected <- n
						return
					default:
						runtime.GC()
						n++
					}
				}
			}()
			const workers = 4
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := range workers {
				wg.Go(func() {
					for i := range 3 {
						k, err := d.NewKernel(spec)
						if err != nil {
							errs <- err
							return
						}
						err = worker(d, k, uint32(w+1+i), 3, 256)
						k.Release()
						if err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(stop)
			t.Logf("%d collections", <-collected)
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// TestSetLayoutTooManyBindings: a set of more bindings than vkcalls.c's
// arrays hold is refused with ErrInvalid, not written past them.
func TestSetLayoutTooManyBindings(t *testing.T) {
	d := openTest(t, false)
	types := make([]int32, maxSetBindings+1)
	for i := range types {
		types[i] = int32(vk.DescriptorTypeStorageBuffer)
	}
	if _, err := d.calls.createSetLayout(d.dev, types); !errors.Is(err, ErrInvalid) {
		t.Errorf("createSetLayout of %d bindings: %v, want ErrInvalid", len(types), err)
	}
}
