package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpurun/gpurun/internal/checkpoint"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/modelfile"
	"github.com/gpurun/gpurun/pipeline"
)

func newInspect() *cobra.Command {
	var (
		asJSON bool
		tok    string
		kvLen  int
		budget = sizeFlag{n: 2 << 30}
	)
	cmd := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Show a model file's, bundle's or checkpoint's metadata and every tensor with its type, shape, size and quantization",
		Long: `Inspect shows what a file holds: a model file or .task bundle, or a checkpoint
run takes as it is (a GGUF file, a llama2.c .bin, a Hugging Face directory).
A GGUF file shows its metadata and its tensors as stored (shapes in the
file's ggml ne order, innermost dimension first, as llama.cpp's gguf tools
print them) and the configuration gpurun runs it with; a
llama2.c .bin or a Hugging Face directory shows the configuration and the
tensors as gpurun imports them.`,
		Args: nArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := inspect(args[0], tok)
			if err != nil {
				return err
			}
			s.KVCache = summarizeKV(s.Config, kvLen)
			if s.KVCache != nil && budget.n > 0 {
				if err := s.KVCache.fitBudget(s.Config, s.TensorBytes, budget.n); err != nil {
					return err
				}
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(s)
			}
			return s.writeText(cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON")
	cmd.Flags().IntVar(&kvLen, "kv-positions", 0, "context length the KV cache sizes are given for (default: the model's context length)")
	cmd.Flags().Var(&budget, "memory-budget", "memory (2GiB, 512MiB, bytes) the largest context of each KV cache type is given for: the cache alone, and with the weights and activations as serve --memory-limit counts them; 0: none")
	cmd.Flags().StringVar(&tok, "tokenizer", "", "tokenizer for a checkpoint that carries none (a llama2.c .bin), as run takes it")
	return cmd
}

// checkpointSummary is what inspect shows: a model file's summary, or one
// made the same way for a checkpoint, with a GGUF file's metadata.
type checkpointSummary struct {
	modelfile.Summary
	// GGUFMetadata is a GGUF file's metadata, in file order.
	GGUFMetadata []ggufEntry `json:"gguf_metadata,omitempty"`
	// ImportError says why gpurun cannot run a checkpoint it shows.
	ImportError string `json:"import_error,omitempty"`
	// KVCache is the KV cache's memory in each cache type.
	KVCache *kvSummary `json:"kv_cache,omitempty"`
}

type ggufEntry struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value string `json:"value"` // strings quoted, arrays as [length]type
}

// inspect summarizes the file or directory at path.
func inspect(path, tok string) (*checkpointSummary, error) {
	kind, err := modelFileKind(path)
	if err != nil {
		return nil, err
	}
	if kind {
		if tok != "" {
			return nil, fmt.Errorf("--tokenizer: %s is a model file, which carries its own tokenizer (or none)", path)
		}
		f, err := modelfile.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return &checkpointSummary{Summary: f.Summary()}, nil
	}
	format, err := checkpoint.Detect(path)
	if err != nil {
		return nil, err
	}
	if format == checkpoint.FormatGGUF {
		return inspectGGUF(path, tok)
	}
	ck, err := checkpoint.Load(path, checkpoint.Options{Format: format, Tokenizer: tok})
	if err != nil {
		return nil, err
	}
	s := &checkpointSummary{Summary: modelfile.SummarizeTensors(ck.Tensors)}
	s.Format, s.Config, s.Metadata = modelfile.Format(format), &ck.Config, []string{}
	if s.FileBytes, err = diskSize(path); err != nil {
		return nil, err
	}
	b, err := pipeline.TokenizerBytes(ck)
	if err != nil {
		return nil, err
	}
	s.TokenizerBytes = len(b)
	return s, nil
}

// ggufShapeOrder is the order of a GGUF file's shapes in inspect's output.
const ggufShapeOrder = "ggml ne order, innermost first"

// inspectGGUF shows a GGUF file as stored, and the configuration of its
// import (or why the import fails).
func inspectGGUF(path, tok string) (*checkpointSummary, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	s := &checkpointSummary{}
	s.Format, s.BytesByDType, s.Tensors, s.Metadata = checkpoint.FormatGGUF, map[string]int64{}, []modelfile.TensorSummary{}, []string{}
	s.ShapeOrder = ggufShapeOrder
	if s.FileBytes, err = diskSize(path); err != nil {
		return nil, err
	}
	for _, kv := range f.KV {
		s.Metadata = append(s.Metadata, kv.Key)
		s.GGUFMetadata = append(s.GGUFMetadata, ggufEntry{Key: kv.Key, Type: ggufType(kv.Value), Value: ggufValue(kv.Value)})
	}
	for _, t := range f.Tensors {
		ts := modelfile.TensorSummary{Name: t.Name, DType: strings.ToLower(t.Type.String()), Shape: slices.Clone(t.Dims), Bytes: t.Size}
		if bl := t.Type.BlockLen(); bl > 1 {
			ts.Quantization = &modelfile.QuantSummary{Block: bl, InBlock: true}
		}
		s.Tensors = append(s.Tensors, ts)
		s.Params += t.Elements()
		s.TensorBytes += t.Size
		s.BytesByDType[ts.DType] += t.Size
	}
	ck, err := checkpoint.Load(path, checkpoint.Options{Format: checkpoint.FormatGGUF, Tokenizer: tok})
	if err != nil {
		s.ImportError = errorText(err)
		return s, nil
	}
	s.Config = &ck.Config
	if b, err := pipeline.TokenizerBytes(ck); err == nil {
		s.TokenizerBytes = len(b)
	}
	return s, nil
}

// ggufType names a metadata value's type: "string", "array of float32".
func ggufType(v gguf.Value) string {
	if v.Type == gguf.TypeArray {
		return "array of " + v.Elem.String()
	}
	return v.Type.String()
}

// ggufValue formats a metadata value: a float32 in its shortest form
// (1e-05, not 9.999999747378752e-06), the others as gguf formats them.
func ggufValue(v gguf.Value) string {
	if v.Type == gguf.TypeFloat32 {
		if f, ok := v.Float(); ok {
			return strconv.FormatFloat(f, 'g', -1, 32)
		}
	}
	return v.String()
}

// diskSize is the size of a file, or of the files directly in a directory.
func diskSize(path string) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	if !fi.IsDir() {
		return fi.Size(), nil
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range ents {
		if fi, err := os.Stat(filepath.Join(path, e.Name())); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	return n, nil
}

// modelFileKind reports whether path's content is a model file or a .task
// bundle (rather than a checkpoint).
func modelFileKind(path string) (bool, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return false, err
	}
	if fi.IsDir() {
		return false, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	head := make([]byte, 8)
	n, _ := io.ReadFull(f, head)
	return n >= 4 && string(head[:4]) == "PK\x03\x04" || n >= 8 && string(head[4:8]) == "TFL3", nil
}

// writeText prints the summary, then a GGUF file's metadata and any
// import error.
func (s *checkpointSummary) writeText(w io.Writer) error {
	if err := s.Summary.WriteText(w); err != nil {
		return err
	}
	if len(s.GGUFMetadata) > 0 {
		fmt.Fprintln(w, "\nGGUF metadata:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, kv := range s.GGUFMetadata {
			v := kv.Value
			if len(v) > 80 {
				v = v[:77] + "..."
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", kv.Key, kv.Type, v)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if s.KVCache != nil {
		s.KVCache.writeText(w)
	}
	if s.ImportError != "" {
		_, err := fmt.Fprintf(w, "\ngpurun cannot run it: %s\n", s.ImportError)
		return err
	}
	return nil
}
