package constrain

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schemas returns the test schemas of testdata/schemas.json.
func testSchemas(t testing.TB) []json.RawMessage {
	t.Helper()
	data, err := os.ReadFile("testdata/schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	var out []json.RawMessage
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// validator compiles schema with the jsonschema library.
func validator(t testing.TB, schema []byte) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("s.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("s.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// byteVocab is every printable ASCII byte as a token, some multi-byte
// tokens that cross value boundaries, and an end token (id 0).
func byteVocab() *Vocabulary {
	v := &Vocabulary{Tokens: [][]byte{nil}, Ends: []int{0}}
	for b := 0x20; b < 0x7f; b++ {
		v.Tokens = append(v.Tokens, []byte{byte(b)})
	}
	for _, s := range []string{`":"`, `","`, `"}`, `},{"`, `true`, `12`, `"name":`, `]}`, `null,`, `{"`, `":[`, `fast`, `er"`, `1.5`, "\n"} {
		v.Tokens = append(v.Tokens, []byte(s))
	}
	return v
}

// TestRandomDocuments: documents drawn token by token uniformly among the
// masks' allowed tokens always parse and validate against their schema
// (checked by github.com/santhosh-tekuri/jsonschema), for every test
// schema and for any JSON object.
func TestRandomDocuments(t *testing.T) {
	vocab := byteVocab()
	type tc struct {
		name   string
		g      *Grammar
		schema []byte
	}
	var cases []tc
	for i, s := range testSchemas(t) {
		g, err := Compile(s)
		if err != nil {
			t.Fatalf("schema %d: %v", i, err)
		}
		cases = append(cases, tc{string(s), g, s})
	}
	cases = append(cases, tc{"json_object", JSONObject(), []byte(`{"type":"object"}`)})
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range cases {
		val := validator(t, c.schema)
		k := NewMasker(c.g, vocab)
		for range 50 {
			m := c.g.Matcher()
			var doc []byte
			for steps := 0; ; steps++ {
				if steps > 10000 {
					t.Fatalf("%s: no end after %q", c.name, doc)
				}
				mask := k.Mask(m)
				var allowed []int
				for id := range vocab.Tokens {
					if mask.Allowed(id) {
						allowed = append(allowed, id)
					}
				}
				if len(allowed) == 0 {
					t.Fatalf("%s: nothing allowed after %q", c.name, doc)
				}
				id := allowed[rng.IntN(len(allowed))]
				if id == 0 {
					break
				}
				if !m.FeedBytes(vocab.Tokens[id]) {
					t.Fatalf("%s: allowed token %q rejected after %q", c.name, vocab.Tokens[id], doc)
				}
				doc = append(doc, vocab.Tokens[id]...)
				if m.Done() {
					break
				}
			}
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
			if err != nil {
				t.Errorf("%s: %q does not parse: %v", c.name, doc, err)
				continue
			}
			if err := val.Validate(v); err != nil {
				t.Errorf("%s: %q does not validate: %v", c.name, doc, err)
			}
		}
	}
}

// TestMatcherRejects: bytes outside the grammar are refused.
func TestMatcherRejects(t *testing.T) {
	g, err := Compile([]byte(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`[`, `{}`, `{"b"`, `{"a":1.5`, `{"a":1,"a"`, `{"a":01`, `{"a":1}x`, `{ "a"`} {
		if g.Matcher().FeedBytes([]byte(bad)) {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, good := range []string{`{"a":1}`, `{"a":-0}`, `{"a":123456789012}`} {
		m := g.Matcher()
		if !m.FeedBytes([]byte(good)) || !m.Done() {
			t.Errorf("%q refused", good)
		}
	}
}

// TestUnsupported: keywords outside the subset fail naming the keyword;
// malformed schemas fail as such.
func TestUnsupported(t *testing.T) {
	for _, tc := range []struct {
		schema, want string
		err          error
	}{
		{`{"type":"string","pattern":"a+"}`, `"pattern"`, ErrUnsupported},
		{`{"type":"integer","minimum":3}`, `"minimum"`, ErrUnsupported},
		{`{"anyOf":[{"type":"string"}]}`, `"anyOf"`, ErrUnsupported},
		{`{"type":"object","properties":{"a":{"$ref":"#/x"}}}`, `"$ref"`, ErrUnsupported},
		{`{"type":["string","null"]}`, "list of types", ErrUnsupported},
		{`{"type":"string","format":"date"}`, `"format"`, ErrUnsupported},
		{`{"type":"object","required":["x"]}`, `"x"`, ErrUnsupported},
		{`{"type":"strin"}`, "unknown type", ErrSchema},
		{`{"type":"string","maxLength":-1}`, "maxLength", ErrSchema},
		{`{"type":"array","minItems":3,"maxItems":2}`, "minItems", ErrSchema},
		{`[1]`, "must be an object", ErrSchema},
		{`{`, "", ErrSchema},
	} {
		_, err := Compile([]byte(tc.schema))
		if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %v naming %s", tc.schema, err, tc.err, tc.want)
		}
	}
}

// FuzzMatcher: any bytes fed to a matcher of any schema never panic, and
// a document the matcher completes parses as JSON.
func FuzzMatcher(f *testing.F) {
	f.Add([]byte(`{"type":"object","properties":{"a":{"type":"integer"}}}`), []byte(`{"a":12}`))
	f.Add([]byte(`{"enum":[1,12,"x"]}`), []byte(`12`))
	f.Add([]byte(`{"type":"array","items":{"type":"string"}}`), []byte(`["a","b"]`))
	f.Fuzz(func(t *testing.T, schema, doc []byte) {
		g, err := Compile(schema)
		if err != nil {
			return
		}
		m := g.Matcher()
		for i, b := range doc {
			if !m.Feed(b) {
				return
			}
			if m.Done() && !json.Valid(doc[:i+1]) {
				t.Fatalf("complete document %q is not JSON", doc[:i+1])
			}
		}
	})
}

// TestRandomToolCalls: calls drawn uniformly among the allowed tokens are
// the prefix, a JSON object naming one of the tools with arguments valid
// against its parameters (jsonschema), and the suffix.
func TestRandomToolCalls(t *testing.T) {
	params := map[string]string{
		"get_weather": `{"type":"object","properties":{"city":{"type":"string","maxLength":10},"unit":{"enum":["c","f"]}},"required":["city"]}`,
		"get":         `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`,
	}
	tools := []Tool{{"get_weather", json.RawMessage(params["get_weather"])}, {"get", json.RawMessage(params["get"])}}
	vocab := byteVocab()
	for _, f := range []struct{ prefix, key, suffix string }{{"", "parameters", ""}, {"<tool_call>\n", "arguments", "\n</tool_call>"}, {"[TOOL_CALLS]", "", ""}} {
		g, err := ToolCall(tools, f.prefix, f.key, f.suffix)
		if f.key == "" {
			// Mistral's layout: NAME[ARGS]ARGUMENTS.
			g, err = ToolCallLayout(tools, f.prefix, func(name string) string { return name + "[ARGS]" }, "", "")
		}
		if err != nil {
			t.Fatal(err)
		}
		k := NewMasker(g, vocab)
		rng := rand.New(rand.NewPCG(3, 4))
		for range 40 {
			m := g.Matcher()
			var doc []byte
			for !m.Done() {
				mask := k.Mask(m)
				var allowed []int
				for id := range vocab.Tokens {
					if id != 0 && mask.Allowed(id) {
						allowed = append(allowed, id)
					}
				}
				if len(allowed) == 0 {
					t.Fatalf("nothing allowed after %q", doc)
				}
				id := allowed[rng.IntN(len(allowed))]
				if !m.FeedBytes(vocab.Tokens[id]) {
					t.Fatalf("allowed %q rejected after %q", vocab.Tokens[id], doc)
				}
				doc = append(doc, vocab.Tokens[id]...)
			}
			body, ok := bytes.CutPrefix(doc, []byte(f.prefix))
			body, ok2 := bytes.CutSuffix(body, []byte(f.suffix))
			key := f.key
			if key == "" {
				name, args, found := bytes.Cut(body, []byte("[ARGS]"))
				n, _ := json.Marshal(string(name))
				body, ok2, key = []byte(`{"name":`+string(n)+`,"args":`+string(args)+`}`), ok2 && found, "args"
			}
			var call map[string]json.RawMessage
			if !ok || !ok2 || json.Unmarshal(body, &call) != nil || len(call) != 2 {
				t.Fatalf("%q is not a call", doc)
			}
			var name string
			json.Unmarshal(call["name"], &name)
			if params[name] == "" {
				t.Fatalf("%q names no tool", doc)
			}
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(call[key]))
			if err != nil {
				t.Fatalf("%q: %v", doc, err)
			}
			if err := validator(t, []byte(params[name])).Validate(v); err != nil {
				t.Errorf("%q: %v", doc, err)
			}
		}
	}
}
