package modelfile

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestSummary(t *testing.T) {
	s := testTensors(t, 2, 64) // 2x64 each: f32, f16, bf16, ids[3], then 4 quantized
	f, err := parse(writeModel(t, s, WriteOptions{Tokenizer: []byte("12345")}))
	if err != nil {
		t.Fatal(err)
	}
	sum := f.Summary()
	type want struct {
		dtype      string
		bytes      int64
		block      int // 0: not quantized
		perChannel bool
		scaleDType string
		scaleBytes int64
	}
	wants := []want{
		{"f32", 512, 0, false, "", 0},
		{"f16", 256, 0, false, "", 0},
		{"bf16", 256, 0, false, "", 0},
		{"int32", 12, 0, false, "", 0},
		{"int8", 128, 64, true, "f32", 8},  // 2 rows x 1 f32 scale
		{"int8", 128, 32, false, "f16", 8}, // 2 rows x 2 blocks x f16
		{"int4", 64, 64, true, "f16", 4},   // 2 rows x f16
		{"int4", 64, 32, false, "f32", 16}, // 2 rows x 2 blocks x f32
	}
	if len(sum.Tensors) != len(wants) {
		t.Fatalf("%d tensors in summary", len(sum.Tensors))
	}
	var total, params int64
	for i, w := range wants {
		got := sum.Tensors[i]
		if got.DType != w.dtype || got.Bytes != w.bytes || got.Name != s[i].t.Name {
			t.Errorf("tensor %d: %+v, want %+v", i, got, w)
		}
		total += w.bytes + w.scaleBytes
		if w.dtype == "int32" {
			params += 3
		} else {
			params += 128
		}
		q := got.Quantization
		if (q != nil) != (w.block != 0) {
			t.Fatalf("tensor %d quantization %+v", i, q)
		}
		if q != nil && (q.Block != w.block || q.PerChannel != w.perChannel || q.ScaleDType != w.scaleDType || q.ScaleBytes != w.scaleBytes) {
			t.Errorf("tensor %d quantization %+v, want %+v", i, *q, w)
		}
	}
	if sum.TensorBytes != total || sum.Params != params || sum.TokenizerBytes != 5 || sum.Format != FormatTFLite || sum.Config == nil {
		t.Errorf("totals: %d bytes (want %d), %d params (want %d), tokenizer %d", sum.TensorBytes, total, sum.Params, params, sum.TokenizerBytes)
	}
	if sum.BytesByDType["int8"] != 256 || sum.BytesByDType["scales"] != 36 {
		t.Errorf("by dtype %v", sum.BytesByDType)
	}
	js, err := json.Marshal(sum)
	if err != nil {
		t.Fatal(err)
	}
	var back Summary
	if err := json.Unmarshal(js, &back); err != nil || len(back.Tensors) != len(wants) {
		t.Fatalf("JSON round trip: %v", err)
	}
	var text bytes.Buffer
	if err := sum.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, needle := range []string{s[0].t.Name, "per channel, f32 scales", "block 32, f16 scales", "arch:"} {
		if !strings.Contains(text.String(), needle) {
			t.Errorf("text summary lacks %q:\n%s", needle, text.String())
		}
	}
}
