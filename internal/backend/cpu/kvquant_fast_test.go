package cpu_test

import (
	"math"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/internal/backend/cpu"
)

// TestKVQuantGroupedMatchesRows holds the grouped attention of quantized
// values (values dequantized once per KV head for a tile of rows and
// every query head of the group) to the row-by-row path over a prompt of
// several tiles and value runs: the same logits,
// bit for bit, for the prompt and the decode steps, over the rotated
// model (head dim 128) with each value type.
func TestKVQuantGroupedMatchesRows(t *testing.T) {
	follow := []int{5, 300, 77, 12}
	// A prompt of 150 ids: three tiles of rows, three runs of values.
	saved := kvPrompt
	defer func() { kvPrompt = saved }()
	kvPrompt = make([]int, 150)
	for i := range kvPrompt {
		kvPrompt[i] = (i*37 + 11) % 500
	}
	for _, v := range []fusion.KVType{fusion.KVQ8_0, fusion.KVQ4_0, fusion.KVQ4_1, fusion.KVQ5_0, fusion.KVQ5_1, fusion.KVIQ4NL} {
		was := cpu.SetGroupedAttention(false)
		wantP, wantD, _ := kvRun(t, "testdata/kvquant/kvrot-qwen3.gguf", fusion.KVQ4_0, v, false, follow)
		cpu.SetGroupedAttention(true)
		gotP, gotD, _ := kvRun(t, "testdata/kvquant/kvrot-qwen3.gguf", fusion.KVQ4_0, v, false, follow)
		cpu.SetGroupedAttention(was)
		for i, rows := range [][2][][]float32{{wantP, gotP}, {wantD, gotD}} {
		rowLoop:
			for r := range rows[0] {
				for j, x := range rows[0][r] {
					if math.Float32bits(rows[1][r][j]) != math.Float32bits(x) {
						t.Errorf("values %v: %s row %d logit %d: grouped %g, rows %g", v, [2]string{"prompt", "decode"}[i], r, j, rows[1][r][j], x)
						break rowLoop
					}
				}
			}
		}
	}
}
