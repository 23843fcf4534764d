package cpu_test

import (
	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/tensors/model"
)

func fusionKV(c *model.Config, maxLen int) fusion.KVSpec {
	return fusion.KVSpec{Layers: c.Layers, KVHeads: c.KVHeads, HeadDim: c.HeadDim, MaxLen: maxLen}
}

// mustParse returns v, panicking on err (fusion.Parse* of a test's names).
func mustParse[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
