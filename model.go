package gpurun

import (
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/checkpoint"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// Backend describes the device the model runs on.
func (m *Model) Backend() gpu.Info { return m.pm.BackendInfo() }

// Config is the model's architecture and vocabulary settings.
func (m *Model) Config() model.Config { return m.pm.Config() }

// MaxCache is the KV cache's length in positions: the longest conversation
// a session holds.
func (m *Model) MaxCache() int { return m.pm.MaxCache() }

// Slots is how many sessions generate at once (WithParallel).
func (m *Model) Slots() int { return m.pm.Slots() }

// ActivationDType is the type activations are computed in (WithActivations).
func (m *Model) ActivationDType() tensors.DType { return m.pm.ActivationDType() }

// KVDType is the type the KV cache stores.
func (m *Model) KVDType() tensors.DType { return m.pm.KVDType() }

// KVCacheTypes names the KV cache's key and value types as llama.cpp's
// -ctk/-ctv do: "f32", "f16", "q8_0", ..., or "k TYPE, v TYPE" when they
// differ (WithCacheTypes).
func (m *Model) KVCacheTypes() string { return m.pm.KVCacheTypes() }

// KVCacheBytes is the size of the model's KV caches (every slot's).
func (m *Model) KVCacheBytes() int64 { return m.pm.KVCacheBytes() }

// HasTokenizer reports whether text prompts can be used (else only token
// ids; TokenizerProblem may say why).
func (m *Model) HasTokenizer() bool { return m.pm.HasTokenizer() }

// Encode tokenizes text without adding BOS; ErrNoTokenizer without a
// tokenizer.
func (m *Model) Encode(text string) ([]int, error) { return m.pm.Encode(text) }

// Decode turns ids back into text; ErrNoTokenizer without a tokenizer.
func (m *Model) Decode(ids []int) (string, error) { return m.pm.Decode(ids) }

// ControlTokens maps the vocabulary's control tokens (such as a chat
// template's end-of-turn marker) to their ids.
func (m *Model) ControlTokens() map[string]int { return m.pm.ControlTokens() }

// Pipeline is the model as package pipeline runs it, for the packages
// built on it (pipeline/chat conversations, pipeline/serve servers) and
// for what this package does not wrap (profiles, batching statistics).
// It stays owned by m: Close m, not it.
func (m *Model) Pipeline() *pipeline.Model { return m.pm }

// LoadCheckpoint imports the checkpoint at path (a GGUF file, a Hugging
// Face directory or one of its .safetensors files, a llama2.c .bin) into
// memory, with an optional tokenizer file (a SentencePiece model, or a
// llama2.c tokenizer.bin; "" for none or the one the file carries), for
// OpenCheckpoint or for package pipeline on a backend of your own
// (pipeline.FromCheckpoint). Open does this itself.
func LoadCheckpoint(path, tokenizer string) (*model.Checkpoint, error) {
	return checkpoint.Load(path, checkpoint.Options{Tokenizer: tokenizer})
}
