package tokenizer

import (
	"fmt"
	"math"
	"sort"

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
	unknown []rawField
	// hasPiece and hasScore record presence so a parsed piece is written
	// back exactly; pieces built here always set both.
	hasPiece, hasScore bool
}

// rawField is one serialized field (tag included) kept verbatim.
type rawField struct {
	num protowire.Number
	raw []byte
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
	unknown      []rawField
	present      bool
}

type normalizerSpec struct {
	name              opt[string]
	charsmap          opt[[]byte]
	addDummyPrefix    opt[bool]
	removeExtraSpaces opt[bool]
	escapeWhitespaces opt[bool]
	unknown           []rawField
	present           bool
}

type modelProto struct {
	pieces     []pieceProto
	trainer    trainerSpec
	normalizer normalizerSpec
	unknown    []rawField
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
			m.unknown = append(m.unknown, rawField{num, append([]byte(nil), raw...)})
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
			p.piece, p.hasPiece = string(bytesValue(raw)), true
		case num == fieldPieceScore && typ == protowire.Fixed32Type:
			p.score, p.hasScore = math.Float32frombits(fixed32Value(raw)), true
		case num == fieldPieceType && typ == protowire.VarintType:
			p.typ = some(int32(varintValue(raw)))
		default:
			p.unknown = append(p.unknown, rawField{num, append([]byte(nil), raw...)})
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
			t.unknown = append(t.unknown, rawField{num, append([]byte(nil), raw...)})
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
			n.unknown = append(n.unknown, rawField{num, append([]byte(nil), raw...)})
		}
	}
	if r.err != nil {
		return fmt.Errorf("normalizer_spec: %w", r.err)
	}
	return nil
}

// marshal serializes the proto with all fields, known and preserved, in
// field-number order as the reference writes them, so a model written by
// SentencePiece round-trips byte for byte.
func (m *modelProto) marshal() []byte {
	var w fieldWriter
	for i := range m.pieces {
		w.message(fieldModelPieces, m.pieces[i].marshal())
	}
	if m.trainer.present {
		w.message(fieldModelTrainer, m.trainer.marshal())
	}
	if m.normalizer.present {
		w.message(fieldModelNormalizer, m.normalizer.marshal())
	}
	return w.finish(m.unknown)
}

func (p *pieceProto) marshal() []byte {
	var w fieldWriter
	if p.hasPiece {
		w.str(fieldPiecePiece, some(p.piece))
	}
	if p.hasScore {
		w.add(fieldPieceScore, protowire.AppendFixed32(protowire.AppendTag(nil, fieldPieceScore, protowire.Fixed32Type), math.Float32bits(p.score)))
	}
	w.int(fieldPieceType, p.typ)
	return w.finish(p.unknown)
}

func (t *trainerSpec) marshal() []byte {
	var w fieldWriter
	w.int(fieldTrainerModelType, t.modelType)
	w.int(fieldTrainerVocabSize, t.vocabSize)
	w.bool(fieldTrainerWSAsSuffix, t.wsAsSuffix)
	w.bool(fieldTrainerSplitDigits, t.splitDigits)
	w.bool(fieldTrainerByteFallback, t.byteFallback)
	w.int(fieldTrainerUnkID, t.unkID)
	w.int(fieldTrainerBosID, t.bosID)
	w.int(fieldTrainerEosID, t.eosID)
	w.int(fieldTrainerPadID, t.padID)
	w.str(fieldTrainerUnkSurface, t.unkSurface)
	w.str(fieldTrainerUnkPiece, t.unkPiece)
	w.str(fieldTrainerBosPiece, t.bosPiece)
	w.str(fieldTrainerEosPiece, t.eosPiece)
	w.str(fieldTrainerPadPiece, t.padPiece)
	return w.finish(t.unknown)
}

func (n *normalizerSpec) marshal() []byte {
	var w fieldWriter
	w.str(fieldNormName, n.name)
	if n.charsmap.set {
		w.add(fieldNormCharsmap, protowire.AppendBytes(protowire.AppendTag(nil, fieldNormCharsmap, protowire.BytesType), n.charsmap.v))
	}
	w.bool(fieldNormAddDummyPrefix, n.addDummyPrefix)
	w.bool(fieldNormRemoveExtraSpaces, n.removeExtraSpaces)
	w.bool(fieldNormEscapeWhitespaces, n.escapeWhitespaces)
	return w.finish(n.unknown)
}

// fieldWriter collects the fields of one message.
type fieldWriter struct{ fields []rawField }

func (w *fieldWriter) add(num protowire.Number, raw []byte) {
	w.fields = append(w.fields, rawField{num, raw})
}

func (w *fieldWriter) message(num protowire.Number, body []byte) {
	w.add(num, protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), body))
}

func (w *fieldWriter) int(num protowire.Number, v opt[int32]) {
	if v.set {
		// int32 and enum fields are sign-extended to 64 bits on the wire.
		w.add(num, protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), uint64(int64(v.v))))
	}
}

func (w *fieldWriter) bool(num protowire.Number, v opt[bool]) {
	if v.set {
		w.add(num, protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), protowire.EncodeBool(v.v)))
	}
}

func (w *fieldWriter) str(num protowire.Number, v opt[string]) {
	if v.set {
		w.add(num, protowire.AppendString(protowire.AppendTag(nil, num, protowire.BytesType), v.v))
	}
}

// finish merges the preserved fields in and concatenates everything in
// field-number order; fields with equal numbers keep their order.
func (w *fieldWriter) finish(unknown []rawField) []byte {
	all := append(w.fields, unknown...)
	sort.SliceStable(all, func(i, j int) bool { return all[i].num < all[j].num })
	size := 0
	for _, f := range all {
		size += len(f.raw)
	}
	b := make([]byte, 0, size)
	for _, f := range all {
		b = append(b, f.raw...)
	}
	return b
}
