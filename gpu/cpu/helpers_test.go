package cpu_test

import (
	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors/model"
)

func fusionKV(c *model.Config, maxLen int) fusion.KVSpec {
	return fusion.KVSpec{Layers: c.Layers, KVHeads: c.KVHeads, HeadDim: c.HeadDim, MaxLen: maxLen}
}
