package constrain

import (
	"encoding/binary"
	"math/bits"
)

// frame is one open value of the matcher's stack.
type frame struct {
	n     *node
	phase uint8
	i     uint16 // characters, items or members so far; a literal's position
	set   uint64 // an object's properties given; a literal's candidates left
	sub   *node  // kAny: the concrete node chosen by its first byte
	k     uint8  // object: the property whose key was given last
}

// Phases.
const (
	pStart    = iota // before the first byte
	pOpen            // object/array: after the opening bracket
	pKey             // object: after a comma, a key must follow
	pColon           // object: after a key
	pValue           // object/array: a member's value is open (a child frame)
	pAfter           // object/array: after a member
	pItem            // array: after a comma, an item must follow
	pIn              // string: inside the quotes
	pKeyOpen         // object: a key is open (a child frame)
	pNumMinus        // number states
	pNumZero
	pNumInt
	pNumDot
	pNumFrac
)

type result uint8

const (
	reject  result = iota
	consume        // the byte was taken, the frame stays open
	closed         // the byte was taken and closed the frame
	ended          // the frame ended before the byte: give it to the parent
	pushed         // a child frame was pushed: give it the byte
)

// Matcher tracks a document generated so far. The zero value is not
// usable: Grammar.Matcher makes one.
type Matcher struct {
	g     *Grammar
	stack []frame
	done  bool // the root value closed
}

// Matcher returns a matcher at the start of a document.
func (g *Grammar) Matcher() *Matcher {
	return &Matcher{g: g, stack: []frame{{n: g.root}}}
}

// clone copies m into dst, reusing its stack.
func (m *Matcher) cloneInto(dst *Matcher) {
	dst.g, dst.done = m.g, m.done
	dst.stack = append(dst.stack[:0], m.stack...)
}

// Done reports whether the document is complete and nothing may follow.
func (m *Matcher) Done() bool { return m.done }

// Accepting reports whether the document may end here: it is complete, or
// it is a root number that may end or go on.
func (m *Matcher) Accepting() bool {
	if m.done {
		return true
	}
	if len(m.stack) != 1 {
		return false
	}
	f := &m.stack[0]
	n := f.n
	if n.kind == kAny {
		n = f.sub
	}
	if n == nil {
		return false
	}
	switch n.kind {
	case kNumber, kInteger:
		return f.phase == pNumZero || f.phase == pNumInt || f.phase == pNumFrac
	case kLiteral:
		return literalComplete(n, f)
	}
	return false
}

// Feed advances the matcher by one byte, or returns false (leaving the
// matcher unusable) when the byte cannot follow.
func (m *Matcher) Feed(b byte) bool {
	for {
		if m.done || len(m.stack) == 0 {
			return false
		}
		top := len(m.stack) - 1
		switch m.step(top, b) {
		case reject:
			return false
		case consume:
			return true
		case pushed:
			continue
		case closed:
			m.pop()
			return true
		case ended:
			m.pop()
			if m.done {
				return false // nothing may follow the root value
			}
		}
	}
}

// FeedBytes feeds every byte of p.
func (m *Matcher) FeedBytes(p []byte) bool {
	for _, b := range p {
		if !m.Feed(b) {
			return false
		}
	}
	return true
}

// pop closes the top frame and tells its parent.
func (m *Matcher) pop() {
	child := m.stack[len(m.stack)-1]
	m.stack = m.stack[:len(m.stack)-1]
	if len(m.stack) == 0 {
		m.done = true
		return
	}
	p := &m.stack[len(m.stack)-1]
	switch {
	case p.n.kind == kSeq && int(p.i) == len(p.n.parts), p.n.kind == kSwitch && p.phase == pValue:
		// Its last part closed: so does it.
		m.pop()
		return
	}
	switch p.phase {
	case pKeyOpen:
		p.phase = pColon
		if child.n.kind == kLiteral {
			// A property's quoted name: its one candidate left.
			p.k = uint8(bits.TrailingZeros64(child.set))
			p.set |= 1 << p.k
		}
	case pValue:
		p.phase = pAfter
		p.i++
	}
}

