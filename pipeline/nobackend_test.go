package pipeline_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gpurun/gpurun/pipeline"
)

// TestNoBackend: the pipeline chooses no backend of its own (the module
// root does): Options without one are an error, not a default.
func TestNoBackend(t *testing.T) {
	m, err := pipeline.FromCheckpoint(context.Background(), storiesCheckpoint(t), pipeline.Options{MaxCache: 32})
	if !errors.Is(err, pipeline.ErrOptions) {
		if m != nil {
			m.Close()
		}
		t.Fatalf("FromCheckpoint without a Backend: %v, want ErrOptions", err)
	}
}
