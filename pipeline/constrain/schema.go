// Package constrain constrains generation to JSON: a grammar compiled from
// a JSON schema (a subset, below) or "any JSON object", a byte-level
// pushdown matcher over it, and token masks computed from a vocabulary's
// token bytes, once per matcher state and cached, so that a sampler only
// ever picks tokens that keep the output a prefix of a valid document.
//
// The schema subset: "type" object (with "properties", "required" and
// "additionalProperties", whose extra properties are never generated),
// array (with "items", "minItems", "maxItems"), string (with "minLength",
// "maxLength"), number, integer, boolean and null; "enum" and "const" of
// any JSON values; nesting of all of these. "title", "description",
// "$schema", "$id", "default" and "examples" are ignored. Any other
// keyword, or a type list, is an error naming it (ErrUnsupported).
//
// What is generated, so that every output is short, parses and validates:
// compact JSON (no whitespace); strings of printable ASCII without escapes
// (at most DefaultMaxString bytes unless maxLength says otherwise);
// numbers without exponents, with at most 12 integer and 6 fraction
// digits; each property at most once, in any order; arrays of at most
// DefaultMaxItems items unless maxItems says otherwise; for "any JSON
// object" (response_format json_object) at most DefaultMaxItems members
// per object or array and DefaultMaxDepth levels of nesting.
//
// Import it to constrain generated text to a JSON schema
// (GenerateOptions.Grammar).
package constrain

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
)

// Bounds of what is generated where the schema sets none.
const (
	DefaultMaxString = 64
	DefaultMaxItems  = 8
	DefaultMaxDepth  = 3
	maxIntDigits     = 12
	maxFracDigits    = 6
	maxProps         = 64 // properties of one object schema (a bit set)
	maxEnum          = 64 // values of one enum
)

// Errors callers can test for with errors.Is.
var (
	// ErrSchema: a schema that is not valid JSON or not a valid schema.
	ErrSchema = errors.New("constrain: invalid schema")
	// ErrUnsupported: a schema keyword or form outside the subset.
	ErrUnsupported = errors.New("constrain: unsupported schema keyword")
)

type kind uint8

const (
	kAny kind = iota
	kObject
	kArray
	kString
	kNumber
	kInteger
	kLiteral // enum, const, boolean, null
	kSeq     // parts one after another
	kSwitch  // one of keys' literals, then the node of the one matched
)

// node is a compiled schema.
type node struct {
	id       int
	kind     kind
	depth    int      // kAny: nesting left
	props    []prop   // kObject
	required uint64   // kObject: bit per prop
	items    *node    // kArray
	minItems int      // kArray
	maxItems int      // kArray
	minLen   int      // kString
	maxLen   int      // kString
	lits     [][]byte // kLiteral: JSON-encoded values
	keys     *node    // kObject: the literal of its quoted names
	anyKey   *node    // kAny objects: the key string
	anyVal   *node    // kAny containers: the member value (depth-1)
	objOnly  bool     // kAny: an object only (JSONObject's root)
	obj, arr *node    // kAny with depth > 0: its object and array forms
	parts    []*node  // kSeq
	next     []*node  // kSwitch: the node after each of keys' literals
}

type prop struct {
	name string
	node *node
}

// Grammar is a compiled schema. It is safe for concurrent use.
type Grammar struct {
	root  *node
	nodes []*node
}

// JSONObject is the grammar of any JSON object (OpenAI's json_object).
func JSONObject() *Grammar {
	g := &Grammar{}
	g.root = g.anyNode(DefaultMaxDepth)
	g.root.objOnly = true
	return g
}

func (g *Grammar) newNode(n *node) *node {
	n.id = len(g.nodes)
	g.nodes = append(g.nodes, n)
	return n
}

// anyNode is any JSON value with depth levels of containers below it.
func (g *Grammar) anyNode(depth int) *node {
	n := g.newNode(&node{kind: kAny, depth: depth})
	if depth > 0 {
		key := g.newNode(&node{kind: kString, minLen: 1, maxLen: 32})
		val := g.anyNode(depth - 1)
		n.obj = g.newNode(&node{kind: kObject, anyKey: key, anyVal: val})
		n.arr = g.newNode(&node{kind: kArray, items: val, maxItems: DefaultMaxItems})
	}
	return n
}

// Compile compiles a JSON schema of the supported subset.
func Compile(schema []byte) (*Grammar, error) {
	var v any
	if err := json.Unmarshal(schema, &v); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSchema, err)
	}
	g := &Grammar{}
	root, err := g.compile(v, "")
	if err != nil {
		return nil, err
	}
	g.root = root
	return g, nil
}

var ignored = map[string]bool{"title": true, "description": true, "$schema": true, "$id": true, "default": true, "examples": true, "$comment": true}