func (m *Matcher) push(n *node) { m.stack = append(m.stack, frame{n: n}) }

// step feeds b to frame i (the top).
func (m *Matcher) step(i int, b byte) result {
	f := &m.stack[i]
	n := f.n
	if n.kind == kAny {
		if f.sub == nil {
			sub := m.choose(n, b)
			if sub == nil {
				return reject
			}
			f.sub = sub
		}
		n = f.sub
	}
	switch n.kind {
	case kString:
		return stepString(n, f, b)
	case kNumber, kInteger:
		return stepNumber(n, f, b)
	case kLiteral:
		return stepLiteral(n, f, b)
	case kArray:
		return m.stepArray(n, f, b)
	case kObject:
		return m.stepObject(n, f, b)
	case kSeq:
		if int(f.i) >= len(n.parts) {
			return ended
		}
		f.i++
		m.push(n.parts[f.i-1])
		return pushed
	case kSwitch:
		switch f.phase {
		case pStart:
			f.phase = pKeyOpen
			m.stack = append(m.stack, frame{n: n.keys, phase: pIn, set: 1<<len(n.next) - 1})
			return pushed
		case pColon:
			f.phase = pValue
			m.push(n.next[f.k])
			return pushed
		}
		return ended
	}
	return reject
}

// choose picks the concrete node of an any-value by its first byte.
func (m *Matcher) choose(n *node, b byte) *node {
	containers := n.depth > 0
	switch {
	case b == '{' && containers:
		return anyObject(m.g, n)
	case n.objOnly:
		return nil
	case b == '[' && containers:
		return anyArray(m.g, n)
	case b == '"':
		return anyString
	case b == '-' || b >= '0' && b <= '9':
		return anyNumber
	case b == 't' || b == 'f' || b == 'n':
		return anyScalar
	}
	return nil
}

// Shared concrete nodes of any-values (ids outside every grammar's range:
// state keys use the any-node's id with the kind).
var (
	anyString = &node{id: -1, kind: kString, maxLen: DefaultMaxString}
	anyNumber = &node{id: -2, kind: kNumber}
	anyScalar = &node{id: -3, kind: kLiteral, lits: [][]byte{[]byte("true"), []byte("false"), []byte("null")}}
)

// anyObject and anyArray are the containers of an any-value.
func anyObject(_ *Grammar, n *node) *node { return n.obj }
func anyArray(_ *Grammar, n *node) *node  { return n.arr }

