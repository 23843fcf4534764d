package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
)

// ValueType is the type tag of a metadata value.
type ValueType uint32

// Metadata value types, numbered as the GGUF specification.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// size is the encoded size of a fixed-size type, 0 for string and array.
func (t ValueType) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// minSize is the smallest encoding of a value of type t: a string or array
// has at least its 8-byte length (and an array its 4-byte element type).
func (t ValueType) minSize() int {
	switch t {
	case TypeString:
		return 8
	case TypeArray:
		return 12
	}
	return t.size()
}

// maxArrayDepth bounds nested arrays so a crafted file cannot recurse deeply.
const maxArrayDepth = 8

// Value is one metadata value. It keeps its encoded bytes (aliasing the file)
// and decodes on access, so large arrays cost nothing until they are read.
type Value struct {
	Type ValueType
	// Elem and Len describe an array: its element type and element count.
	Elem ValueType
	Len  int
	// raw is the encoding without the type tag: the scalar bytes, the string
	// bytes without their length, or an array's elements without its header.
	raw []byte
}

// readValue decodes one value of type t at r.
func readValue(r *reader, t ValueType, depth int) (Value, error) {
	switch t {
	case TypeString:
		b, err := r.str("string value")
		return Value{Type: t, raw: b}, err
	case TypeArray:
		if depth >= maxArrayDepth {
			return Value{}, fmt.Errorf("%w: arrays nested deeper than %d", ErrFormat, maxArrayDepth)
		}
		et, err := r.u32("array element type")
		if err != nil {
			return Value{}, err
		}
		elem := ValueType(et)
		if elem.minSize() == 0 {
			return Value{}, fmt.Errorf("%w: array of unknown value type %d", ErrFormat, et)
		}
		n, err := r.count("array length", elem.minSize())
		if err != nil {
			return Value{}, err
		}
		start := r.off
		if sz := elem.size(); sz > 0 {
			if _, err := r.bytes(uint64(n)*uint64(sz), "array data"); err != nil {
				return Value{}, err
			}
		} else {
			for range n {
				if _, err := readValue(r, elem, depth+1); err != nil {
					return Value{}, err
				}
			}
		}
		return Value{Type: t, Elem: elem, Len: n, raw: r.data[start:r.off:r.off]}, nil
	}
	sz := t.size()
	if sz == 0 {
		return Value{}, fmt.Errorf("%w: unknown value type %d", ErrFormat, uint32(t))
	}
	b, err := r.bytes(uint64(sz), t.String()+" value")
	if err != nil {
		return Value{}, err
	}
	if t == TypeBool && b[0] > 1 {
		return Value{}, fmt.Errorf("%w: bool value %d", ErrFormat, b[0])
	}
	return Value{Type: t, raw: b}, nil
}

// Int returns an integer value of any width and signedness as int64; ok is
// false for other types and for uint64 values above MaxInt64.
func (v Value) Int() (int64, bool) {
	b := v.raw
	if v.Type.size() == 0 || len(b) < v.Type.size() {
		return 0, false // the zero Value or a non-scalar
	}
	switch v.Type {
	case TypeUint8:
		return int64(b[0]), true
	case TypeInt8:
		return int64(int8(b[0])), true
	case TypeUint16:
		return int64(binary.LittleEndian.Uint16(b)), true
	case TypeInt16:
		return int64(int16(binary.LittleEndian.Uint16(b))), true
	case TypeUint32:
		return int64(binary.LittleEndian.Uint32(b)), true
	case TypeInt32:
		return int64(int32(binary.LittleEndian.Uint32(b))), true
	case TypeUint64:
		u := binary.LittleEndian.Uint64(b)
		return int64(u), u <= math.MaxInt64
	case TypeInt64:
		return int64(binary.LittleEndian.Uint64(b)), true
	}
	return 0, false
}

