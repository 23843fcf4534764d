package verify

import (
	"errors"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/internal/llama2c"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

func stories(t *testing.T) *model.Checkpoint {
	t.Helper()
	ck, err := llama2c.Load(testmodels.Path(t, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	return ck
}

func TestComplete(t *testing.T) {
	without := func(name string) func(*model.Checkpoint) {
		return func(ck *model.Checkpoint) {
			ck.Tensors = slices.DeleteFunc(ck.Tensors, func(t *tensors.Tensor) bool { return t.Name == name })
		}
	}
	for _, tc := range []struct {
		name   string
		modify func(*model.Checkpoint)
		ok     bool
	}{
		{"as loaded", func(*model.Checkpoint) {}, true},
		{"missing wq of the last layer", without(model.Layer(4, model.WQ)), false},
		{"missing embedding", without(model.TokenEmbedding), false},
		{"missing final norm", without(model.FinalNorm), false},
		{"wrong wk shape", func(ck *model.Checkpoint) { ck.Tensor(model.Layer(1, model.WK)).Shape = []int{64, 64} }, false},
		{"duplicate", func(ck *model.Checkpoint) { ck.Tensors = append(ck.Tensors, ck.Tensors[3]) }, false},
		{"gated config without gate", without(model.Layer(0, model.WGate)), false},
		{"parallel needs no ffn norm", func(ck *model.Checkpoint) {
			ck.Config.Parallel = true
			without(model.Layer(0, model.FFNNorm))(ck)
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ck := stories(t)
			tc.modify(ck)
			err := Complete(ck)
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrIncomplete)) {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestCompleteDerivesConfig(t *testing.T) {
	ck := stories(t)
	ck.Config.VocabSize, ck.Config.Tied, ck.Config.QKVBias = 0, false, true
	if err := Complete(ck); err != nil {
		t.Fatal(err)
	}
	// stories260K shares its classifier and has no biases.
	if ck.Config.VocabSize != 512 || !ck.Config.Tied || ck.Config.QKVBias {
		t.Errorf("derived vocab %d tied %v qkv bias %v", ck.Config.VocabSize, ck.Config.Tied, ck.Config.QKVBias)
	}
}
