package synthetic

import "testing"

// BenchmarkCheckpoint builds full-size TinyLlama weights in each mode
// (0.6 to 2 GB per iteration).
func BenchmarkCheckpoint(b *testing.B) {
	cfg, _ := ByName("tinyllama-1.1b")
	for _, q := range quantModes {
		b.Run(q, func(b *testing.B) {
			size, err := Bytes(cfg, Options{Quant: q})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(size)
			for b.Loop() {
				if _, err := Checkpoint(cfg, Options{Quant: q}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
