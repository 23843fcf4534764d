package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// mustFailCleanly parses data (as a file and as a checkpoint) and reports a
// panic as a failure; it returns the error of the first step that failed.
func parseAll(data []byte) error {
	f, err := Parse(data)
	if err != nil {
		return err
	}
	for _, kv := range f.KV {
		if kv.Value.Type == TypeArray {
			kv.Value.Elements()
			kv.Value.Strings()
			kv.Value.Int32s()
			kv.Value.Float32s()
		}
		_ = kv.Value.String()
	}
	// Every tensor on its own, so that block data is exercised even when
	// the file is no complete model.
	for i := range f.Tensors {
		if t, err := f.toTensor(&f.Tensors[i], f.Tensors[i].Name); err == nil {
			t.Float32()
		}
	}
	_, err = f.Checkpoint()
	return err
}

// parseStreamed imports data through ParseHead from head and fills every
// tensor of the checkpoint.
func parseStreamed(head, data []byte) error {
	f, err := ParseHead(head, int64(len(data)), func(off, n int64) ([]byte, error) {
		return data[off : off+n], nil
	})
	if err != nil {
		return err
	}
	ck, err := f.Checkpoint()
	if err != nil {
		return err
	}
	for _, t := range ck.Tensors {
		if err := t.Fill(); err != nil {
			return err
		}
	}
	return nil
}

// blockTensors writes one two-row tensor of every imported block type.
func blockTensors() []byte {
	w := &ggufWriter{}
	w.string("general.architecture", "llama")
	for i, typ := range []GGMLType{GGMLQ4_1, GGMLQ5_0, GGMLQ5_1, GGMLQ4_K, GGMLQ5_K, GGMLQ6_K, GGMLQ2_K, GGMLQ3_K, GGMLMXFP4} {
		ti := ggmlTypes[typ]
		data := make([]byte, 2*ti.blockBytes)
		for j := range data {
			data[j] = byte(j*7 + i)
		}
		w.tensor(ti.name, typ, []uint64{uint64(ti.blockLen), 2}, data)
	}
	return w.bytes()
}

func TestTruncationsFail(t *testing.T) {
	good := tinyLlama()
	if err := parseAll(good); err != nil {
		t.Fatalf("tiny llama does not load: %v", err)
	}
	for n := range len(good) {
		if err := parseAll(good[:n]); !errors.Is(err, ErrFormat) {
			t.Fatalf("truncated to %d of %d bytes: err = %v, want ErrFormat", n, len(good), err)
		}
	}
}

// TestBitFlips flips every bit of the header region of the tiny file: the
// parser must never panic, and a flip that breaks the structure must give
// ErrFormat or ErrUnsupported.
func TestBitFlips(t *testing.T) {
	good := tinyLlama()
	f, err := Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	for i := range int(f.DataOffset) {
		for bit := range 8 {
			b := append([]byte(nil), good...)
			b[i] ^= 1 << bit
			err := parseAll(b)
			if err != nil && !errors.Is(err, ErrFormat) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("flip byte %d bit %d: unwrapped error %v", i, bit, err)
			}
		}
	}
}

