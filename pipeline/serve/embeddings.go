package serve

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"

	"github.com/gpurun/gpurun/pipeline"
)

// embedInput is one input of an embeddings request: text, or token ids
// used exactly as given.
type embedInput struct {
	text string
	ids  []int
}

// decodeEmbedInput reads an input field: a string, a list of strings, a
// list of token ids (one input) or a list of lists of token ids; ids
// says whether token ids are accepted (OpenAI's API) or not (ollama's).
func decodeEmbedInput(raw json.RawMessage, param string, ids bool) ([]embedInput, *apiError) {
	var one string
	var texts []string
	var tokens []int
	var batches [][]int
	var in []embedInput
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return nil, badRequest(param, "missing_input", param+" is required")
	case json.Unmarshal(raw, &one) == nil:
		in = []embedInput{{text: one}}
	case json.Unmarshal(raw, &texts) == nil:
		for _, t := range texts {
			in = append(in, embedInput{text: t})
		}
	case ids && json.Unmarshal(raw, &tokens) == nil:
		in = []embedInput{{ids: tokens}}
	case ids && json.Unmarshal(raw, &batches) == nil:
		for _, b := range batches {
			in = append(in, embedInput{ids: b})
		}
	default:
		want := "a string or a list of strings"
		if ids {
			want = "a string, a list of strings, a list of token ids or a list of lists of token ids"
		}
		return nil, badRequest(param, "invalid_value", fmt.Sprintf("%s: want %s", param, want))
	}
	if len(in) == 0 {
		return nil, badRequest(param, "invalid_value", param+": an empty list")
	}
	for i, x := range in {
		if x.ids == nil && x.text == "" {
			return nil, badRequest(param, "invalid_value", fmt.Sprintf("%s[%d]: an empty string", param, i))
		}
		if x.ids != nil && len(x.ids) == 0 {
			return nil, badRequest(param, "invalid_value", fmt.Sprintf("%s[%d]: no token ids", param, i))
		}
	}
	return in, nil
}

// embedOptions are how an embeddings request wants its vectors.
type embedOptions struct {
	normalize bool
	dims      int  // > 0: the first dims values, normalized again
	truncate  bool // an input past the cache keeps its first tokens
}

// embedAll embeds the inputs on m, one after another, and returns the
// vectors and the tokens they took. Texts get the model's special tokens
// (pipeline.Model.EmbedTokens); token ids are used as given.
func embedAll(ctx context.Context, m *pipeline.Model, in []embedInput, o embedOptions) ([][]float32, int, error) {
	if m.Pooling() == "" {
		return nil, 0, pipeline.ErrNotEmbedding
	}
	if o.dims < 0 || o.dims > m.EmbeddingDim() {
		return nil, 0, fmt.Errorf("%w: dimensions %d: the model's embeddings have %d", pipeline.ErrOptions, o.dims, m.EmbeddingDim())
	}
	var out [][]float32
	tokens := 0
	for _, x := range in {
		ids := x.ids
		if ids == nil {
			var err error
			if ids, err = m.EmbedTokens(x.text); err != nil {
				return nil, 0, err
			}
		}
		if o.truncate && len(ids) > m.MaxCache() {
			ids = ids[:m.MaxCache()]
		}
		v, err := m.Embed(ctx, ids, o.normalize && o.dims == 0)
		if err != nil {
			return nil, 0, err
		}
		if o.dims > 0 {
			// Matryoshka truncation: the leading values, normalized.
			v = v[:o.dims]
			if o.normalize {
				var ss float64
				for _, x := range v {
					ss += float64(x) * float64(x)
				}
				if n := math.Sqrt(ss); n > 0 {
					for i := range v {
						v[i] = float32(float64(v[i]) / n)
					}
				}
			}
		}
		out = append(out, v)
		tokens += len(ids)
	}
	return out, tokens, nil
}

// embedError maps an embedding failure to a response.
func embedError(err error) *apiError {
	if errors.Is(err, pipeline.ErrNotEmbedding) {
		return badRequest("model", "not_an_embedding_model", err.Error()+": serve an embedding model (a GGUF with <arch>.pooling_type)")
	}
	return generationError(err, kindEmbed)
}

// embeddingsRequest is the body of POST /v1/embeddings.
type embeddingsRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
}

// embeddings serves OpenAI's POST /v1/embeddings: L2-normalized vectors
// (as llama-server returns them), as floats or base64 of little-endian
// float32s (encoding_format).
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) {
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	r, m, id, name := s.route(r, body)
	var req embeddingsRequest
	if aerr := decodeJSON(body, &req); aerr != nil {
		writeError(w, aerr)
		return
	}
	if name == "" {
		writeError(w, badRequest("model", "missing_model", "model is required"))
		return
	}
	if name != id {
		writeError(w, s.notFound(name))
		return
	}
	if req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64" {
		writeError(w, badRequest("encoding_format", "invalid_value", fmt.Sprintf("encoding_format %q: want float or base64", req.EncodingFormat)))
		return
	}
	in, aerr := decodeEmbedInput(req.Input, "input", true)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	o := embedOptions{normalize: true}
	if req.Dimensions != nil {
		if *req.Dimensions < 1 {
			writeError(w, badRequest("dimensions", "invalid_value", fmt.Sprintf("dimensions %d: want at least 1", *req.Dimensions)))
			return
		}
		o.dims = *req.Dimensions
	}
	if aerr := s.enter(); aerr != nil {
		writeError(w, aerr)
		return
	}
	defer s.leave()
	vecs, tokens, err := embedAll(r.Context(), m, in, o)
	if err != nil {
		writeError(w, embedError(err))
		return
	}
	data := make([]any, len(vecs))
	for i, v := range vecs {
		var e any = v
		if req.EncodingFormat == "base64" {
			b := make([]byte, 4*len(v))
			for j, x := range v {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(x))
			}
			e = base64.StdEncoding.EncodeToString(b)
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": e}
	}
	writeJSON(w, map[string]any{"object": "list", "data": data, "model": id,
		"usage": map[string]any{"prompt_tokens": tokens, "total_tokens": tokens}})
}
