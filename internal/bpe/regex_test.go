package bpe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/dlclark/regexp2"

	"github.com/gpurun/gpurun/internal/ci"
)

// findAll returns the texts of the non-empty matches of a pattern written
// for the Rust engines.
func findAll(t *testing.T, expr, s string) []string {
	t.Helper()
	re, err := compileRegex(expr)
	if err != nil {
		t.Fatalf("%q: %v", expr, err)
	}
	runes := []rune(s)
	var out []string
	for _, m := range re.matches(runes) {
		out = append(out, string(runes[m[0]:m[1]]))
	}
	return out
}

// TestRustRegexSemantics: the meanings the Rust regex crate documents
// (and fancy-regex, tiktoken's engine, inherits) where .NET's, hence
// plain regexp2's, differ. Each case notes the rule it checks.
func TestRustRegexSemantics(t *testing.T) {
	for _, c := range []struct {
		name, expr, in string
		want           []string
	}{
		// (?i) is Unicode simple case folding: s ~ S ~ ſ (U+017F).
		{"fold long s", `(?i:'s|'t)`, "it'ſ it'S it'T", []string{"'ſ", "'S", "'T"}},
		{"fold o200k contraction", `\p{Ll}+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`, "heſ'ſ", []string{"heſ'ſ"}},
		// σ ~ Σ ~ ς; k ~ K ~ K (U+212A KELVIN SIGN).
		{"fold sigma", `(?i)σ+`, "ΣσςX", []string{"Σσς"}},
		{"fold kelvin", `(?i)k`, "kK\u212a", []string{"k", "K", "\u212a"}},
		// İ (U+0130) has no simple folding to i (regexp2 lowercases it).
		{"no fold dotted I", `(?i)i`, "İıIi", []string{"I", "i"}},
		{"fold class range", `(?i)[a-c]+`, "xABCabcſ", []string{"ABCabc"}},
		{"fold class s", `(?i)[s]+`, "sSſ", []string{"sSſ"}},
		// Under (?i) a Unicode class is closed under folding too.
		{"fold property", `(?i)\p{Lu}+`, "aBc1", []string{"aBc"}},
		{"fold scoped", `a(?i)b|c`, "aBC", []string{"aB", "C"}},
		{"fold group ends", `(?:(?i)a)a`, "AaAA", []string{"Aa"}},
		{"fold off", `(?i)a(?-i:a)`, "AAAa", []string{"Aa"}},
		// \w: Alphabetic + M + Nd + Pc + Join_Control (UTS #18 Annex C).
		{"word spacing mark", `\w+`, "किताब", []string{"किताब"}},
		{"word letter number", `\w+`, "Ⅻ ⓐⓑ x_1", []string{"Ⅻ", "ⓐⓑ", "x_1"}},
		{"not word", `\W+`, "ab, ⓐ!", []string{", ", "!"}},
		{"lone not word class", `[\W]+`, "ab, ⓐ!", []string{", ", "!"}},
		{"word boundary", `\bx\b`, "x ⓐx x", []string{"x", "x"}},
		{"not word boundary", `\Bx`, "ⓐx x", []string{"x"}},
		{"whitespace pre-tokenizer", `\w+|[^\w\s]+`, "क्षत्रिय, Ⅻ!", []string{"क्षत्रिय", ",", "Ⅻ", "!"}},
		// $ without (?m) is the end of the text only.
		{"dollar", `a$`, "a\n", nil},
		{"dollar end", `a$`, "ba", []string{"a"}},
		{"dollar multiline", `(?m)a$`, "a\nba", []string{"a", "a"}},
		// \s is White_Space: U+0085 yes, U+FEFF no; \d is Nd.
		{"space", `\s+`, "a\u0085\u00a0\u3000b\ufeff", []string{"\u0085\u00a0\u3000"}},
		{"digit", `\d+`, "١٢x½", []string{"١٢"}},
		// Unicode names as Rust accepts them.
		{"one-letter property", `\pL+`, "ab1", []string{"ab"}},
		{"negated one-letter property", `\PL+`, "ab1-", []string{"1-"}},
		{"long name", `\p{Letter}+`, "ab1", []string{"ab"}},
		{"loose name", `\p{uppercase letter}+`, "aBC", []string{"BC"}},
		{"script", `\p{sc=Greek}+`, "abγδ", []string{"γδ"}},
		{"general category", `\p{gc=Nd}+`, "a12", []string{"12"}},
		{"alphabetic", `\p{Alphabetic}+`, "Ⅻa1", []string{"Ⅻa"}},
		{"property in class", `[\p{L}\d]+`, "a1-", []string{"a1"}},
		{"negated property in class", `[^\P{L}]+`, "a1b", []string{"a", "b"}},
		{"space negated with literals", `[^\S\r\n]+`, "a \t\nb", []string{" \t"}},
		// Escapes.
		{"hex escapes", `\x41\x{42}\u0043\u{44}\U00000045`, "ABCDE", []string{"ABCDE"}},
		{"punctuation escapes", `\.\$\{`, "a.${", []string{".${"}},
		{"literal metacharacters", `a#b c`, "a#b c", []string{"a#b c"}},
		{"class escapes", `[\]\-\\^]+`, `x]-\^`, []string{`]-\^`}},
		// Passed through unchanged.
		{"lookahead", `\s+(?!\S)|\s+`, "a   b", []string{"  ", " "}},
		{"lookbehind", `(?<=a)b`, "abcb", []string{"b"}},
		{"quantifier", `\p{N}{1,3}`, "1234", []string{"123", "4"}},
		{"named group", `(?P<x>a)(?<y>b)`, "ab", []string{"ab"}},
		{"backreference", `(a)\1`, "aab", []string{"aa"}},
		{"comment", `a(?#note)b`, "ab", []string{"ab"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := findAll(t, c.expr, c.in); fmt.Sprintf("%q", got) != fmt.Sprintf("%q", c.want) {
				tr, _ := translateRegex(c.expr)
				t.Errorf("%q on %q: %q, want %q (regexp2 pattern %q)", c.expr, c.in, got, c.want, tr)
			}
		})
	}
}