func stepString(n *node, f *frame, b byte) result {
	switch f.phase {
	case pStart:
		if b != '"' {
			return reject
		}
		f.phase = pIn
		return consume
	case pIn:
		if b == '"' {
			if int(f.i) < n.minLen {
				return reject
			}
			return closed
		}
		if b < 0x20 || b > 0x7e || b == '\\' || int(f.i) >= n.maxLen {
			return reject
		}
		f.i++
		return consume
	}
	return reject
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

func stepNumber(n *node, f *frame, b byte) result {
	frac := n.kind == kNumber
	switch f.phase {
	case pStart, pNumMinus:
		switch {
		case b == '-' && f.phase == pStart:
			f.phase = pNumMinus
		case b == '0':
			f.phase = pNumZero
		case b >= '1' && b <= '9':
			f.phase, f.i = pNumInt, 1
		default:
			return reject
		}
		return consume
	case pNumZero, pNumInt:
		switch {
		case isDigit(b) && f.phase == pNumInt && f.i < maxIntDigits:
			f.i++
			return consume
		case b == '.' && frac:
			f.phase, f.i = pNumDot, 0
			return consume
		case isDigit(b) || b == '.':
			return reject
		}
		return ended
	case pNumDot:
		if !isDigit(b) {
			return reject
		}
		f.phase, f.i = pNumFrac, 1
		return consume
	case pNumFrac:
		if isDigit(b) {
			if f.i >= maxFracDigits {
				return reject
			}
			f.i++
			return consume
		}
		return ended
	}
	return reject
}

func literalComplete(n *node, f *frame) bool {
	if f.phase == pStart {
		return false
	}
	for c := range n.lits {
		if f.set&(1<<c) != 0 && len(n.lits[c]) == int(f.i) {
			return true
		}
	}
	return false
}

// stepLiteral matches one of n's literals; a literal that another extends
// (enum 1 and 12) ends at the first byte that extends none.
func stepLiteral(n *node, f *frame, b byte) result {
	if f.phase == pStart {
		f.phase = pIn
		f.set = 1<<len(n.lits) - 1
		if len(n.lits) == 64 {
			f.set = ^uint64(0)
		}
	}
	var next uint64
	longer := false
	for c, lit := range n.lits {
		if f.set&(1<<c) == 0 || len(lit) <= int(f.i) || lit[f.i] != b {
			continue
		}
		next |= 1 << c
		if len(lit) > int(f.i)+1 {
			longer = true
		}
	}
	if next == 0 {
		if literalComplete(n, f) {
			return ended
		}
		return reject
	}
	f.set = next
	f.i++
	if !longer {
		return closed
	}
	return consume
}

func (m *Matcher) stepArray(n *node, f *frame, b byte) result {
	switch f.phase {
	case pStart:
		if b != '[' {
			return reject
		}
		f.phase = pOpen
		return consume
	case pOpen, pItem:
		if b == ']' && f.phase == pOpen && n.minItems == 0 {
			return closed
		}
		if int(f.i) >= n.maxItems {
			return reject
		}
		f.phase = pValue
		m.push(n.items)
		return pushed
	case pAfter:
		switch {
		case b == ',' && int(f.i) < n.maxItems:
			f.phase = pItem
			return consume
		case b == ']' && int(f.i) >= n.minItems:
			return closed
		}
	}
	return reject
}

// allRequired reports whether the properties given include the required.
func allRequired(n *node, f *frame) bool { return f.set&n.required == n.required }

func (m *Matcher) stepObject(n *node, f *frame, b byte) result {
	switch f.phase {
	case pStart:
		if b != '{' {
			return reject
		}
		f.phase = pOpen
		return consume
	case pOpen, pKey:
		if b == '}' && f.phase == pOpen && allRequired(n, f) {
			return closed
		}
		if n.anyKey != nil {
			// A free-form object (any-value): any key, up to the bound.
			if int(f.i) >= DefaultMaxItems {
				return reject
			}
			f.phase = pKeyOpen
			m.push(n.anyKey)
			return pushed
		}
		// One of the properties not given yet.
		left := ^f.set & (1<<len(n.props) - 1)
		if left == 0 {
			return reject
		}
		f.phase = pKeyOpen
		m.stack = append(m.stack, frame{n: n.keys, phase: pIn, set: left})
		return pushed
	case pColon:
		if b != ':' {
			return reject
		}
		f.phase = pValue
		if n.anyKey != nil {
			m.push(n.anyVal)
			return consume
		}
		m.push(n.props[f.k].node)
		return consume
	case pAfter:
		left := ^f.set&(1<<len(n.props)-1) != 0
		if n.anyKey != nil {
			left = int(f.i) < DefaultMaxItems
		}
		switch {
		case b == ',' && left:
			f.phase = pKey
			return consume
		case b == '}' && allRequired(n, f):
			return closed
		}
	}
	return reject
}

// key appends the state's bytes to dst: what the masks are cached by.
func (m *Matcher) key(dst []byte) []byte {
	if m.done {
		return append(dst, 0xff)
	}
	for _, f := range m.stack {
		sub := int32(-100)
		if f.sub != nil {
			sub = int32(f.sub.id)
		}
		dst = binary.LittleEndian.AppendUint32(dst, uint32(int32(f.n.id)))
		dst = binary.LittleEndian.AppendUint32(dst, uint32(sub))
		dst = append(dst, f.phase)
		dst = binary.LittleEndian.AppendUint16(dst, f.i)
		dst = binary.LittleEndian.AppendUint64(dst, f.set)
		dst = append(dst, f.k)
	}
	return dst
}
