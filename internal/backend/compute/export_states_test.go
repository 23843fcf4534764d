package compute

import "github.com/gpurun/gpurun/gpu"

// ForgetStates zeroes the recurrent states of kv (made by be) while
// leaving the position they claim to hold: what a backend that did not
// carry the states from step to step would decode from (TestLFM2States).
func ForgetStates(be gpu.Backend, kv gpu.KVCache) error {
	b, c := be.(*backend), kv.(*kvCache)
	for _, s := range c.state {
		if s != nil {
			if err := b.dev.Write(s, 0, make([]byte, s.Size())); err != nil {
				return err
			}
		}
	}
	return nil
}
