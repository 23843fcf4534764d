package model

import (
	"errors"
	"testing"
)

// TestValidateDelta: Gated DeltaNet layers need a convolution of 2 to 1024
// taps and positive heads with value heads a multiple of key heads, in
// range and not also short-convolution layers; sizes without layers are
// refused too. Such a config is recurrent, its delta layers recurrent
// layers.
func TestValidateDelta(t *testing.T) {
	delta := func() Config {
		c := validConfig()
		c.DeltaLayers, c.DeltaConvWidth, c.DeltaKeyHeads, c.DeltaValueHeads, c.DeltaHeadDim = []int{0, 1, 2}, 4, 2, 4, 16
		return c
	}
	c := delta()
	if err := c.Validate(); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	if !c.Recurrent() || !c.RecurrentLayer(2) || c.RecurrentLayer(3) || c.DeltaChannels() != 128 {
		t.Errorf("recurrent %t, layer 2 %t, layer 3 %t, channels %d", c.Recurrent(), c.RecurrentLayer(2), c.RecurrentLayer(3), c.DeltaChannels())
	}
	for name, mutate := range map[string]func(*Config){
		"conv width 1":               func(c *Config) { c.DeltaConvWidth = 1 },
		"value heads not a multiple": func(c *Config) { c.DeltaValueHeads = 3 },
		"no head dim":                func(c *Config) { c.DeltaHeadDim = 0 },
		"layer out of range":         func(c *Config) { c.DeltaLayers = []int{5} },
		"also a conv layer":          func(c *Config) { c.ConvLayers, c.ConvWidth = []int{1}, 3 },
		"sizes without layers":       func(c *Config) { c.DeltaLayers = nil },
	} {
		c := delta()
		mutate(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}
