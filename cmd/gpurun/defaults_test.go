package main

import (
	"testing"

	"github.com/spf13/cobra"

	"github.com/gpurun/gpurun"
)

// TestSamplingDefaults lists what run and chat generate with when a
// sampling flag is left out (the Default* constants docs/cli.md names) and
// how the flags' own conventions map onto the one GenerateOptions type.
func TestSamplingDefaults(t *testing.T) {
	for _, c := range []struct {
		args        []string
		maxTokens   int
		temperature float32
		topK        int
		topP        float32
	}{
		{nil, gpurun.DefaultMaxTokens, gpurun.DefaultTemperature, gpurun.DefaultTopK, gpurun.DefaultTopP},
		{[]string{"--temperature", "0"}, gpurun.DefaultMaxTokens, 0, gpurun.DefaultTopK, gpurun.DefaultTopP},
		{[]string{"--max-tokens", "-1", "--top-k", "0"}, 0, gpurun.DefaultTemperature, 0, gpurun.DefaultTopP},
		{[]string{"--max-tokens", "5", "--top-p", "0.5", "--seed", "7"}, 5, gpurun.DefaultTemperature, gpurun.DefaultTopK, 0.5},
	} {
		var g genFlags
		cmd := &cobra.Command{Use: "x"}
		g.register(cmd, "")
		if err := cmd.ParseFlags(c.args); err != nil {
			t.Fatal(err)
		}
		o := g.options()
		if o.MaxTokens != c.maxTokens || o.Temperature != c.temperature || o.TopK != c.topK || o.TopP != c.topP {
			t.Errorf("%v: MaxTokens %d, Temperature %v, TopK %d, TopP %v; want %d, %v, %d, %v", c.args, o.MaxTokens, o.Temperature, o.TopK, o.TopP, c.maxTokens, c.temperature, c.topK, c.topP)
		}
		if o.Seed == 0 {
			t.Errorf("%v: seed 0, want a random one picked (and reported)", c.args)
		}
		if err := o.Validate(); err != nil {
			t.Errorf("%v: %v", c.args, err)
		}
	}
}
