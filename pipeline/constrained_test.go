package pipeline_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/constrain"
	"github.com/gpurun/gpurun/tensors/gguf"
)

func readSchemas(t testing.TB) []json.RawMessage {
	t.Helper()
	data, err := os.ReadFile("constrain/testdata/schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	var out []json.RawMessage
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestConstrainedGenerations: 200 sampled generations, 5 seeds of each of
// the 20 test schemas on two models (stories260K with its tokenizer and
// llama.cpp's random-weight Llama GGUF with the same vocabulary), parse
// and validate against their schema with github.com/santhosh-tekuri/jsonschema,
// and end on their own (stop_token), as do generations of any JSON object.
func TestConstrainedGenerations(t *testing.T) {
	ck := storiesCheckpoint(t)
	var err error
	if ck.Tokenizer, err = os.ReadFile(testmodels.Path(t, "tok512.model")); err != nil {
		t.Fatal(err)
	}
	random, err := gguf.Load(filepath.Join(testmodels.Path(t, "arch"), "llama.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	models := map[string]*pipeline.Model{
		"stories260K": load(t, ck, pipeline.Options{MaxCache: 2048}),
		"random":      load(t, random, pipeline.Options{MaxCache: 2048}),
	}
	schemas := readSchemas(t)
	n := 0
	for name, m := range models {
		for i, raw := range schemas {
			g, err := constrain.Compile(raw)
			if err != nil {
				t.Fatalf("schema %d: %v", i, err)
			}
			val := compileSchema(t, raw)
			for seed := range 5 {
				text, reason := generateText(t, m, g, uint64(seed+1))
				n++
				if seed == 0 && i%5 == 0 {
					t.Logf("%s schema %d: %s", name, i, text)
				}
				if reason != pipeline.StopToken {
					t.Errorf("%s schema %d seed %d: stopped by %s after %q", name, i, seed, reason, text)
					continue
				}
				v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
				if err != nil {
					t.Errorf("%s schema %d seed %d: %q does not parse: %v", name, i, seed, text, err)
					continue
				}
				if err := val.Validate(v); err != nil {
					t.Errorf("%s schema %d seed %d: %q does not validate: %v", name, i, seed, text, err)
				}
			}
		}
		for seed := range 5 {
			text, reason := generateText(t, m, constrain.JSONObject(), uint64(seed+1))
			var obj map[string]any
			if err := json.Unmarshal([]byte(text), &obj); reason != pipeline.StopToken || err != nil {
				t.Errorf("%s json_object seed %d: %s, %q: %v", name, seed, reason, text, err)
			}
		}
	}
	if n != 200 {
		t.Errorf("%d generations, want 200", n)
	}
}

func compileSchema(t testing.TB, raw []byte) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
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

func generateText(t testing.TB, m *pipeline.Model, g *constrain.Grammar, seed uint64) (string, pipeline.StopReason) {
	t.Helper()
	s := m.NewSession()
	var text strings.Builder
	for tok, err := range s.Generate(t.Context(), pipeline.Prompt{Text: "Once upon a time"}, pipeline.GenerateOptions{Temperature: 1, Seed: seed, Grammar: g}) {
		if err != nil {
			t.Fatal(err)
		}
		text.WriteString(tok.Piece)
	}
	return text.String(), s.Metrics().StopReason
}

// TestConstrainedSpeed logs decode tok/s with and without a schema on
// stories260K (greedy, host sampling on the CPU either way).
func TestConstrainedSpeed(t *testing.T) {
	ck := storiesCheckpoint(t)
	var err error
	if ck.Tokenizer, err = os.ReadFile(testmodels.Path(t, "tok512.model")); err != nil {
		t.Fatal(err)
	}
	m := load(t, ck, pipeline.Options{MaxCache: 2048})
	g, err := constrain.Compile([]byte(`{"type":"array","items":{"type":"string","maxLength":1000},"minItems":3,"maxItems":3}`))
	if err != nil {
		t.Fatal(err)
	}
	run := func(g *constrain.Grammar) float64 {
		s := m.NewSession()
		for _, err := range s.Generate(t.Context(), pipeline.Prompt{Text: "Once upon a time"}, pipeline.GenerateOptions{Temperature: 1, Seed: 7, MaxTokens: 400, Grammar: g, IgnoreStopTokens: g == nil}) {
			if err != nil {
				t.Fatal(err)
			}
		}
		return s.Metrics().DecodeTokensPerSec
	}
	for range 3 {
		plain, con := run(nil), run(g)
		t.Logf("decode tok/s: without a schema %.0f, with %.0f (%.2fx)", plain, con, con/plain)
	}
}

// TestConstrainedGPU: on the GPU backends, where greedy and sampled
// decoding otherwise pick on the device, a constrained generation samples
// on the host and validates too.
func TestConstrainedGPU(t *testing.T) {
	ck := storiesCheckpoint(t)
	var err error
	if ck.Tokenizer, err = os.ReadFile(testmodels.Path(t, "tok512.model")); err != nil {
		t.Fatal(err)
	}
	raw := readSchemas(t)[0]
	g, err := constrain.Compile(raw)
	if err != nil {
		t.Fatal(err)
	}
	val := compileSchema(t, raw)
	for _, backend := range []string{"webgpu", "vulkan"} {
		t.Run(backend, func(t *testing.T) {
			m := load(t, ck, pipeline.Options{MaxCache: 512, Backend: openBackend(t, backend)})
			for seed := range 3 {
				text, reason := generateText(t, m, g, uint64(seed+1))
				v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
				if reason != pipeline.StopToken || err != nil {
					t.Fatalf("seed %d: %s, %q: %v", seed, reason, text, err)
				}
				if err := val.Validate(v); err != nil {
					t.Errorf("seed %d: %q: %v", seed, text, err)
				}
			}
		})
	}
}
