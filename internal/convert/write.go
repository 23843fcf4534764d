package convert

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpurun/gpurun/internal/modelfile"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// IsTask reports whether path names a .task bundle (by its extension).
func IsTask(path string) bool { return strings.EqualFold(filepath.Ext(path), ".task") }

// ErrTarget: an output path that names something other than a regular file
// or nothing, or whose extension is not .tflite or .task.
var ErrTarget = errors.New("unsuitable output path")

// CheckTarget reports whether WriteFile may write path: its name must end
// in .tflite or .task (other extensions such as .gguf would put a file of
// the wrong format under that name), and it must name nothing yet or a
// regular file, which is then replaced. Directories, devices, FIFOs,
// sockets and symbolic links are refused, never replaced.
func CheckTarget(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case err == nil && fi.IsDir():
		return fmt.Errorf("%w: %s is a directory (give a file name ending in .tflite or .task)", ErrTarget, path)
	case err == nil && !fi.Mode().IsRegular():
		return fmt.Errorf("%w: %s is %s, not a regular file; only a regular file is replaced", ErrTarget, path, describeMode(fi.Mode()))
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %w", ErrTarget, err)
	}
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".tflite", ".task":
		return nil
	case "":
		return fmt.Errorf("%w: %s has no extension: gpurun writes .tflite model files and .task bundles", ErrTarget, path)
	default:
		return fmt.Errorf("%w: %s: gpurun writes .tflite model files and .task bundles, not %s files", ErrTarget, path, ext)
	}
}

func describeMode(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "not a regular file"
}

// WriteFile writes a model file, or a .task bundle when path ends in .task,
// holding cfg, the tensors and the serialized SentencePiece tokenizer (nil
// for none). It writes a temporary file beside path and renames it over
// path at the end, so a failed or interrupted conversion never leaves a
// truncated model behind; path is checked with CheckTarget before and
// again just before the rename.
func WriteFile(path string, cfg model.Config, ts []*tensors.Tensor, tokenizer []byte, progress func(done, total int64)) (err error) {
	return Write(path, cfg, ts, WriteOptions{Tokenizer: tokenizer, Progress: progress})
}

// MetaChatTemplate is the metadata entry holding a model's Jinja chat
// template.
const MetaChatTemplate = "gpurun.chat_template"

// WriteOptions are what Write stores besides the configuration and the
// tensors.
type WriteOptions struct {
	Tokenizer    []byte // serialized SentencePiece model; nil for none
	ChatTemplate string // Jinja chat template (stored as MetaChatTemplate); "" for none
	Progress     func(done, total int64)
}

// Write is WriteFile with the chat template too.
func Write(path string, cfg model.Config, ts []*tensors.Tensor, wo WriteOptions) (err error) {
	tokenizer, progress := wo.Tokenizer, wo.Progress
	if err := CheckTarget(path); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	tmp, err := createTemp(dir, ".gpurun-*.tflite")
	if err != nil {
		return err
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}()
	opts := modelfile.WriteOptions{Tokenizer: tokenizer, Progress: progress}
	if wo.ChatTemplate != "" {
		opts.Extra = map[string][]byte{MetaChatTemplate: []byte(wo.ChatTemplate)}
	}
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
	task, err := createTemp(dir, ".gpurun-*.task")
	if err != nil {
		return err
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

// createTemp creates the temporary output in dir; its error names dir, not
// the temporary name the user never gave.
func createTemp(dir, pattern string) (*os.File, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("convert: cannot create a file in %s: %w", dir, err)
	}
	return f, nil
}

func rename(from, to string) error {
	if err := CheckTarget(to); err != nil {
		return err
	}
	if err := os.Chmod(from, 0o644); err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	if err := os.Rename(from, to); err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	return nil
}
