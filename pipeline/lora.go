package pipeline

import (
	"fmt"
	"slices"

	"github.com/gpurun/gpurun/pipeline/arch"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/lora"
	"github.com/gpurun/gpurun/tensors/model"
)

// unmergedLoRA checks the adapters against the weights and returns the
// weights with the adapters' tensors added, and the pairs by projection.
func unmergedLoRA(cfg *model.Config, ws []*tensors.Tensor, list []lora.Applied) ([]*tensors.Tensor, map[string][]arch.LoRAPair, error) {
	if len(list) == 0 {
		return ws, nil, nil
	}
	ts, pairs, err := lora.Unmerged(cfg.Arch, ws, list)
	if err != nil {
		return nil, nil, fmt.Errorf("pipeline: %w", err)
	}
	byWeight := map[string][]arch.LoRAPair{}
	for _, p := range pairs {
		byWeight[p.Target] = append(byWeight[p.Target], arch.LoRAPair{A: p.A, B: p.B, Rank: p.Rank})
	}
	return append(slices.Clip(ws), ts...), byWeight, nil
}