func TestBadHeaders(t *testing.T) {
	good := tinyLlama()
	patch := func(off int, v uint64, size int) []byte {
		b := append([]byte(nil), good...)
		if size == 4 {
			binary.LittleEndian.PutUint32(b[off:], uint32(v))
		} else {
			binary.LittleEndian.PutUint64(b[off:], v)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"bad magic", append([]byte("GGUG"), good[4:]...), ErrFormat},
		{"version 1", patch(4, 1, 4), ErrUnsupported},
		{"version 4", patch(4, 4, 4), ErrUnsupported},
		{"huge tensor count", patch(8, 1<<62, 8), ErrFormat},
		{"huge kv count", patch(16, 1<<62, 8), ErrFormat},
		{"huge key length", patch(24, 1<<40, 8), ErrFormat},
		{"empty", nil, ErrFormat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := parseAll(tc.data); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestVersion2 parses the tiny file stamped as GGUF v2, whose layout is the
// same as v3 (64-bit counts; v3 only added big-endian files).
func TestVersion2(t *testing.T) {
	b := tinyLlama()
	binary.LittleEndian.PutUint32(b[4:], 2)
	f, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 2 || len(f.Tensors) != 11 {
		t.Errorf("version %d with %d tensors", f.Version, len(f.Tensors))
	}
	if _, err := f.Checkpoint(); err != nil {
		t.Error(err)
	}
}

func TestNestedArrays(t *testing.T) {
	w := &ggufWriter{}
	// key "n": array of 2 arrays of uint16 {[1 2] [3]}.
	w.str(&w.kv, "n")
	binary.Write(&w.kv, binary.LittleEndian, [2]uint32{uint32(TypeArray), uint32(TypeArray)})
	binary.Write(&w.kv, binary.LittleEndian, uint64(2))
	for _, inner := range [][]uint16{{1, 2}, {3}} {
		binary.Write(&w.kv, binary.LittleEndian, uint32(TypeUint16))
		binary.Write(&w.kv, binary.LittleEndian, uint64(len(inner)))
		binary.Write(&w.kv, binary.LittleEndian, inner)
	}
	w.nkv++
	w.u32("after", 7)
	f, err := Parse(w.bytes())
	if err != nil {
		t.Fatal(err)
	}
	v, _ := f.Get("n")
	outer, err := v.Elements()
	if err != nil || len(outer) != 2 {
		t.Fatalf("outer = %v, %v", outer, err)
	}
	var got [][]int32
	for _, e := range outer {
		ints, err := e.Int32s()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ints)
	}
	if len(got[0]) != 2 || got[0][0] != 1 || got[0][1] != 2 || len(got[1]) != 1 || got[1][0] != 3 {
		t.Errorf("nested = %v, want [[1 2] [3]]", got)
	}
	if a, _ := f.Get("after"); a.String() != "7" {
		t.Errorf("key after the nested array = %v", a)
	}
}

func FuzzGGUF(f *testing.F) {
	good := tinyLlama()
	f.Add(good)
	f.Add(blockTensors())
	f.Add(good[:len(good)/2])
	f.Add(good[:40])
	f.Add(tinyModern("phi3"))
	f.Add(tinyModern("qwen3"))
	if b, err := os.ReadFile(filepath.Join(archDir(f), "falcon.gguf")); err == nil {
		f.Add(b[:4096])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := parseAll(data)
		if err != nil && !errors.Is(err, ErrFormat) && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("error wraps neither ErrFormat nor ErrUnsupported: %v", err)
		}
		// The same file streamed (ParseHead, every tensor filled), from the
		// whole of it and from its first half as the head.
		for _, head := range [][]byte{data, data[:len(data)/2]} {
			err := parseStreamed(head, data)
			if err != nil && !errors.Is(err, ErrFormat) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("streamed from a %d-byte head: error wraps neither ErrFormat nor ErrUnsupported: %v", len(head), err)
			}
		}
	})
}

// TestWriteSeedCorpus regenerates testdata/fuzz/FuzzGGUF when
// GPURUN_WRITE_CORPUS=1; the committed files are its output.
func TestWriteSeedCorpus(t *testing.T) {
	if os.Getenv("GPURUN_WRITE_CORPUS") != "1" {
		t.Skip("set GPURUN_WRITE_CORPUS=1 to regenerate the seed corpus")
	}
	good := tinyLlama()
	writeCorpus(t, "FuzzGGUF", map[string][]byte{
		"tiny_llama":           good,
		"tiny_llama_truncated": good[:len(good)*2/3],
		"header_only":          good[:24],
		"block_tensors":        blockTensors(),
		"tiny_phi3":            tinyModern("phi3"),
		"tiny_qwen3":           tinyModern("qwen3"),
		"tiny_qwen3moe":        tinyModern("qwen3moe"),
	})
}

func writeCorpus(t *testing.T, target string, seeds map[string][]byte) {
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range seeds {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
