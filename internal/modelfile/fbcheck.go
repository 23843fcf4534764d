package modelfile

import (
	"encoding/binary"
	"fmt"
)

// The Go flatbuffers runtime trusts its input. These accessors read the same
// wire format but check every offset against the buffer first, so a corrupt
// file yields ErrTruncated / ErrFormat instead of a panic or a wild slice.

// fbuf is a whole flatbuffer.
type fbuf []byte

// table is a checked view of one flatbuffer table.
type table struct {
	buf    fbuf
	pos    int // start of the table (its soffset to the vtable)
	vt     int // start of its vtable
	vtLen  int // vtable size in bytes
	tblLen int // inline size of the table in bytes
}

func (b fbuf) has(pos, n int64) bool {
	return pos >= 0 && n >= 0 && pos <= int64(len(b)) && n <= int64(len(b))-pos
}

func (b fbuf) u16(pos int) uint16 { return binary.LittleEndian.Uint16(b[pos:]) }
func (b fbuf) u32(pos int) uint32 { return binary.LittleEndian.Uint32(b[pos:]) }

// root returns the root table of a finished flatbuffer.
func (b fbuf) root() (table, error) {
	if !b.has(0, 8) {
		return table{}, fmt.Errorf("%w: %d bytes is too short for a flatbuffer", ErrTruncated, len(b))
	}
	return b.table(int64(b.u32(0)))
}

// table validates the table at pos and its vtable.
func (b fbuf) table(pos int64) (table, error) {
	if !b.has(pos, 4) {
		return table{}, fmt.Errorf("%w: table at %d", ErrTruncated, pos)
	}
	vt := pos - int64(int32(b.u32(int(pos))))
	if !b.has(vt, 4) {
		return table{}, fmt.Errorf("%w: vtable at %d for table at %d", ErrTruncated, vt, pos)
	}
	vtLen, tblLen := int64(b.u16(int(vt))), int64(b.u16(int(vt)+2))
	if vtLen < 4 || vtLen%2 != 0 || tblLen < 4 {
		return table{}, fmt.Errorf("%w: vtable at %d: sizes %d/%d", ErrFormat, vt, vtLen, tblLen)
	}
	if !b.has(vt, vtLen) || !b.has(pos, tblLen) {
		return table{}, fmt.Errorf("%w: table at %d", ErrTruncated, pos)
	}
	return table{buf: b, pos: int(pos), vt: int(vt), vtLen: int(vtLen), tblLen: int(tblLen)}, nil
}

// field returns the absolute position of field id if present, checking that
// size bytes of it lie inside the table.
func (t table) field(id, size int) (int, bool, error) {
	slot := 4 + 2*id
	if slot+2 > t.vtLen {
		return 0, false, nil
	}
	o := int(t.buf.u16(t.vt + slot))
	if o == 0 {
		return 0, false, nil
	}
	if o < 4 || o+size > t.tblLen {
		return 0, false, fmt.Errorf("%w: field %d at %d outside its table (%d bytes)", ErrFormat, id, o, t.tblLen)
	}
	return t.pos + o, true, nil
}

func (t table) uint8(id int, def uint8) (uint8, error) {
	p, ok, err := t.field(id, 1)
	if !ok || err != nil {
		return def, err
	}
	return t.buf[p], nil
}

func (t table) uint32(id int, def uint32) (uint32, error) {
	p, ok, err := t.field(id, 4)
	if !ok || err != nil {
		return def, err
	}
	return t.buf.u32(p), nil
}

func (t table) uint64(id int, def uint64) (uint64, error) {
	p, ok, err := t.field(id, 8)
	if !ok || err != nil {
		return def, err
	}
	return binary.LittleEndian.Uint64(t.buf[p:]), nil
}

// ref follows the uoffset stored in field id to an absolute position.
func (t table) ref(id int) (int64, bool, error) {
	p, ok, err := t.field(id, 4)
	if !ok || err != nil {
		return 0, false, err
	}
	target := int64(p) + int64(t.buf.u32(p))
	if !t.buf.has(target, 4) {
		return 0, false, fmt.Errorf("%w: field %d points to %d", ErrTruncated, id, target)
	}
	return target, true, nil
}

// vector is a checked vector: n elements of elem bytes starting at data.
type vector struct {
	buf  fbuf
	data int
	n    int
	elem int
}

// vector returns the vector field id refers to; an absent field is empty.
func (t table) vector(id, elem int) (vector, error) {
	pos, ok, err := t.ref(id)
	if !ok || err != nil {
		return vector{buf: t.buf}, err
	}
	n := int64(t.buf.u32(int(pos)))
	if !t.buf.has(pos+4, n*int64(elem)) {
		return vector{}, fmt.Errorf("%w: vector of %d×%d bytes at %d", ErrTruncated, n, elem, pos)
	}
	return vector{buf: t.buf, data: int(pos) + 4, n: int(n), elem: elem}, nil
}

// bytes returns the contents of a [ubyte] or string field, aliasing the
// buffer.
func (t table) bytes(id int) ([]byte, error) {
	v, err := t.vector(id, 1)
	if err != nil {
		return nil, err
	}
	return v.buf[v.data : v.data+v.n : v.data+v.n], nil
}

// table returns element i of a vector of tables.
func (v vector) table(i int) (table, error) {
	p := v.data + 4*i
	return v.buf.table(int64(p) + int64(v.buf.u32(p)))
}

func (v vector) int32(i int) int32 { return int32(v.buf.u32(v.data + 4*i)) }
