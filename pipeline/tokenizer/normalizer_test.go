package tokenizer

import (
	"path/filepath"
	"testing"
)

// TestNormalizeMatchesSpmNormalize compares the normalizer with
// spm_normalize --use_internal_normalization line by line. That tool runs
// the model's NormalizerSpec alone: without the model's user-defined
// symbols and without trainer_spec.treat_whitespace_as_suffix, so the
// comparison does too (the encoding tests cover both).
func TestNormalizeMatchesSpmNormalize(t *testing.T) {
	for _, model := range conformanceModels {
		for _, input := range []string{"corpus", "edge", "random"} {
			t.Run(model+"/"+input, func(t *testing.T) {
				tok, err := LoadFile(modelPath(t, model))
				if err != nil {
					t.Fatal(err)
				}
				norm := tok.norm
				norm.userDefined = nil
				norm.spaceAsSuffix = false
				lines := readLines(t, filepath.Join(spmData, input+".txt"))
				want := readLines(t, filepath.Join(spmData, model+"."+input+".normalized"))
				if len(want) != len(lines) {
					t.Fatalf("%d input lines, %d normalized lines", len(lines), len(want))
				}
				bad := 0
				for i, line := range lines {
					if got := norm.normalize(line); got != want[i] {
						t.Errorf("line %d %q: normalize %q, spm_normalize %q", i+1, line, got, want[i])
						if bad++; bad > 10 {
							t.Fatal("too many mismatches")
						}
					}
				}
			})
		}
	}
}
