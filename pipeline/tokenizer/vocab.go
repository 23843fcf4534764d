package tokenizer

import (
	"fmt"

	"github.com/gpurun/gpurun/tensors/model"
)

// FromVocab builds a serialized ModelProto from a plain vocabulary (as
// GGUF and llama2.c carry it). The result loads with Load and with
// SentencePiece itself.
//
// Choices, matching how llama.cpp runs these vocabularies:
//   - Model "bpe" (also "llama", GGUF's name for it) becomes a BPE model,
//     "unigram" a unigram model.
//   - byte_fallback is on exactly when the vocabulary has BYTE pieces.
//   - The normalizer is "identity" with add_dummy_prefix from the Vocab,
//     remove_extra_whitespaces false and escape_whitespaces true. llama.cpp
//     does not collapse whitespace runs or strip leading/trailing spaces,
//     so neither does this model; a SentencePiece model trained with the
//     default remove_extra_whitespaces (tok512.model is one) tokenizes the
//     same except on text with such runs.
//   - Without Types every piece is NORMAL except UNK (UNKNOWN), BOS, EOS
//     and PAD (CONTROL). A vocabulary without an UNKNOWN piece gets its UNK
//     index marked UNKNOWN; SentencePiece requires one.
func FromVocab(v *model.Vocab) ([]byte, error) {
	if v == nil || len(v.Pieces) == 0 {
		return nil, fmt.Errorf("%w: no pieces", ErrInvalidVocab)
	}
	n := len(v.Pieces)
	if len(v.Scores) != 0 && len(v.Scores) != n {
		return nil, fmt.Errorf("%w: %d scores for %d pieces", ErrInvalidVocab, len(v.Scores), n)
	}
	if len(v.Types) != 0 && len(v.Types) != n {
		return nil, fmt.Errorf("%w: %d types for %d pieces", ErrInvalidVocab, len(v.Types), n)
	}
	var modelType int32
	switch v.Model {
	case "bpe", "llama":
		modelType = modelBPE
	case "unigram":
		modelType = modelUnigram
	default:
		return nil, fmt.Errorf("%w: model %q, want bpe or unigram", ErrInvalidVocab, v.Model)
	}
	for _, s := range []struct {
		name string
		id   int
	}{{"BOS", v.BOS}, {"EOS", v.EOS}, {"UNK", v.UNK}, {"PAD", v.PAD}} {
		if s.id < -1 || s.id >= n {
			return nil, fmt.Errorf("%w: %s id %d outside [-1, %d)", ErrInvalidVocab, s.name, s.id, n)
		}
	}

	m := &modelProto{pieces: make([]pieceProto, n)}
	hasUnknown, hasBytes := false, false
	for i, piece := range v.Pieces {
		typ := int32(typeNormal)
		switch {
		case len(v.Types) != 0:
			typ = v.Types[i]
		case i == v.UNK:
			typ = typeUnknown
		case i == v.BOS || i == v.EOS || i == v.PAD:
			typ = typeControl
		}
		hasUnknown = hasUnknown || typ == typeUnknown
		hasBytes = hasBytes || typ == typeByte
		p := pieceProto{piece: piece, hasPiece: true, hasScore: true}
		if len(v.Scores) != 0 {
			p.score = v.Scores[i]
		}
		if typ != typeNormal {
			p.typ = some(typ)
		}
		m.pieces[i] = p
	}
	if !hasUnknown && v.UNK >= 0 {
		m.pieces[v.UNK].typ = some(int32(typeUnknown))
	}

	tr := &m.trainer
	tr.present = true
	tr.modelType = some(modelType)
	tr.vocabSize = some(int32(n))
	tr.byteFallback = some(hasBytes)
	special := func(id int, idField *opt[int32], pieceField *opt[string]) {
		*idField = some(int32(id))
		if id >= 0 {
			*pieceField = some(v.Pieces[id])
		}
	}
	special(v.UNK, &tr.unkID, &tr.unkPiece)
	special(v.BOS, &tr.bosID, &tr.bosPiece)
	special(v.EOS, &tr.eosID, &tr.eosPiece)
	special(v.PAD, &tr.padID, &tr.padPiece)

	ns := &m.normalizer
	ns.present = true
	ns.name = some("identity")
	ns.addDummyPrefix = some(v.AddDummyPrefix)
	ns.removeExtraSpaces = some(false)
	ns.escapeWhitespaces = some(true)

	if _, err := newTokenizer(m); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidVocab, err)
	}
	return m.marshal(), nil
}
