package modelfile

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/gpurun/gpurun/tensors/model"
)

// Entry names of a .task bundle.
const (
	TaskModel     = "TF_LITE_PREFILL_DECODE"
	TaskTokenizer = "TOKENIZER_MODEL"
	TaskMetadata  = "METADATA"
	// TaskTokenizerJSON is gpurun's entry for a Hugging Face tokenizer.json
	// (byte-level BPE), written instead of TOKENIZER_MODEL, which MediaPipe
	// reads as a SentencePiece model.
	TaskTokenizerJSON = "TOKENIZER_JSON"
)

// taskAlign aligns every entry's data in the zip so the model can be mapped
// in place; 64 also satisfies the 4 bytes the format asks for.
const taskAlign = 64

// paddingExtraID tags the zip extra field that pads entry data to alignment
// (an id from the range the zip spec leaves to private use).
const paddingExtraID = 0xa1a1

func isZip(data []byte) bool { return len(data) >= 4 && string(data[:4]) == "PK\x03\x04" }

// WriteTask writes a .task bundle: a zip whose entries are stored
// uncompressed with their data 64-byte aligned. modelFile (size bytes, read
// twice: once for the CRC, once to copy) becomes TF_LITE_PREFILL_DECODE;
// tokenizer (if not nil) TOKENIZER_MODEL, or TOKENIZER_JSON when it is a
// tokenizer.json (IsTokenizerJSON), and metadata (if not nil) METADATA. ConfigJSON builds gpurun's metadata.
func WriteTask(w io.Writer, modelFile io.ReaderAt, size int64, tokenizer, metadata []byte) error {
	if size < 0 {
		return fmt.Errorf("%w: model size %d", ErrInvalid, size)
	}
	tokEntry := TaskTokenizer
	if IsTokenizerJSON(tokenizer) {
		tokEntry = TaskTokenizerJSON
	}
	crc := crc32.NewIEEE()
	if _, err := io.Copy(crc, io.NewSectionReader(modelFile, 0, size)); err != nil {
		return fmt.Errorf("modelfile: task: read model: %w", err)
	}
	zw := zip.NewWriter(w)
	tw := &taskWriter{zw: zw}
	if err := tw.add(TaskModel, io.NewSectionReader(modelFile, 0, size), size, crc.Sum32()); err != nil {
		return err
	}
	for _, e := range []struct {
		name string
		data []byte
	}{{tokEntry, tokenizer}, {TaskMetadata, metadata}} {
		if e.data == nil {
			continue
		}
		if err := tw.add(e.name, bytes.NewReader(e.data), int64(len(e.data)), crc32.ChecksumIEEE(e.data)); err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("modelfile: task: %w", err)
	}
	return nil
}

// taskWriter tracks the archive offset itself: entries are written raw with
// sizes and CRC in the local header (no data descriptor), so each local
// header is exactly 30 + len(name) + len(extra) bytes.
type taskWriter struct {
	zw  *zip.Writer
	off int64
}

func (tw *taskWriter) add(name string, r io.Reader, size int64, crc uint32) error {
	const localHeaderLen = 30
	start := tw.off + localHeaderLen + int64(len(name)) + 4 // 4: extra field header
	pad := (taskAlign - start%taskAlign) % taskAlign
	extra := binary.LittleEndian.AppendUint16(nil, paddingExtraID)
	extra = binary.LittleEndian.AppendUint16(extra, uint16(pad))
	extra = append(extra, make([]byte, pad)...)
	fw, err := tw.zw.CreateRaw(&zip.FileHeader{
		Name:               name,
		Method:             zip.Store,
		CRC32:              crc,
		CompressedSize64:   uint64(size),
		UncompressedSize64: uint64(size),
		Extra:              extra,
	})
	if err != nil {
		return fmt.Errorf("modelfile: task %s: %w", name, err)
	}
	n, err := io.Copy(fw, r)
	if err != nil {
		return fmt.Errorf("modelfile: task %s: %w", name, err)
	}
	if n != size {
		return fmt.Errorf("%w: task %s: copied %d of %d bytes", ErrTruncated, name, n, size)
	}
	tw.off = start + pad + size
	return nil
}

// parseTask finds the bundle's entries in the zip directory and parses the
// model entry in place.
func parseTask(data []byte) (*File, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return nil, fmt.Errorf("%w: task: %w", ErrFormat, err)
	}
	entries := map[string][]byte{}
	for _, zf := range zr.File {
		switch zf.Name {
		case TaskModel, TaskTokenizer, TaskMetadata:
		default:
			continue
		}
		if _, dup := entries[zf.Name]; dup {
			return nil, fmt.Errorf("%w: task: duplicate entry %s", ErrFormat, zf.Name)
		}
		b, err := storedEntry(data, zf)
		if err != nil {
			return nil, err
		}
		entries[zf.Name] = b
	}
	modelBytes, ok := entries[TaskModel]
	if !ok {
		return nil, fmt.Errorf("%w: task: no %s entry", ErrFormat, TaskModel)
	}
	f, err := parseModel(modelBytes)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", TaskModel, err)
	}
	f.format, f.size = FormatTask, int64(len(data))
	if tok, ok := entries[TaskTokenizer]; ok {
		f.tokenizer = tok
	} else if tok, ok := entries[TaskTokenizerJSON]; ok {
		f.tokenizer = tok
	}
	f.taskMeta = entries[TaskMetadata]
	if !f.hasConfig && f.taskMeta != nil {
		if err := f.setConfig(f.taskMeta); err != nil {
			return nil, fmt.Errorf("task %s: %w", TaskMetadata, err)
		}
	}
	return f, nil
}

// storedEntry returns the bytes of an uncompressed zip entry, aliasing data.
func storedEntry(data []byte, zf *zip.File) ([]byte, error) {
	if zf.Method != zip.Store {
		return nil, fmt.Errorf("%w: task entry %s is compressed (method %d); it must be stored to be mapped", ErrUnsupported, zf.Name, zf.Method)
	}
	if zf.CompressedSize64 != zf.UncompressedSize64 {
		return nil, fmt.Errorf("%w: task entry %s: stored sizes differ", ErrFormat, zf.Name)
	}
	off, err := zf.DataOffset()
	if err != nil {
		return nil, fmt.Errorf("%w: task entry %s: %w", ErrFormat, zf.Name, err)
	}
	size := zf.UncompressedSize64
	if off < 0 || uint64(off) > uint64(len(data)) || size > uint64(len(data))-uint64(off) {
		return nil, fmt.Errorf("%w: task entry %s: %d bytes at %d past the end (%d)", ErrTruncated, zf.Name, size, off, len(data))
	}
	end := uint64(off) + size
	return data[off:end:end], nil
}

// ConfigJSON is the METADATA document gpurun writes into a .task bundle: the
// configuration as JSON, the same document as the gpurun.config entry.
func ConfigJSON(cfg model.Config) ([]byte, error) {
	js, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: config: %w", ErrInvalid, err)
	}
	return js, nil
}
