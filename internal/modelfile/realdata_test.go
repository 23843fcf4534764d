package modelfile

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// The real llama2.c stories260K weights and the tok512 SentencePiece model
// go through Write/WriteTask and Open unchanged: f32 tensors compare
// byte-for-byte with the checkpoint file's own bytes, the tokenizer with the
// .model file.
func TestRealCheckpointRoundTrip(t *testing.T) {
	models := testmodels.Dir(t)
	ckpt, err := os.ReadFile(filepath.Join(models, "stories260K.bin"))
	if err != nil {
		t.Fatalf("shared model missing: %v", err)
	}
	tok, err := os.ReadFile(filepath.Join(models, "tok512.model"))
	if err != nil {
		t.Fatalf("shared tokenizer missing: %v", err)
	}
	// llama2.c header: dim, hidden_dim, n_layers, n_heads, n_kv_heads,
	// vocab_size, seq_len; then the token embedding [vocab, dim] and the
	// attention norms [layers, dim].
	var h [7]int32
	if err := binary.Read(bytes.NewReader(ckpt), binary.LittleEndian, &h); err != nil {
		t.Fatal(err)
	}
	dim, layers, vocab := int(h[0]), int(h[2]), int(max(h[5], -h[5]))
	embBytes := ckpt[28 : 28+4*vocab*dim]
	normBytes := ckpt[28+4*vocab*dim : 28+4*vocab*dim+4*layers*dim]
	emb := &tensors.Tensor{Name: model.TokenEmbedding, DType: tensors.F32, Shape: []int{vocab, dim}, Data: embBytes}
	norm := &tensors.Tensor{Name: model.Layer(0, model.AttnNorm), DType: tensors.F32, Shape: []int{dim}, Data: normBytes[:4*dim]}
	embVals, err := emb.Float32()
	if err != nil {
		t.Fatal(err)
	}
	q4, err := tensors.Quantize(model.LMHead, []int{vocab, dim}, embVals, tensors.I4, 32, tensors.F16)
	if err != nil {
		t.Fatal(err)
	}
	cfg := model.Config{
		Arch: model.ArchLlama, VocabSize: vocab, Dim: dim, HiddenDim: int(h[1]), Layers: layers,
		Heads: int(h[3]), KVHeads: int(h[4]), HeadDim: dim / int(h[3]), MaxSeqLen: int(h[6]),
		Norm: model.NormRMS, NormEps: 1e-5, RopeStyle: model.RopeInterleaved, RopeDims: dim / int(h[3]), RopeBase: 10000,
		Act: model.ActSiLU, GatedFFN: true, BOS: 1, EOS: 2, AddBOS: true,
	}
	var fb bytes.Buffer
	if err := Write(&fb, cfg, []*tensors.Tensor{emb, norm, q4}, WriteOptions{Tokenizer: tok}); err != nil {
		t.Fatal(err)
	}
	js, _ := ConfigJSON(cfg)
	dir := t.TempDir()
	files := map[string][]byte{"m.tflite": fb.Bytes(), "m.task": writeTask(t, fb.Bytes(), tok, js)}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Tensor(model.TokenEmbedding); got == nil || !bytes.Equal(got.Data, embBytes) {
			t.Errorf("%s: token embedding not byte-identical to stories260K.bin", name)
		}
		if got := f.Tensor(model.Layer(0, model.AttnNorm)); got == nil || !bytes.Equal(got.Data, normBytes[:4*dim]) {
			t.Errorf("%s: attention norm not byte-identical", name)
		}
		if got := f.Tensor(model.LMHead); got == nil || got.Scales == nil || !bytes.Equal(got.Data, q4.Data) || !bytes.Equal(got.Scales.Data, q4.Scales.Data) {
			t.Errorf("%s: int4 head or its scales changed", name)
		}
		if !bytes.Equal(f.Tokenizer(), tok) || f.Config().Dim != dim || f.Config().VocabSize != 512 {
			t.Errorf("%s: tokenizer %d bytes, config %+v", name, len(f.Tokenizer()), f.Config())
		}
		f.Close()
	}
}
