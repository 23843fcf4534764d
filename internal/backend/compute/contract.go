package compute

import (
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
)

// Kernel contracts: see the package doc. kernels_gen.go holds the
// generated contracts (kMatvecLanes for matvec_lanes, ...) and bindings
// structs (matmulBindings{Step, XW, W, S, Bias, OutW, W2, S2}, ...).

//go:generate go run ./internal/kernelgen/cmd -out kernels_gen.go

// bindingSet is a family's bindings struct.
type bindingSet interface {
	list() []gpu.Binding // in binding order, from binding 1 (binding 0 is the uniform block)
}

// contract is one WGSL entry point with the uniform struct P and the
// bindings struct B of its family.
type contract[P shaders.Params, B bindingSet] struct{ name string }

// Name is the entry point's name.
func (k contract[P, B]) Name() string { return k.name }

// dispatch plans a dispatch of k (a plain family's kernel) on x*y*z
// workgroups.
func (k contract[P, B]) dispatch(pl *planner, params P, x, y, z int, b B) {
	pl.items = append(pl.items, item{op: pl.cur, kernel: k.name, params: params, bindings: b.list(), x: x, y: y, z: z})
}

// dispatchVariant is dispatch for a kernel of a specialized family in
// variant v, with the work it does.
func (k contract[P, B]) dispatchVariant(pl *planner, v shaders.Variant, params P, c cost, x, y, z int, b B) {
	pl.items = append(pl.items, item{op: pl.cur, kernel: k.name, variant: v, params: params, bindings: b.list(), x: x, y: y, z: z, cost: c})
}
