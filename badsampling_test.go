package gpurun

import (
	"errors"
	"testing"

	"github.com/gpurun/gpurun/internal/badsampling"
)

// TestResolveBadSampling runs the shared table of invalid sampling values
// (internal/badsampling, also run through the CLI and the HTTP API)
// through GenerateOptions.Resolve: each is ErrOptions, except the zero
// values, which mean "not set" in the Go API.
func TestResolveBadSampling(t *testing.T) {
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
			p, err := o.Resolve()
			if c.GoUnset {
				if err != nil {
					t.Fatalf("Resolve(%+v): %v, want the zero value to mean the default", o, err)
				}
				if p.TopP != DefaultTopP || p.MaxTokens != DefaultMaxTokens {
					t.Errorf("Resolve(%+v) = top-p %v, max tokens %d; want the defaults %v, %d", o, p.TopP, p.MaxTokens, DefaultTopP, DefaultMaxTokens)
				}
				return
			}
			if !errors.Is(err, ErrOptions) {
				t.Errorf("Resolve(%+v): %v, want ErrOptions", o, err)
			}
		})
	}
}
