package pipeline_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/constrain"
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

// BenchmarkConstrainedDecode measures decode tok/s with and without a
// schema on stories260K, sampled: on the CPU the host samples either way;
// on the GPU backends the program picks, with the grammar's mask set on it
// each step, against multi-step submissions without one.
//
//	go test -run X -bench ConstrainedDecode -benchtime 3x ./pipeline
func BenchmarkConstrainedDecode(b *testing.B) {
	ck := storiesCheckpoint(b)
	var err error
	if ck.Tokenizer, err = os.ReadFile(testmodels.Path(b, "tok512.model")); err != nil {
		b.Fatal(err)
	}
	g, err := constrain.Compile([]byte(`{"type":"array","items":{"type":"string","maxLength":1000},"minItems":3,"maxItems":3}`))
	if err != nil {
		b.Fatal(err)
	}
	for _, backend := range []string{"cpu", "webgpu", "vulkan"} {
		for _, schema := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/schema=%v", backend, schema), func(b *testing.B) {
				m := load(b, ck, pipeline.Options{MaxCache: 2048, Backend: openBackend(b, backend)})
				var gr *constrain.Grammar
				if schema {
					gr = g
				}
				var tokS float64
				for b.Loop() {
					s := m.NewSession()
					for _, err := range s.Generate(b.Context(), pipeline.Prompt{Text: "Once upon a time"}, pipeline.GenerateOptions{Temperature: 1, Seed: 7, MaxTokens: 400, Grammar: gr, IgnoreStopTokens: !schema}) {
						if err != nil {
							b.Fatal(err)
						}
					}
					tokS += s.Metrics().DecodeTokensPerSec
				}
				b.ReportMetric(tokS/float64(b.N), "decode-tok/s")
			})
		}
	}
}

// TestConstrainedOnDevice: a constrained generation picks its tokens in
// the GPU backend's argmax or sampling program, with the grammar's token
// mask set on the program before each step (gpu.Program.SetTokenMask), on WebGPU
// and Vulkan; the ids equal those of host sampling
// (HostSampling: the whole logits row read back, masked on the host and
// drawn by internal/sampler), greedy and sampled with several seeds, and every
// output validates against the schema.
func TestConstrainedOnDevice(t *testing.T) {
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
	gen := func(t *testing.T, m *pipeline.Model, temp float32, seed uint64) ([]int, string, pipeline.Metrics) {
		t.Helper()
		s := m.NewSession()
		var ids []int
		var text strings.Builder
		for tok, err := range s.Generate(t.Context(), pipeline.Prompt{Text: "Once upon a time"}, pipeline.GenerateOptions{Temperature: temp, Seed: seed, Grammar: g, MaxTokens: 300}) {
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, tok.ID)
			text.WriteString(tok.Piece)
		}
		return ids, text.String(), s.Metrics()
	}
	for _, backend := range []string{"webgpu", "vulkan"} {
		t.Run(backend, func(t *testing.T) {
			device := load(t, ck, pipeline.Options{MaxCache: 512, Backend: openBackend(t, backend)})
			host := load(t, ck, pipeline.Options{MaxCache: 512, Backend: openBackend(t, backend), HostSampling: true})
			for _, c := range []struct {
				temp float32
				seed uint64
			}{{0, 0}, {1, 1}, {0.8, 3}} {
				got, text, met := gen(t, device, c.temp, c.seed)
				want, _, hostMet := gen(t, host, c.temp, c.seed)
				if met.DevicePicked == 0 || met.DevicePicked < met.GeneratedTokens-1 {
					t.Errorf("temperature %v seed %d: %d of %d tokens picked by the program, want all but the first", c.temp, c.seed, met.DevicePicked, met.GeneratedTokens)
				}
				if hostMet.DevicePicked != 0 {
					t.Errorf("host sampling: %d tokens picked by the program", hostMet.DevicePicked)
				}
				if !slices.Equal(got, want) {
					t.Errorf("temperature %v seed %d: masked program picked %v, host %v", c.temp, c.seed, got, want)
				}
				v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
				if met.StopReason != pipeline.StopToken || err != nil {
					t.Fatalf("temperature %v seed %d: %s, %q: %v", c.temp, c.seed, met.StopReason, text, err)
				}
				if err := val.Validate(v); err != nil {
					t.Errorf("temperature %v seed %d: %q: %v", c.temp, c.seed, text, err)
				}
			}
		})
	}
}
