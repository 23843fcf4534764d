package gpurun

import (
	"errors"
	"testing"

	"github.com/gpurun/gpurun/internal/badsampling"
)

// TestValidateBadSampling runs the shared table of invalid sampling values
// (internal/badsampling, also run through the CLI and the HTTP API)
// through GenerateOptions.Validate, the one check every entry point makes:
// each is ErrOptions, except the zero values, which the Go API reads as
// "no limit" (top-p 0, max tokens 0).
func TestValidateBadSampling(t *testing.T) {
	for _, c := range badsampling.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			var o GenerateOptions
			switch c.Param {
			case badsampling.Temperature:
				o.Temperature = float32(c.Value)
			case badsampling.TopP:
				o.TopP = float32(c.Value)
			case badsampling.TopK:
				o.TopK = int(c.Value)
			case badsampling.Count:
				o.MaxTokens = int(c.Value)
			}
			err := o.Validate()
			if c.GoUnset {
				if err != nil {
					t.Fatalf("Validate(%+v): %v, want the zero value to mean no limit", o, err)
				}
				return
			}
			if !errors.Is(err, ErrOptions) {
				t.Errorf("Validate(%+v): %v, want ErrOptions", o, err)
			}
		})
	}
}
