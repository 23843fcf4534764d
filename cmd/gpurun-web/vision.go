package main

import (
	"fmt"

	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/pipeline"
)

// attachMMProj reads a vision projector (llama.cpp's mmproj GGUF, the
// bytes of the file the page was given) and attaches it to m, which then
// takes images (pipeline.Prompt.Images, one per pipeline.MediaMarker).
func attachMMProj(m *pipeline.Model, data []byte) (*gguf.Clip, error) {
	f, err := gguf.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("vision projector: %w", err)
	}
	clip, err := f.Clip()
	if err != nil {
		return nil, fmt.Errorf("vision projector: %w", err)
	}
	if err := m.AttachVision(clip); err != nil {
		return nil, err
	}
	return clip, nil
}