// TestRustRegexUnsupported: syntax whose meaning regexp2 would change is
// refused with ErrUnsupported, never run with another meaning.
func TestRustRegexUnsupported(t *testing.T) {
	for _, expr := range []string{
		`(?x)a b`, `(?U)a*`, `(?R)a$`, `(?-u)\w`, `[[:alpha:]]`, `[a[bc]]`, `[a-z&&[^aeiou]]`, `[a-z--b]`,
		`[\W\d]`, `[\S\D]`, `[\P{L}\p{Lu}]`, `(?i)\P{Lu}`, `\p{Nonsense}`, `\p{Age=3.0}`, `\k<x>`, `\G`,
		`\x{110000}`, `\x4`, `[z-a]`, `a)`, `\`,
	} {
		if _, err := compileRegex(expr); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%q: %v, want ErrUnsupported", expr, err)
		}
	}
}

// TestRegexPatternsUnchanged: the pre-tokenizer patterns in use translate
// to patterns that split as before on text where .NET's and Rust's
// meanings agree (ASCII and common scripts).
func TestRegexPatternsUnchanged(t *testing.T) {
	o200k := `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	const text = "Hello  world's THEY'LL 1234 x\n\n  y ÀÉ àé 日本語 a/b//\r\n"
	for _, expr := range append([]string{gpt2Pattern, reGPT2, reLlama3, reQwen2, o200k}, ggufPre["falcon"]...) {
		raw, err := regexp2.Compile(expr, regexp2.None)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		m, _ := raw.FindStringMatch(text)
		for m != nil {
			want = append(want, m.String())
			m, _ = raw.FindNextMatch(m)
		}
		if got := findAll(t, expr, text); fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
			t.Errorf("%q:\n got %q\nwant %q", expr, got, want)
		}
	}
}

