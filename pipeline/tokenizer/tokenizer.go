package tokenizer

import (
	"fmt"
	"os"
	"strings"
)

const defaultUnkSurface = " \u2047 "

// Tokenizer encodes text to ids and back with a SentencePiece model.
// It is immutable after Load and safe for concurrent use.
type Tokenizer struct {
	proto  *modelProto
	pieces []pieceProto // == proto.pieces

	norm      normalizer
	modelType int32

	// pieceIDs holds NORMAL, USER_DEFINED and UNUSED pieces (those a model
	// may produce from text); reservedIDs the CONTROL, UNKNOWN and BYTE ones.
	pieceIDs    map[string]int
	reservedIDs map[string]int
	userDefined *byteTrie // nil when the model has no user-defined symbols
	trie        *byteTrie // unigram lattice pieces

	unk          int
	byteFallback bool
	byteIDs      [256]int // id of <0xNN>, or unk when missing
	minScore     float32
	maxScore     float32
	unkSurface   string
}

// LoadFile reads and loads a serialized ModelProto.
func LoadFile(path string) (*Tokenizer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := Load(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Load parses a serialized SentencePiece ModelProto and checks it the way
// SentencePiece does when it loads a model.
func Load(b []byte) (*Tokenizer, error) {
	m, err := parseModelProto(b)
	if err != nil {
		return nil, err
	}
	return newTokenizer(m)
}

func newTokenizer(m *modelProto) (*Tokenizer, error) {
	t := &Tokenizer{
		proto:       m,
		pieces:      m.pieces,
		modelType:   m.trainer.modelType.or(modelUnigram),
		pieceIDs:    make(map[string]int, len(m.pieces)),
		reservedIDs: map[string]int{},
		unk:         -1,
		unkSurface:  m.trainer.unkSurface.or(defaultUnkSurface),
	}
	switch t.modelType {
	case modelUnigram, modelBPE, modelChar:
	default:
		return nil, fmt.Errorf("%w: model_type %d", ErrUnsupportedModel, t.modelType)
	}
	t.byteFallback = m.trainer.byteFallback.or(false)
	for id := range m.pieces {
		p := &m.pieces[id]
		if p.piece == "" {
			return nil, fmt.Errorf("%w: piece %d is empty", ErrInvalidProto, id)
		}
		target := t.reservedIDs
		switch typ := p.pieceType(); typ {
		case typeNormal, typeUnused:
			target = t.pieceIDs
		case typeUserDefined:
			target = t.pieceIDs
			if t.userDefined == nil {
				t.userDefined = newByteTrie()
			}
			t.userDefined.insert(p.piece, id)
		case typeUnknown:
			if t.unk >= 0 {
				return nil, fmt.Errorf("%w: second unknown piece %d (first %d)", ErrInvalidProto, id, t.unk)
			}
			t.unk = id
		case typeControl:
		case typeByte:
			if !t.byteFallback {
				return nil, fmt.Errorf("%w: byte piece %q without byte_fallback", ErrInvalidProto, p.piece)
			}
			if _, ok := pieceByte(p.piece); !ok {
				return nil, fmt.Errorf("%w: byte piece %d is %q, not <0xNN>", ErrInvalidProto, id, p.piece)
			}
		default:
			return nil, fmt.Errorf("%w: piece %d has type %d", ErrInvalidProto, id, typ)
		}
		if _, dup := target[p.piece]; dup {
			return nil, fmt.Errorf("%w: piece %q is defined twice", ErrInvalidProto, p.piece)
		}
		target[p.piece] = id
	}
	if t.unk < 0 {
		return nil, fmt.Errorf("%w: no unknown piece", ErrInvalidProto)
	}
	for b := range t.byteIDs {
		t.byteIDs[b] = t.pieceToID(bytePiece(byte(b)))
	}
	t.minScore, t.maxScore = scoreRange(m.pieces)
	if t.modelType == modelUnigram {
		t.trie = newByteTrie()
		for piece, id := range t.pieceIDs {
			t.trie.insert(piece, id)
		}
	}

	ns := &m.normalizer
	t.norm = normalizer{
		userDefined:       t.userDefined,
		addDummyPrefix:    ns.addDummyPrefix.or(true),
		removeExtraSpaces: ns.removeExtraSpaces.or(true),
		escapeWhitespaces: ns.escapeWhitespaces.or(true),
		spaceAsSuffix:     m.trainer.wsAsSuffix.or(false),
	}
	if cm := ns.charsmap.v; len(cm) > 0 {
		c, err := parseCharsmap(cm)
		if err != nil {
			return nil, err
		}
		t.norm.charsmap = c
	}
	return t, nil
}

// bytePiece is the piece name of a byte-fallback byte, e.g. "<0x0A>".
func bytePiece(b byte) string {
	const hex = "0123456789ABCDEF"
	return "<0x" + string([]byte{hex[b>>4], hex[b&15]}) + ">"
}

// pieceByte parses exactly the form bytePiece produces.
func pieceByte(piece string) (byte, bool) {
	if len(piece) != 6 || !strings.HasPrefix(piece, "<0x") || piece[5] != '>' {
		return 0, false
	}
	var v byte
	for _, c := range []byte(piece[3:5]) {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | (c - '0')
		case c >= 'A' && c <= 'F':
			v = v<<4 | (c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return v, true
}

// pieceToID looks a piece up the way SentencePiece's PieceToId does:
// reserved pieces first, then model pieces, else the unknown id.
func (t *Tokenizer) pieceToID(piece string) int {
	if id, ok := t.reservedIDs[piece]; ok {
		return id
	}
	if id, ok := t.pieceIDs[piece]; ok {
		return id
	}
	return t.unk
}

// textPieceID is pieceToID for a piece cut from text. A control piece is
// never produced from text: where SentencePiece's BPE and char models
// would emit one (a one-character control piece) and then fail with
// "all normalized characters are not consumed", the unknown id is used.
func (t *Tokenizer) textPieceID(piece string) int {
	id := t.pieceToID(piece)
	if t.pieces[id].pieceType() == typeControl {
		return t.unk
	}
	return id
}

// matchUserDefined returns the length of the unit starting s: the longest
// user-defined symbol (frozen = true) or one UTF-8 character.
func (t *Tokenizer) matchUserDefined(s string) (length int, frozen bool) {
	if t.userDefined != nil {
		if l := t.userDefined.longestPrefix(s); l > 0 {
			return l, true
		}
	}
	return oneCharLen(s), false
}

// VocabSize is the number of pieces.
func (t *Tokenizer) VocabSize() int { return len(t.pieces) }

// Piece returns the piece of id, or "" when id is out of range.
func (t *Tokenizer) Piece(id int) string {
	if id < 0 || id >= len(t.pieces) {
		return ""
	}
	return t.pieces[id].piece
}

// Score returns the score of id, or 0 when id is out of range.
func (t *Tokenizer) Score(id int) float32 {
	if id < 0 || id >= len(t.pieces) {
		return 0
	}
	return t.pieces[id].score
}

// ID returns the id of piece and whether the vocabulary has it.
func (t *Tokenizer) ID(piece string) (int, bool) {
	if id, ok := t.reservedIDs[piece]; ok {
		return id, true
	}
	id, ok := t.pieceIDs[piece]
	return id, ok
}

// IsControl reports whether id is a control piece (such as <s>), which
// decodes to nothing and is never produced from text.
func (t *Tokenizer) IsControl(id int) bool { return t.typeOf(id) == typeControl }

// IsByte reports whether id is a byte-fallback piece <0xNN>.
func (t *Tokenizer) IsByte(id int) bool { return t.typeOf(id) == typeByte }

func (t *Tokenizer) typeOf(id int) int32 {
	if id < 0 || id >= len(t.pieces) {
		return 0
	}
	return t.pieces[id].pieceType()
}

// specialID resolves a special piece name the way SentencePiece's bos_id()
// and friends do: the id of the named piece if it has the wanted type.
func (t *Tokenizer) specialID(name opt[string], def string, want int32) int {
	id, ok := t.ID(name.or(def))
	if !ok || t.typeOf(id) != want {
		return -1
	}
	return id
}

// BOS is the id of the beginning-of-sentence control piece, or -1.
func (t *Tokenizer) BOS() int { return t.specialID(t.proto.trainer.bosPiece, "<s>", typeControl) }

// EOS is the id of the end-of-sentence control piece, or -1.
func (t *Tokenizer) EOS() int { return t.specialID(t.proto.trainer.eosPiece, "</s>", typeControl) }

// PAD is the id of the padding control piece, or -1.
func (t *Tokenizer) PAD() int { return t.specialID(t.proto.trainer.padPiece, "<pad>", typeControl) }

// UNK is the id of the unknown piece (a loaded model always has one).
func (t *Tokenizer) UNK() int { return t.unk }

// Marshal serializes the model. Fields this package does not interpret are
// written back unchanged, so Load(Marshal()) behaves like the original.
func (t *Tokenizer) Marshal() []byte { return t.proto.marshal() }
