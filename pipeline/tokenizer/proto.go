package tokenizer

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// Piece types as numbered by ModelProto.SentencePiece.Type.
const (
	typeNormal      = 1
	typeUnknown     = 2
	typeControl     = 3
	typeUserDefined = 4
	typeUnused      = 5
	typeByte        = 6
)

// Model types as numbered by TrainerSpec.ModelType.
const (
	modelUnigram = 1
	modelBPE     = 2
	modelWord    = 3
	modelChar    = 4
)

// Field numbers of sentencepiece_model.proto that this package reads or
// writes. Every other field is kept as raw bytes and written back unchanged.
const (
	fieldModelPieces     = 1
	fieldModelTrainer    = 2
	fieldModelNormalizer = 3

	fieldPiecePiece = 1
	fieldPieceScore = 2
	fieldPieceType  = 3

	fieldTrainerModelType      = 3
	fieldTrainerVocabSize      = 4
	fieldTrainerWSAsSuffix     = 24
	fieldTrainerSplitDigits    = 25
	fieldTrainerByteFallback   = 35
	fieldTrainerUnkID          = 40
	fieldTrainerBosID          = 41
	fieldTrainerEosID          = 42
	fieldTrainerPadID          = 43
	fieldTrainerUnkSurface     = 44
	fieldTrainerUnkPiece       = 45
	fieldTrainerBosPiece       = 46
	fieldTrainerEosPiece       = 47
	fieldTrainerPadPiece       = 48
	fieldNormName              = 1
	fieldNormCharsmap          = 2
	fieldNormAddDummyPrefix    = 3
	fieldNormRemoveExtraSpaces = 4
	fieldNormEscapeWhitespaces = 5
)

// opt is a proto2 optional scalar: the value and whether it was present, so
// that absent fields keep their proto default and are not written back.
type opt[T any] struct {
	v   T
	set bool
}

func some[T any](v T) opt[T] { return opt[T]{v: v, set: true} }

func (o opt[T]) or(def T) T {
	if o.set {
		return o.v
	}
	return def
}

type pieceProto struct {
	piece   string
	score   float32
	typ     opt[int32] // default NORMAL
	unknown []byte
}

func (p *pieceProto) pieceType() int32 { return p.typ.or(typeNormal) }

type trainerSpec struct {
	modelType    opt[int32]
	vocabSize    opt[int32]
	wsAsSuffix   opt[bool]
	splitDigits  opt[bool]
	byteFallback opt[bool]
	unkID        opt[int32]
	bosID        opt[int32]
	eosID        opt[int32]
	padID        opt[int32]
	unkSurface   opt[string]
	unkPiece     opt[string]
	bosPiece     opt[string]
	eosPiece     opt[string]
	padPiece     opt[string]
	unknown      []byte
	present      bool
}

type normalizerSpec struct {
	name              opt[string]
	charsmap          opt[[]byte]
	addDummyPrefix    opt[bool]
	removeExtraSpaces opt[bool]
	escapeWhitespaces opt[bool]
	unknown           []byte
	present           bool
}

type modelProto struct {
	pieces     []pieceProto
	trainer    trainerSpec
	normalizer normalizerSpec
	unknown    []byte
}

// protoReader walks the fields of one message, checking every length.
type protoReader struct {
	b   []byte
	err error
}

// next returns the next field, its wire type and the raw bytes of the whole
// field (tag included) so unknown fields can be preserved verbatim.
func (r *protoReader) next() (num protowire.Number, typ protowire.Type, raw []byte, ok bool) {
	if r.err != nil || len(r.b) == 0 {
		return 0, 0, nil, false
	}
	num, typ, n := protowire.ConsumeTag(r.b)
	if n < 0 {
		r.err = fmt.Errorf("%w: bad tag: %w", ErrInvalidProto, protowire.ParseError(n))
		return 0, 0, nil, false
	}
	m := protowire.ConsumeFieldValue(num, typ, r.b[n:])
	if m < 0 {
		r.err = fmt.Errorf("%w: field %d: %w", ErrInvalidProto, num, protowire.ParseError(m))
		return 0, 0, nil, false
	}
	raw = r.b[:n+m]
	r.b = r.b[n+m:]
	return num, typ, raw, true
}

