package tokenizer

// Encode tokenizes text into piece ids as spm_encode --output_format=id
// does: no BOS or EOS is added. Characters missing from the vocabulary
// become their UTF-8 bytes' <0xNN> pieces when the model has byte
// fallback, otherwise one unknown id per run of unknown characters.
func (t *Tokenizer) Encode(text string) []int {
	var ids []int
	t.encode(text, func(_ string, id int) { ids = append(ids, id) })
	return ids
}

// EncodePieces is Encode returning piece strings (spm_encode's default
// output); unknown runs are returned as their normalized text.
func (t *Tokenizer) EncodePieces(text string) []string {
	var pieces []string
	t.encode(text, func(piece string, _ int) { pieces = append(pieces, piece) })
	return pieces
}

// encode normalizes text, runs the model and applies SentencePiece's
// post-processing of unknown pieces.
func (t *Tokenizer) encode(text string, out func(piece string, id int)) {
	normalized := t.norm.normalize(text)
	prevUnk := false
	emit := func(piece string, id int) {
		if id != t.unk {
			prevUnk = false
			out(piece, id)
			return
		}
		if t.byteFallback {
			for i := 0; i < len(piece); i++ {
				b := piece[i]
				out(bytePiece(b), t.byteIDs[b])
			}
			prevUnk = false
			return
		}
		if prevUnk {
			return // consecutive unknown pieces collapse into one
		}
		prevUnk = true
		out(piece, id)
	}
	switch t.modelType {
	case modelBPE:
		t.encodeBPE(normalized, emit)
	case modelUnigram:
		t.encodeUnigram(normalized, emit)
	case modelChar:
		for pos := 0; pos < len(normalized); {
			l, _ := t.matchUserDefined(normalized[pos:])
			emit(normalized[pos:pos+l], t.textPieceID(normalized[pos:pos+l]))
			pos += l
		}
	}
}