// TestRegexMatchesJavaScript: on case folding and Unicode property names
// JavaScript's RegExp with the u flag follows the same Unicode rules as
// the Rust engines (simple case folding under i, UTS #18 property
// classes), so node is a reference nobody here wrote for that part of the
// rewrite: random text over letters with case orbits, digits, marks and
// symbols must match the same ranges. (\w, \b, \s and $ are where
// JavaScript differs from Rust; TestRustRegexSemantics covers them.)
func TestRegexMatchesJavaScript(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		ci.Missing(t, "node (bash .ci/setup installs it)")
	}
	type jsCase struct {
		Pattern string     `json:"pattern"`
		Flags   string     `json:"flags"`
		Texts   []string   `json:"texts"`
		got     [][][2]int // ours
	}
	// Each pattern is written once; under "i" ours gets a (?i) prefix.
	patterns := []struct{ expr, flags string }{
		{`'s|'t|'re|'ve|'m|'ll|'d`, "iu"},
		{`[a-z]+`, "iu"},
		{`[^a-zα-ω]+`, "iu"},
		{`\p{Lu}+`, "iu"},
		{`\p{Ll}\p{Lt}?`, "iu"},
		{`σ+|k+|s+|i+|µ+|å+|ß`, "iu"},
		{`\p{Lu}+|\p{Ll}+|\p{Lt}+|\p{Lm}+|\p{Lo}+`, "u"},
		{`\p{Letter}+|\p{Number}+|\p{Mark}+|\p{Punctuation}+|\p{Symbol}+`, "u"},
		{`\p{sc=Greek}+|\p{Script=Latin}+|\p{sc=Cyrillic}+|\p{Script=Han}+`, "u"},
		{`\p{Alphabetic}+|\P{L}+`, "u"},
		{`[\p{L}\p{N}]+|[^\p{L}\p{N}]+`, "u"},
		{`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|\p{N}{1,3}`, "u"},
	}
	// A pool of characters Go's Unicode tables know (so that node's newer
	// Unicode cannot disagree on unassigned ones): every character with a
	// case orbit, plus digits, marks, symbols and punctuation.
	var pool []rune
	assigned := []*unicode.RangeTable{unicode.L, unicode.M, unicode.N, unicode.P, unicode.S}
	for r := rune(0x21); r < 0x20000; r++ {
		if !unicode.In(r, assigned...) || unicode.Is(unicode.Co, r) {
			continue
		}
		if unicode.SimpleFold(r) != r || r < 0x250 || unicode.In(r, unicode.Nl, unicode.Other_Alphabetic, unicode.Lt, unicode.Lm) && r%3 == 0 {
			pool = append(pool, r)
		}
	}
	rng := rand.New(rand.NewPCG(27, 3))
	var texts []string
	for range 400 {
		var b strings.Builder
		for range 1 + rng.IntN(16) {
			if rng.IntN(6) == 0 {
				b.WriteString([]string{"'", " ", "'s", "'S", "1", "'ll"}[rng.IntN(6)])
				continue
			}
			b.WriteRune(pool[rng.IntN(len(pool))])
		}
		texts = append(texts, b.String())
	}
	var cases []*jsCase
	for _, p := range patterns {
		c := &jsCase{Pattern: p.expr, Flags: p.flags, Texts: texts}
		expr := p.expr
		if strings.Contains(p.flags, "i") {
			expr = "(?i)" + expr
		}
		re, err := compileRegex(expr)
		if err != nil {
			t.Fatalf("%q: %v", expr, err)
		}
		for _, s := range texts {
			c.got = append(c.got, re.matches([]rune(s)))
		}
		cases = append(cases, c)
	}
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, filepath.Join("testdata", "jsregex.mjs"))
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.Bytes())
	}
	var want [][][][2]int
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) != len(cases) {
		t.Fatalf("node answered %d cases, want %d", len(want), len(cases))
	}
	for i, c := range cases {
		bad := 0
		for j, s := range texts {
			if fmt.Sprint(c.got[j]) != fmt.Sprint(want[i][j]) {
				if bad++; bad <= 3 {
					t.Errorf("/%s/%s on %q (%U): got %v, node %v", c.Pattern, c.Flags, s, []rune(s), c.got[j], want[i][j])
				}
			}
		}
		if bad > 0 {
			t.Errorf("/%s/%s: %d of %d texts differ", c.Pattern, c.Flags, bad, len(texts))
		}
	}
}
