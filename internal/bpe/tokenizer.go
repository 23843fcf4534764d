package bpe

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Tokenizer encodes text to ids and back. It is immutable after Load and
// safe for concurrent use.
type Tokenizer struct {
	raw []byte // the tokenizer.json it was loaded from

	vocab  map[string]int // model vocabulary and added tokens
	tokens []string       // id -> token ("" for an unused id)
	merges map[uint64]merge

	ignoreMerges bool
	// wholeNewlineRuns: a piece of newlines only that is a token is
	// kept whole (see modelJSON.WholeNewlineRuns).
	wholeNewlineRuns bool
	byteFallback     bool
	fuseUnk          bool
	unk              int // -1 without an unknown token
	byteIDs          [256]int

	added     map[string]*addedToken
	addedByID map[int]*addedToken
	addedTrie *trie

	normalize normalizer   // nil: none
	pre       preTokenizer // nil: the whole section is one piece
	decode    decoder      // nil: tokens joined with spaces
	// byteLevelDecoder: the decoder is ByteLevel alone, which Decoder
	// streams byte by byte.
	byteLevelDecoder bool

	prefix, suffix []int // post-processor ids around a single sequence
}

type addedToken struct {
	id             int
	content        string
	lstrip, rstrip bool
	special        bool
}

// LoadFile reads and loads a tokenizer.json.
func LoadFile(path string) (*Tokenizer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bpe: %w", err)
	}
	t, err := Load(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// IsJSON reports whether b looks like a tokenizer.json: a JSON object
// (after leading white space) with a "model" key somewhere. It is a cheap
// test for telling file kinds apart, not a validation.
func IsJSON(b []byte) bool {
	s := strings.TrimLeft(string(b[:min(len(b), 64)]), " \t\r\n\ufeff")
	return strings.HasPrefix(s, "{") && json.Valid(b) && strings.Contains(string(b), `"model"`)
}

// Load parses a Hugging Face tokenizer.json with a BPE model.
func Load(b []byte) (*Tokenizer, error) {
	// The model type first: other models' vocabularies have other shapes.
	var head struct {
		Model struct {
			Type string `json:"type"`
		} `json:"model"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if ty := head.Model.Type; ty != "" && ty != "BPE" {
		return nil, fmt.Errorf("%w: model type %q (only BPE is implemented)", ErrUnsupported, ty)
	}
	var f fileJSON
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	t, err := build(&f)
	if err != nil {
		return nil, err
	}
	t.raw = b
	return t, nil
}

func build(f *fileJSON) (*Tokenizer, error) {
	m := &f.Model
	switch m.Type {
	case "BPE":
	case "":
		if m.Merges == nil {
			return nil, fmt.Errorf("%w: model has no type and no merges", ErrInvalid)
		}
	default:
		return nil, fmt.Errorf("%w: model type %q (only BPE is implemented)", ErrUnsupported, m.Type)
	}
	if m.Dropout != nil && *m.Dropout != 0 {
		return nil, fmt.Errorf("%w: BPE dropout %v", ErrUnsupported, *m.Dropout)
	}
	if p := m.ContinuingSubwordPrefix; p != nil && *p != "" {
		return nil, fmt.Errorf("%w: continuing_subword_prefix %q", ErrUnsupported, *p)
	}
	if s := m.EndOfWordSuffix; s != nil && *s != "" {
		return nil, fmt.Errorf("%w: end_of_word_suffix %q", ErrUnsupported, *s)
	}
	t := &Tokenizer{
		vocab:            make(map[string]int, len(m.Vocab)+len(f.AddedTokens)),
		merges:           make(map[uint64]merge, len(m.Merges)),
		ignoreMerges:     m.IgnoreMerges,
		wholeNewlineRuns: m.WholeNewlineRuns,
		byteFallback:     m.ByteFallback,
		fuseUnk:          m.FuseUnk,
		unk:              -1,
		added:            map[string]*addedToken{},
		addedByID:        map[int]*addedToken{},
	}
	const maxVocab = 1 << 26
	n := 0
	for tok, id := range m.Vocab {
		if id < 0 || id >= maxVocab {
			return nil, fmt.Errorf("%w: token %q has id %d", ErrInvalid, truncate(tok), id)
		}
		n = max(n, id+1)
	}
	for _, a := range f.AddedTokens {
		if a.ID < 0 || a.ID >= maxVocab {
			return nil, fmt.Errorf("%w: added token %q has id %d", ErrInvalid, truncate(a.Content), a.ID)
		}
		n = max(n, a.ID+1)
	}
	// Ids may leave holes, but not many: the id table is allocated whole.
	if count := len(m.Vocab) + len(f.AddedTokens); n > 2*count+1024 {
		return nil, fmt.Errorf("%w: ids up to %d for %d tokens", ErrInvalid, n-1, count)
	}
	t.tokens = make([]string, n)
	seen := make([]bool, n)
	for tok, id := range m.Vocab {
		if seen[id] {
			return nil, fmt.Errorf("%w: id %d is given to %q and %q", ErrInvalid, id, truncate(t.tokens[id]), truncate(tok))
		}
		seen[id] = true
		t.tokens[id] = tok
		t.vocab[tok] = id
	}
	for i, raw := range m.Merges {
		a, b, err := parseMerge(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: merge %d: %w", ErrInvalid, i, err)
		}
		ia, oka := m.Vocab[a]
		ib, okb := m.Vocab[b]
		ic, okc := m.Vocab[a+b]
		if !oka || !okb || !okc {
			return nil, fmt.Errorf("%w: merge %d (%q %q) uses a token missing from the vocabulary", ErrInvalid, i, truncate(a), truncate(b))
		}
		t.merges[pairKey(int32(ia), int32(ib))] = merge{rank: int32(i), id: int32(ic)}
	}
	if u := m.UnkToken; u != nil {
		id, ok := m.Vocab[*u]
		if !ok {
			return nil, fmt.Errorf("%w: unk_token %q is not in the vocabulary", ErrInvalid, truncate(*u))
		}
		t.unk = id
	}
	for b := range t.byteIDs {
		t.byteIDs[b] = -1
		if id, ok := m.Vocab[bytePiece(byte(b))]; ok {
			t.byteIDs[b] = id
		}
	}
	for _, a := range f.AddedTokens {
		if a.Content == "" {
			return nil, fmt.Errorf("%w: added token %d is empty", ErrInvalid, a.ID)
		}
		if seen[a.ID] && t.tokens[a.ID] != a.Content {
			return nil, fmt.Errorf("%w: added token %q reuses id %d of %q", ErrInvalid, truncate(a.Content), a.ID, truncate(t.tokens[a.ID]))
		}
		seen[a.ID] = true
		at := &addedToken{id: a.ID, content: a.Content, lstrip: a.LStrip, rstrip: a.RStrip, special: a.Special}
		t.tokens[a.ID] = a.Content
		t.vocab[a.Content] = a.ID
		t.added[a.Content] = at
		t.addedByID[a.ID] = at
	}
	if len(t.added) > 0 {
		t.addedTrie = newTrie()
		for s := range t.added {
			t.addedTrie.insert(s)
		}
	}
	var err error
	if t.normalize, err = buildNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	if t.pre, err = buildPreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	if t.decode, err = buildDecoder(f.Decoder, t.added); err != nil {
		return nil, err
	}
	if c, ok, _ := parseComponent(f.Decoder, "decoder"); ok && c.Type == "ByteLevel" {
		t.byteLevelDecoder = true
	}
	if t.prefix, t.suffix, err = buildPostProcessor(f.PostProcessor, t.vocab); err != nil {
		return nil, err
	}
	return t, nil
}

// bytePiece is the byte-fallback token of b, e.g. "<0x0A>".
func bytePiece(b byte) string {
	const hex = "0123456789ABCDEF"
	return "<0x" + string([]byte{hex[b>>4], hex[b&15]}) + ">"
}

// Encode tokenizes text without adding special tokens (like gpurun
// tokenize and spm_encode). Added tokens written in the text are
// recognized.
func (t *Tokenizer) Encode(text string) []int {
	text = lossyUTF8([]byte(text))
	var ids []int
	for i, sec := range t.sections(text) {
		if sec.added != nil {
			ids = append(ids, sec.added.id)
			continue
		}
		s := sec.text
		if t.normalize != nil {
			s = t.normalize(s)
		}
		if s == "" {
			continue
		}
		pieces := []string{s}
		if t.pre != nil {
			pieces = t.pre(pieces, i == 0)
		}
		for _, p := range pieces {
			ids = t.encodeWord(p, ids)
		}
	}
	return ids
}

// EncodeSpecial is Encode with the special tokens the post-processor adds
// around a single sequence (such as a BOS token) when addSpecial is set.
func (t *Tokenizer) EncodeSpecial(text string, addSpecial bool) []int {
	ids := t.Encode(text)
	if !addSpecial {
		return ids
	}
	return slices.Concat(t.prefix, ids, t.suffix)
}

// BOS returns the token the post-processor puts before a sequence, when it
// puts exactly one there (a TemplateProcessing "<s> $A" or
// "<|begin_of_text|> $A", a Roberta/Bert cls token).
func (t *Tokenizer) BOS() (id int, ok bool) {
	if len(t.prefix) == 1 {
		return t.prefix[0], true
	}
	return -1, false
}

// section is a run of text between added tokens, or one added token.
type section struct {
	text  string
	added *addedToken
}

// sections splits text at added tokens: at each position the longest one
// that matches, left to right; lstrip/rstrip tokens eat the white space
// beside them.
func (t *Tokenizer) sections(text string) []section {
	if t.addedTrie == nil {
		return []section{{text: text}}
	}
	var secs []section
	start := 0
	for i := 0; i < len(text); {
		n := t.addedTrie.longestPrefix(text[i:])
		if n == 0 {
			i++
			continue
		}
		if i > start {
			secs = append(secs, section{text: text[start:i]})
		}
		secs = append(secs, section{added: t.added[text[i:i+n]]})
		i += n
		start = i
	}
	if start < len(text) {
		secs = append(secs, section{text: text[start:]})
	}
	for i, s := range secs {
		if s.added == nil {
			continue
		}
		if s.added.lstrip && i > 0 && secs[i-1].added == nil {
			secs[i-1].text = strings.TrimRight(secs[i-1].text, whiteSpace)
		}
		if s.added.rstrip && i+1 < len(secs) && secs[i+1].added == nil {
			secs[i+1].text = strings.TrimLeft(secs[i+1].text, whiteSpace)
		}
	}
	return secs
}

// whiteSpace is what JavaScript's trim removes (the tests' reference).
const whiteSpace = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"

// VocabSize is the number of ids: the model vocabulary and added tokens.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// Token returns the token string of id ("" when out of range or unused).
func (t *Tokenizer) Token(id int) string {
	if id < 0 || id >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// ID returns the id of a token string and whether there is one.
func (t *Tokenizer) ID(token string) (int, bool) {
	id, ok := t.vocab[token]
	return id, ok
}

// IsSpecial reports whether id is an added token marked special.
func (t *Tokenizer) IsSpecial(id int) bool {
	a := t.addedByID[id]
	return a != nil && a.special
}

// Marshal returns the tokenizer.json the tokenizer was loaded from.
func (t *Tokenizer) Marshal() []byte { return t.raw }

// SpecialTokens maps the content of every added token marked special to
// its id.
func (t *Tokenizer) SpecialTokens() map[string]int {
	out := map[string]int{}
	for s, a := range t.added {
		if a.special {
			out[s] = a.id
		}
	}
	return out
}
