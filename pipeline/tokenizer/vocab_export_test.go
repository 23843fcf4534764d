package tokenizer

import (
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPiecesMatchExportVocab checks VocabSize, Piece, ID and Score against
// spm_export_vocab's listing of every conformance model.
func TestPiecesMatchExportVocab(t *testing.T) {
	for _, model := range conformanceModels {
		t.Run(model, func(t *testing.T) {
			tok, err := LoadFile(modelPath(t, model))
			if err != nil {
				t.Fatal(err)
			}
			lines := readLines(t, filepath.Join(spmData, model+".vocab.tsv"))
			if tok.VocabSize() != len(lines) {
				t.Fatalf("VocabSize %d, spm_export_vocab lists %d", tok.VocabSize(), len(lines))
			}
			for id, line := range lines {
				piece, scoreText, ok := strings.Cut(line, "\t")
				if !ok {
					t.Fatalf("line %d: no tab in %q", id+1, line)
				}
				score, err := strconv.ParseFloat(scoreText, 64)
				if err != nil {
					t.Fatal(err)
				}
				if got := tok.Piece(id); got != piece {
					t.Errorf("Piece(%d) = %q, spm %q", id, got, piece)
				}
				if got, ok := tok.ID(piece); !ok || got != id {
					t.Errorf("ID(%q) = %d, %v; spm %d", piece, got, ok, id)
				}
				// spm prints six significant digits.
				if got := float64(tok.Score(id)); math.Abs(got-score) > 5e-6*math.Max(1, math.Abs(score)) {
					t.Errorf("Score(%d) = %v, spm %v", id, got, score)
				}
			}
			for _, id := range []int{-1, tok.VocabSize()} {
				if tok.Piece(id) != "" || tok.Score(id) != 0 || tok.IsControl(id) || tok.IsByte(id) {
					t.Errorf("out-of-range id %d is not empty", id)
				}
			}
			if _, ok := tok.ID("no such piece \u2603"); ok {
				t.Error("ID found a piece that is not in the vocabulary")
			}
		})
	}
}

// TestSpecialIDs checks the special ids against the pieces spm_train was
// told to use (see gen.sh) and the tok512 vocabulary.
func TestSpecialIDs(t *testing.T) {
	tests := []struct {
		model              string
		unk, bos, eos, pad int
		control            []string
	}{
		{"unigram", 0, 1, 2, -1, []string{"<s>", "</s>"}},
		{"unigram_bytes", 0, 1, 2, -1, []string{"<s>", "</s>", "<cls>", "<mask>"}},
		{"bpe_raw", 0, 1, 2, -1, []string{"<s>", "</s>"}},
		{"tok512", 0, 1, 2, -1, []string{"<s>", "</s>"}},
		{"tok512_fromvocab", 0, 1, 2, -1, []string{"<s>", "</s>"}},
	}
	for _, tc := range tests {
		t.Run(tc.model, func(t *testing.T) {
			tok, err := LoadFile(modelPath(t, tc.model))
			if err != nil {
				t.Fatal(err)
			}
			if tok.UNK() != tc.unk || tok.BOS() != tc.bos || tok.EOS() != tc.eos || tok.PAD() != tc.pad {
				t.Errorf("UNK %d BOS %d EOS %d PAD %d, want %d %d %d %d", tok.UNK(), tok.BOS(), tok.EOS(), tok.PAD(), tc.unk, tc.bos, tc.eos, tc.pad)
			}
			controls := 0
			for id := 0; id < tok.VocabSize(); id++ {
				if tok.IsControl(id) {
					controls++
				}
			}
			if controls != len(tc.control) {
				t.Errorf("%d control pieces, want %d", controls, len(tc.control))
			}
			for _, piece := range tc.control {
				id, ok := tok.ID(piece)
				if !ok || !tok.IsControl(id) {
					t.Errorf("%q: id %d found %v, not a control piece", piece, id, ok)
				}
				// Control pieces are never produced from their text.
				for _, got := range tok.Encode(piece) {
					if got == id {
						t.Errorf("Encode(%q) produced the control id %d", piece, id)
					}
				}
			}
		})
	}
}