func (g *Grammar) compile(v any, path string) (*node, error) {
	if b, ok := v.(bool); ok && b {
		return g.anyNode(DefaultMaxDepth), nil
	}
	s, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: %s: a schema must be an object", ErrSchema, where(path))
	}
	known := map[string]bool{"type": true, "enum": true, "const": true}
	switch t, _ := s["type"].(string); t {
	case "object":
		known["properties"], known["required"], known["additionalProperties"] = true, true, true
	case "array":
		known["items"], known["minItems"], known["maxItems"] = true, true, true
	case "string":
		known["minLength"], known["maxLength"] = true, true
	}
	keys := slices.Sorted(maps.Keys(s))
	for _, k := range keys {
		if !known[k] && !ignored[k] {
			return nil, fmt.Errorf("%w %q at %s", ErrUnsupported, k, where(path))
		}
	}
	var n *node
	if e, ok := s["const"]; ok {
		n = &node{kind: kLiteral, lits: [][]byte{mustJSON(e)}}
	} else if e, ok := s["enum"]; ok {
		list, ok := e.([]any)
		if !ok || len(list) == 0 || len(list) > maxEnum {
			return nil, fmt.Errorf("%w: %s: enum must be a list of 1 to %d values", ErrSchema, where(path), maxEnum)
		}
		n = &node{kind: kLiteral}
		for _, x := range list {
			n.lits = append(n.lits, mustJSON(x))
		}
	}
	t, hasType := s["type"]
	if _, isList := t.([]any); isList {
		return nil, fmt.Errorf("%w: %s: a list of types", ErrUnsupported, where(path))
	}
	ts, _ := t.(string)
	if hasType && ts == "" {
		return nil, fmt.Errorf("%w: %s: type must be a string", ErrSchema, where(path))
	}
	if n == nil {
		switch ts {
		case "object":
			n = &node{kind: kObject}
		case "array":
			n = &node{kind: kArray, maxItems: DefaultMaxItems}
		case "string":
			n = &node{kind: kString, maxLen: DefaultMaxString}
		case "number":
			n = &node{kind: kNumber}
		case "integer":
			n = &node{kind: kInteger}
		case "boolean":
			n = &node{kind: kLiteral, lits: [][]byte{[]byte("true"), []byte("false")}}
		case "null":
			n = &node{kind: kLiteral, lits: [][]byte{[]byte("null")}}
		case "":
			return nil, fmt.Errorf("%w: %s: a schema without type, enum or const", ErrUnsupported, where(path))
		default:
			return nil, fmt.Errorf("%w: %s: unknown type %q", ErrSchema, where(path), ts)
		}
	}
	g.newNode(n)
	var err error
	switch n.kind {
	case kObject:
		err = g.compileObject(n, s, path)
	case kArray:
		if it, ok := s["items"]; ok {
			if n.items, err = g.compile(it, path+"/items"); err != nil {
				return nil, err
			}
		} else {
			n.items = g.anyNode(DefaultMaxDepth - 1)
		}
		if n.minItems, err = count(s, "minItems", 0, path); err != nil {
			return nil, err
		}
		if n.maxItems, err = count(s, "maxItems", max(DefaultMaxItems, n.minItems), path); err != nil {
			return nil, err
		}
		if n.minItems > n.maxItems {
			return nil, fmt.Errorf("%w: %s: minItems %d > maxItems %d", ErrSchema, where(path), n.minItems, n.maxItems)
		}
	case kString:
		if n.minLen, err = count(s, "minLength", 0, path); err != nil {
			return nil, err
		}
		if n.maxLen, err = count(s, "maxLength", max(DefaultMaxString, n.minLen), path); err != nil {
			return nil, err
		}
		if n.minLen > n.maxLen {
			return nil, fmt.Errorf("%w: %s: minLength %d > maxLength %d", ErrSchema, where(path), n.minLen, n.maxLen)
		}
	}
	return n, err
}

func (g *Grammar) compileObject(n *node, s map[string]any, path string) error {
	props := map[string]any{}
	if p, ok := s["properties"]; ok {
		if props, ok = p.(map[string]any); !ok {
			return fmt.Errorf("%w: %s: properties must be an object", ErrSchema, where(path))
		}
	}
	if len(props) > maxProps {
		return fmt.Errorf("%w: %s: more than %d properties", ErrUnsupported, where(path), maxProps)
	}
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	keys := &node{kind: kLiteral}
	for _, k := range names {
		c, err := g.compile(props[k], path+"/properties/"+k)
		if err != nil {
			return err
		}
		n.props = append(n.props, prop{name: k, node: c})
		keys.lits = append(keys.lits, mustJSON(k))
	}
	n.keys = g.newNode(keys)
	if r, ok := s["required"]; ok {
		list, ok := r.([]any)
		if !ok {
			return fmt.Errorf("%w: %s: required must be a list of names", ErrSchema, where(path))
		}
		for _, x := range list {
			name, _ := x.(string)
			i := slices.Index(names, name)
			if i < 0 {
				return fmt.Errorf("%w: %s: required property %q has no schema in properties", ErrUnsupported, where(path), name)
			}
			n.required |= 1 << i
		}
	}
	return nil
}

func count(s map[string]any, key string, def int, path string) (int, error) {
	v, ok := s[key]
	if !ok {
		return def, nil
	}
	f, ok := v.(float64)
	if !ok || f < 0 || f != float64(int(f)) || f > 1<<20 {
		return 0, fmt.Errorf("%w: %s: %s must be a non-negative integer", ErrSchema, where(path), key)
	}
	return int(f), nil
}

func where(path string) string {
	if path == "" {
		return "the root"
	}
	return path
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // values decoded from JSON always encode
	}
	return b
}