// value returns the payload of a field returned by next (after the tag).
func fieldValue(raw []byte) []byte {
	_, _, n := protowire.ConsumeTag(raw)
	return raw[n:]
}

func varintValue(raw []byte) uint64 {
	v, _ := protowire.ConsumeVarint(fieldValue(raw))
	return v
}

func bytesValue(raw []byte) []byte {
	v, _ := protowire.ConsumeBytes(fieldValue(raw))
	return v
}

func fixed32Value(raw []byte) uint32 {
	v, _ := protowire.ConsumeFixed32(fieldValue(raw))
	return v
}

// parseModelProto decodes a serialized ModelProto. Fields it does not know,
// and known fields with an unexpected wire type, are kept as unknown bytes.
func parseModelProto(b []byte) (*modelProto, error) {
	m := &modelProto{}
	r := protoReader{b: b}
	for {
		num, typ, raw, ok := r.next()
		if !ok {
			break
		}
		var err error
		switch {
		case num == fieldModelPieces && typ == protowire.BytesType:
			var p pieceProto
			err = parsePiece(bytesValue(raw), &p)
			m.pieces = append(m.pieces, p)
		case num == fieldModelTrainer && typ == protowire.BytesType:
			m.trainer.present = true
			err = parseTrainer(bytesValue(raw), &m.trainer)
		case num == fieldModelNormalizer && typ == protowire.BytesType:
			m.normalizer.present = true
			err = parseNormalizer(bytesValue(raw), &m.normalizer)
		default:
			m.unknown = append(m.unknown, raw...)
		}
		if err != nil {
			return nil, err
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return m, nil
}

func parsePiece(b []byte, p *pieceProto) error {
	r := protoReader{b: b}
	for {
		num, typ, raw, ok := r.next()
		if !ok {
			break
		}
		switch {
		case num == fieldPiecePiece && typ == protowire.BytesType:
			p.piece = string(bytesValue(raw))
		case num == fieldPieceScore && typ == protowire.Fixed32Type:
			p.score = math.Float32frombits(fixed32Value(raw))
		case num == fieldPieceType && typ == protowire.VarintType:
			p.typ = some(int32(varintValue(raw)))
		default:
			p.unknown = append(p.unknown, raw...)
		}
	}
	if r.err != nil {
		return fmt.Errorf("piece: %w", r.err)
	}
	return nil
}

func parseTrainer(b []byte, t *trainerSpec) error {
	ints := map[protowire.Number]*opt[int32]{
		fieldTrainerModelType: &t.modelType,
		fieldTrainerVocabSize: &t.vocabSize,
		fieldTrainerUnkID:     &t.unkID,
		fieldTrainerBosID:     &t.bosID,
		fieldTrainerEosID:     &t.eosID,
		fieldTrainerPadID:     &t.padID,
	}
	bools := map[protowire.Number]*opt[bool]{
		fieldTrainerWSAsSuffix:   &t.wsAsSuffix,
		fieldTrainerSplitDigits:  &t.splitDigits,
		fieldTrainerByteFallback: &t.byteFallback,
	}
	strs := map[protowire.Number]*opt[string]{
		fieldTrainerUnkSurface: &t.unkSurface,
		fieldTrainerUnkPiece:   &t.unkPiece,
		fieldTrainerBosPiece:   &t.bosPiece,
		fieldTrainerEosPiece:   &t.eosPiece,
		fieldTrainerPadPiece:   &t.padPiece,
	}
	r := protoReader{b: b}
	for {
		num, typ, raw, ok := r.next()
		if !ok {
			break
		}
		if p, ok := ints[num]; ok && typ == protowire.VarintType {
			*p = some(int32(varintValue(raw)))
		} else if p, ok := bools[num]; ok && typ == protowire.VarintType {
			*p = some(varintValue(raw) != 0)
		} else if p, ok := strs[num]; ok && typ == protowire.BytesType {
			*p = some(string(bytesValue(raw)))
		} else {
			t.unknown = append(t.unknown, raw...)
		}
	}
	if r.err != nil {
		return fmt.Errorf("trainer_spec: %w", r.err)
	}
	return nil
}

func parseNormalizer(b []byte, n *normalizerSpec) error {
	bools := map[protowire.Number]*opt[bool]{
		fieldNormAddDummyPrefix:    &n.addDummyPrefix,
		fieldNormRemoveExtraSpaces: &n.removeExtraSpaces,
		fieldNormEscapeWhitespaces: &n.escapeWhitespaces,
	}
	r := protoReader{b: b}
	for {
		num, typ, raw, ok := r.next()
		if !ok {
			break
		}
		if p, ok := bools[num]; ok && typ == protowire.VarintType {
			*p = some(varintValue(raw) != 0)
		} else if num == fieldNormName && typ == protowire.BytesType {
			n.name = some(string(bytesValue(raw)))
		} else if num == fieldNormCharsmap && typ == protowire.BytesType {
			n.charsmap = some(append([]byte(nil), bytesValue(raw)...))
		} else {
			n.unknown = append(n.unknown, raw...)
		}
	}
	if r.err != nil {
		return fmt.Errorf("normalizer_spec: %w", r.err)
	}
	return nil
}

// marshal serializes the proto: known fields in field-number order, then
// the preserved unknown fields.
func (m *modelProto) marshal() []byte {
	var b []byte
	for i := range m.pieces {
		b = protowire.AppendTag(b, fieldModelPieces, protowire.BytesType)
		b = protowire.AppendBytes(b, m.pieces[i].marshal())
	}
	if m.trainer.present {
		b = protowire.AppendTag(b, fieldModelTrainer, protowire.BytesType)
		b = protowire.AppendBytes(b, m.trainer.marshal())
	}
	if m.normalizer.present {
		b = protowire.AppendTag(b, fieldModelNormalizer, protowire.BytesType)
		b = protowire.AppendBytes(b, m.normalizer.marshal())
	}
	return append(b, m.unknown...)
}

func (p *pieceProto) marshal() []byte {
	var b []byte
	b = appendString(b, fieldPiecePiece, some(p.piece))
	b = protowire.AppendTag(b, fieldPieceScore, protowire.Fixed32Type)
	b = protowire.AppendFixed32(b, math.Float32bits(p.score))
	b = appendInt(b, fieldPieceType, p.typ)
	return append(b, p.unknown...)
}

func (t *trainerSpec) marshal() []byte {
	var b []byte
	b = appendInt(b, fieldTrainerModelType, t.modelType)
	b = appendInt(b, fieldTrainerVocabSize, t.vocabSize)
	b = appendBool(b, fieldTrainerWSAsSuffix, t.wsAsSuffix)
	b = appendBool(b, fieldTrainerSplitDigits, t.splitDigits)
	b = appendBool(b, fieldTrainerByteFallback, t.byteFallback)
	b = appendInt(b, fieldTrainerUnkID, t.unkID)
	b = appendInt(b, fieldTrainerBosID, t.bosID)
	b = appendInt(b, fieldTrainerEosID, t.eosID)
	b = appendInt(b, fieldTrainerPadID, t.padID)
	b = appendString(b, fieldTrainerUnkSurface, t.unkSurface)
	b = appendString(b, fieldTrainerUnkPiece, t.unkPiece)
	b = appendString(b, fieldTrainerBosPiece, t.bosPiece)
	b = appendString(b, fieldTrainerEosPiece, t.eosPiece)
	b = appendString(b, fieldTrainerPadPiece, t.padPiece)
	return append(b, t.unknown...)
}

func (n *normalizerSpec) marshal() []byte {
	var b []byte
	b = appendString(b, fieldNormName, n.name)
	if n.charsmap.set {
		b = protowire.AppendTag(b, fieldNormCharsmap, protowire.BytesType)
		b = protowire.AppendBytes(b, n.charsmap.v)
	}
	b = appendBool(b, fieldNormAddDummyPrefix, n.addDummyPrefix)
	b = appendBool(b, fieldNormRemoveExtraSpaces, n.removeExtraSpaces)
	b = appendBool(b, fieldNormEscapeWhitespaces, n.escapeWhitespaces)
	return append(b, n.unknown...)
}

func appendInt(b []byte, num protowire.Number, v opt[int32]) []byte {
	if !v.set {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	// int32 and enum fields are sign-extended to 64 bits on the wire.
	return protowire.AppendVarint(b, uint64(int64(v.v)))
}

func appendBool(b []byte, num protowire.Number, v opt[bool]) []byte {
	if !v.set {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, protowire.EncodeBool(v.v))
}

func appendString(b []byte, num protowire.Number, v opt[string]) []byte {
	if !v.set {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, v.v)
}
