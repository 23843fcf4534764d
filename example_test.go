package gpurun_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"strings"

	"github.com/gpurun/gpurun"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/constrain"
)

// Open a llama2.c checkpoint directly (no conversion), with the tokenizer it
// lacks, and generate greedily on the CPU.
func Example() {
	ctx := context.Background()
	m, err := gpurun.Open(ctx, "../shared/models/stories260K.bin",
		gpurun.WithTokenizer("../shared/models/tok512.model"), gpurun.WithBackend("cpu"))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	s := m.NewSession()
	var text strings.Builder
	for tok, err := range s.Generate(ctx, gpurun.Text("Once upon a time"), gpurun.GenerateOptions{MaxTokens: 24}) {
		if err != nil {
			log.Fatal(err)
		}
		text.WriteString(tok.Piece)
	}
	fmt.Println(m.Format(), m.Config().Arch)
	fmt.Println(text.String())
	fmt.Println(s.Metrics().StopReason)
	// Output:
	// llama2c llama
	// , there was a little girl named Lily. She loved to play outside in the p
	// max_tokens
}

// The lower layer: package pipeline runs a model on a backend its caller
// opens (it chooses none itself), with its own options and defaults (the
// zero GenerateOptions is greedy decoding until a stop token).
func ExampleOpenBackend() {
	ctx := context.Background()
	b, err := gpurun.OpenBackend(ctx, "cpu", gpurun.BackendOptions{CPU: cpu.Options{Math: gpurun.DefaultCPUMath}})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ck, err := gpurun.LoadCheckpoint("../shared/models/stories260K.bin", "../shared/models/tok512.model")
	if err != nil {
		log.Fatal(err)
	}
	m, err := pipeline.FromCheckpoint(ctx, ck, pipeline.Options{Backend: b, MaxCache: 128})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	var text strings.Builder
	for tok, err := range m.NewSession().Generate(ctx, pipeline.Prompt{Text: "Once upon a time"}, pipeline.GenerateOptions{MaxTokens: 24}) {
		if err != nil {
			log.Fatal(err)
		}
		text.WriteString(tok.Piece)
	}
	fmt.Println(b.Info().Backend)
	fmt.Println(text.String())
	// Output:
	// cpu
	// , there was a little girl named Lily. She loved to play outside in the p
}

// A session continues the conversation: the second Generate runs only the
// new tokens through the model, the rest of the context is in the KV cache.
func ExampleSession_Generate() {
	ctx := context.Background()
	m, err := gpurun.Open(ctx, "../shared/models/stories260K.bin",
		gpurun.WithTokenizer("../shared/models/tok512.model"), gpurun.WithBackend("cpu"), gpurun.WithMaxCache(128))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	s := m.NewSession()
	opts := gpurun.GenerateOptions{MaxTokens: 8}
	for _, prompt := range []string{"Lily had a cat.", " The cat"} {
		for _, err := range s.Generate(ctx, gpurun.Text(prompt), opts) {
			if err != nil {
				log.Fatal(err)
			}
		}
		mt := s.Metrics()
		fmt.Printf("prompt %d tokens, ran %d, generated %d\n", mt.PromptTokens, mt.PrefillTokens, mt.GeneratedTokens)
	}
	// Output:
	// prompt 7 tokens, ran 7, generated 8
	// prompt 3 tokens, ran 4, generated 8
}

// Options out of range are errors, not silently clamped. The zero value
// decodes greedily until a stop token or a full cache, in the Go API, in
// package pipeline, in a model's Variants and behind the server.
func ExampleGenerateOptions_Validate() {
	err := gpurun.GenerateOptions{TopP: 2}.Validate()
	fmt.Println(errors.Is(err, gpurun.ErrOptions))
	fmt.Println(err)
	var zero gpurun.GenerateOptions
	fmt.Println(zero.Validate(), zero.MaxTokens, zero.Temperature, zero.TopK, zero.TopP)
	// Output:
	// true
	// pipeline: invalid options: top-p 2, want a number in [0, 1]
	// <nil> 0 0 0 0
}

// A GGUF file opens as it is. The prompt here is token ids (used as given,
// without BOS); the ids printed are llama.cpp's greedy ids for this file.
func ExampleOpen_gguf() {
	ctx := context.Background()
	m, err := gpurun.Open(ctx, "../shared/models/arch/llama.gguf", gpurun.WithBackend("cpu"))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	fmt.Println(m.Format(), m.Config().Arch, m.HasTokenizer())
	s := m.NewSession()
	var ids []int
	for tok, err := range s.Generate(ctx, gpurun.IDs(259, 260, 300, 17, 400, 511, 3, 288, 123, 450, 301, 260), gpurun.GenerateOptions{MaxTokens: 8}) {
		if err != nil {
			log.Fatal(err)
		}
		ids = append(ids, tok.ID)
	}
	fmt.Println(ids)
	// Output:
	// gguf llama true
	// [397 254 315 186 413 378 239 466]
}

// On a GPU backend the device picks each token and runs several decode
// steps per submission: here 16, whose ids come back together and are
// streamed one by one (stop strings and cancellation are checked between
// them). Not run as a test: it needs a Vulkan driver.
func ExampleWithStepsPerSubmit() {
	ctx := context.Background()
	m, err := gpurun.Open(ctx, "../shared/models/stories260K.bin",
		gpurun.WithTokenizer("../shared/models/tok512.model"), gpurun.WithBackend("vulkan"), gpurun.WithStepsPerSubmit(16))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	for tok, err := range m.NewSession().Generate(ctx, gpurun.Text("Once upon a time"), gpurun.GenerateOptions{MaxTokens: 48}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print(tok.Piece)
	}
	fmt.Println()
}

// Constrain the output to a JSON schema: compile it once (its token masks
// are cached with it) and pass it in GenerateOptions.Grammar; generation
// ends when the document is complete.
func ExampleGenerateOptions_grammar() {
	ctx := context.Background()
	m, err := gpurun.Open(ctx, "../shared/models/stories260K.bin",
		gpurun.WithTokenizer("../shared/models/tok512.model"), gpurun.WithBackend("cpu"))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	g, err := constrain.Compile([]byte(`{"type":"object","properties":{"name":{"type":"string","maxLength":16},"age":{"type":"integer"}},"required":["name","age"]}`))
	if err != nil {
		log.Fatal(err)
	}
	s := m.NewSession()
	var text strings.Builder
	for tok, err := range s.Generate(ctx, gpurun.Text("Once upon a time"), gpurun.GenerateOptions{Temperature: 0.8, TopK: 40, Seed: 1, Grammar: g}) {
		if err != nil {
			log.Fatal(err)
		}
		text.WriteString(tok.Piece)
	}
	var v struct {
		Name *string
		Age  *int
	}
	err = json.Unmarshal([]byte(text.String()), &v)
	fmt.Println(err == nil && v.Name != nil && v.Age != nil, s.Metrics().StopReason)
	// Output: true stop_token
}
