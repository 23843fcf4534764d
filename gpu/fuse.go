package gpu

import "github.com/gpurun/gpurun/fusion"

// Fuse fuses g for backend b and its weights w: fusion.FuseFor with b's
// FusionSupport (the GPU backends: which fused ops their kernels take
// depends on the weights' layouts and the device's limits; the CPU
// backend's nil takes every rewrite).
func Fuse(b Backend, w Weights, g *fusion.Graph) *fusion.Graph {
	return fusion.FuseFor(g, b.FusionSupport(w))
}