// Float returns a float32 or float64 value.
func (v Value) Float() (float64, bool) {
	if len(v.raw) < v.Type.size() {
		return 0, false
	}
	switch v.Type {
	case TypeFloat32:
		return float64(f32(v.raw)), true
	case TypeFloat64:
		return math.Float64frombits(binary.LittleEndian.Uint64(v.raw)), true
	}
	return 0, false
}

// Bool returns a bool value.
func (v Value) Bool() (bool, bool) {
	if v.Type != TypeBool || len(v.raw) < 1 {
		return false, false
	}
	return v.raw[0] != 0, true
}

// Str returns a string value.
func (v Value) Str() (string, bool) {
	if v.Type != TypeString {
		return "", false
	}
	return string(v.raw), true
}

// Elements decodes an array's elements. Nested arrays come back as Values of
// TypeArray. The result has Len entries, which the parser bounded by the
// array's byte size.
func (v Value) Elements() ([]Value, error) {
	if v.Type != TypeArray {
		return nil, fmt.Errorf("%w: %s value is not an array", ErrFormat, v.Type)
	}
	r := &reader{data: v.raw}
	out := make([]Value, v.Len)
	for i := range out {
		e, err := readValue(r, v.Elem, 0)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

// Strings decodes an array of strings.
func (v Value) Strings() ([]string, error) {
	if v.Type != TypeArray || v.Elem != TypeString {
		return nil, fmt.Errorf("%w: want an array of strings, have %s", ErrFormat, v.describe())
	}
	r := &reader{data: v.raw}
	out := make([]string, v.Len)
	for i := range out {
		b, err := r.str("string element")
		if err != nil {
			return nil, err
		}
		out[i] = string(b)
	}
	return out, nil
}

// Float32s decodes an array of float32 (or float64, rounded) values.
func (v Value) Float32s() ([]float32, error) {
	if v.Type != TypeArray || (v.Elem != TypeFloat32 && v.Elem != TypeFloat64) {
		return nil, fmt.Errorf("%w: want an array of floats, have %s", ErrFormat, v.describe())
	}
	out := make([]float32, v.Len)
	sz := v.Elem.size()
	for i := range out {
		e, _ := Value{Type: v.Elem, raw: v.raw[i*sz:]}.Float()
		out[i] = float32(e)
	}
	return out, nil
}

// Int32s decodes an array of integers that fit in int32.
func (v Value) Int32s() ([]int32, error) {
	if v.Type != TypeArray || v.Elem.size() == 0 || v.Elem == TypeBool || v.Elem == TypeFloat32 || v.Elem == TypeFloat64 {
		return nil, fmt.Errorf("%w: want an array of integers, have %s", ErrFormat, v.describe())
	}
	out := make([]int32, v.Len)
	sz := v.Elem.size()
	for i := range out {
		e, ok := Value{Type: v.Elem, raw: v.raw[i*sz:]}.Int()
		if !ok || e < math.MinInt32 || e > math.MaxInt32 {
			return nil, fmt.Errorf("%w: array element %d out of int32 range", ErrFormat, i)
		}
		out[i] = int32(e)
	}
	return out, nil
}

func (v Value) describe() string {
	if v.Type == TypeArray {
		return "array of " + v.Elem.String()
	}
	return v.Type.String()
}

// String formats the value for messages; arrays show their type and length.
func (v Value) String() string {
	switch v.Type {
	case TypeString:
		return fmt.Sprintf("%q", v.raw)
	case TypeArray:
		return fmt.Sprintf("[%d]%s", v.Len, v.Elem)
	case TypeBool:
		b, _ := v.Bool()
		return fmt.Sprint(b)
	case TypeFloat32, TypeFloat64:
		f, _ := v.Float()
		return fmt.Sprint(f)
	}
	if i, ok := v.Int(); ok {
		return fmt.Sprint(i)
	}
	if v.Type == TypeUint64 && len(v.raw) == 8 {
		return fmt.Sprint(binary.LittleEndian.Uint64(v.raw))
	}
	return "<invalid>"
}
