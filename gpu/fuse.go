package gpu

import "github.com/gpurun/gpurun/fusion"

// FusionBackend is implemented by backends that run only some fused ops
// whole (as the kernels of their kind, never split back into the parts):
// FusionSupport says which, for weights w that the backend loaded.
type FusionBackend interface {
	FusionSupport(w Weights) fusion.Support
}

// Fuse fuses g for backend b and its weights w: fusion.FuseFor with b's
// support where b is a FusionBackend (the GPU backends: which fused ops
// their kernels take depends on the weights' layouts and the device's
// limits), else fusion.Fuse (every rewrite: the CPU backend runs each
// fused op whole).
func Fuse(b Backend, w Weights, g *fusion.Graph) *fusion.Graph {
	if fb, ok := b.(FusionBackend); ok {
		return fusion.FuseFor(g, fb.FusionSupport(w))
	}
	return fusion.Fuse(g)
}
