package gguf

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors/model"
)

// TestGraniteHybridConfig: arch3's Granite 4.0 H imports with the layer
// pattern, Mamba-2 sizes and multipliers its golden records (dims and
// hparams, as llama.cpp read them): Mamba-2 where head_count_kv is 0,
// NoPE attention (rope.scaling.finetuned false), attention.scale as the
// kq scale, the 2^20 context as the model's, not the cache's.
func TestGraniteHybridConfig(t *testing.T) {
	g := testmodels.Arch3(t, "granitehybrid")
	ck, err := Load(testmodels.Path(t, "arch3", "granitehybrid.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	c := ck.Config
	hp := func(key string) float32 { return float32(g.Hparams["granitehybrid."+key].(float64)) }
	var want []int
	for l, n := range g.Hparams["granitehybrid.attention.head_count_kv"].([]any) {
		if n.(float64) == 0 {
			want = append(want, l)
		}
	}
	ssm := model.SSM{Layers: want, Inner: int(hp("ssm.inner_size")), Heads: int(hp("ssm.time_step_rank")),
		Groups: int(hp("ssm.group_count")), State: int(hp("ssm.state_size")), Conv: int(hp("ssm.conv_kernel"))}
	if !slices.Equal(c.SSM.Layers, ssm.Layers) || c.SSM.Inner != ssm.Inner || c.SSM.Heads != ssm.Heads ||
		c.SSM.Groups != ssm.Groups || c.SSM.State != ssm.State || c.SSM.Conv != ssm.Conv {
		t.Errorf("ssm %+v, want %+v", c.SSM, ssm)
	}
	if c.KVHeads != g.Dims.KVHeads || c.HeadDim != g.Dims.HeadDim || c.Heads != g.Dims.Heads {
		t.Errorf("heads %d, kv heads %d of %d, want %d, %d of %d", c.Heads, c.KVHeads, c.HeadDim, g.Dims.Heads, g.Dims.KVHeads, g.Dims.HeadDim)
	}
	if c.RopeDims != 0 {
		t.Errorf("rope dims %d: granitehybrid's attention is NoPE", c.RopeDims)
	}
	for _, f := range []struct {
		name      string
		got, want float32
	}{{"attention.scale", c.AttnScale, hp("attention.scale")}, {"embedding_scale", c.EmbedScale, hp("embedding_scale")},
		{"residual_scale", c.ResidualScale, hp("residual_scale")}, {"logit_scale", c.LogitScale, hp("logit_scale")}} {
		if f.got != f.want {
			t.Errorf("%s: %g, want %g", f.name, f.got, f.want)
		}
	}
	if c.MaxSeqLen != int(hp("context_length")) || !c.Recurrent() {
		t.Errorf("context %d (want %g), recurrent %t", c.MaxSeqLen, hp("context_length"), c.Recurrent())
	}
}

// TestGraniteHybridBadMetadata: granitehybrid's own keys, malformed, fail
// the import with ErrFormat naming the key, never a panic or a guess.
func TestGraniteHybridBadMetadata(t *testing.T) {
	path := testmodels.Path(t, "arch3", "granitehybrid.gguf")
	for _, key := range []string{
		"granitehybrid.attention.head_count_kv",
		"granitehybrid.ssm.inner_size",
		"granitehybrid.ssm.time_step_rank",
		"granitehybrid.ssm.group_count",
		"granitehybrid.ssm.state_size",
		"granitehybrid.ssm.conv_kernel",
		"granitehybrid.embedding_scale",
		"granitehybrid.residual_scale",
		"granitehybrid.logit_scale",
		"granitehybrid.attention.scale",
		"granitehybrid.rope.scaling.finetuned",
	} {
		t.Run(key, func(t *testing.T) {
			_, err := Load(testmodels.GGUFWithString(t, path, key, "x"))
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), key) {
				t.Fatalf("%s = \"x\": err %v, want ErrFormat naming the key", key, err)
			}
		})
	}
}
