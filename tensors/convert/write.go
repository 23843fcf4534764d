package convert

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
	"github.com/gpurun/gpurun/tensors/modelfile"
)

// IsTask reports whether path names a .task bundle (by its extension).
func IsTask(path string) bool { return strings.EqualFold(filepath.Ext(path), ".task") }

// WriteFile writes a model file, or a .task bundle when path ends in .task,
// holding cfg, the tensors and the serialized SentencePiece tokenizer (nil
// for none). It writes beside path and renames at the end, so a failed or
// interrupted conversion never leaves a truncated model behind.
func WriteFile(path string, cfg model.Config, ts []*tensors.Tensor, tokenizer []byte, progress func(done, total int64)) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".gpurun-*.tflite")
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}()
	opts := modelfile.WriteOptions{Tokenizer: tokenizer, Progress: progress}
	if err := modelfile.Write(tmp, cfg, ts, opts); err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	if !IsTask(path) {
		if err := tmp.Close(); err != nil {
			return fmt.Errorf("convert: %w", err)
		}
		return rename(tmp.Name(), path)
	}
	size, err := tmp.Seek(0, 1)
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	meta, err := modelfile.ConfigJSON(cfg)
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	task, err := os.CreateTemp(dir, ".gpurun-*.task")
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	defer func() {
		task.Close()
		os.Remove(task.Name())
	}()
	if err := modelfile.WriteTask(task, tmp, size, tokenizer, meta); err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	if err := task.Close(); err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	return rename(task.Name(), path)
}

func rename(from, to string) error {
	if err := os.Chmod(from, 0o644); err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	if err := os.Rename(from, to); err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	return nil
}
