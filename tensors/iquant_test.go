package tensors

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/tensors/internal/gentables/tables"
)

// iqTypes are the I-quant, NVFP4 and ternary block types of iquant.go.
var iqTypes = []DType{IQ4_NL, IQ4_XS, IQ3_S, IQ3_XXS, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M, NVFP4, TQ1_0, TQ2_0}

// goTables are the generated tables in tables.Wanted's order, as
// tables.Table values (bit patterns in the element width).
func goTables() []tables.Table {
	u8 := func(a []uint8) (v []uint64) {
		for _, x := range a {
			v = append(v, uint64(x))
		}
		return v
	}
	i8 := func(a []int8) (v []uint64) {
		for _, x := range a {
			v = append(v, uint64(uint8(x)))
		}
		return v
	}
	u32 := func(a []uint32) (v []uint64) {
		for _, x := range a {
			v = append(v, uint64(x))
		}
		return v
	}
	vals := map[string][]uint64{
		"kmaskIQ2XS": u8(kmaskIQ2XS[:]), "ksignsIQ2XS": u8(ksignsIQ2XS[:]),
		"iq2xxsGrid": iq2xxsGrid[:], "iq2xsGrid": iq2xsGrid[:], "iq2sGrid": iq2sGrid[:],
		"iq3xxsGrid": u32(iq3xxsGrid[:]), "iq3sGrid": u32(iq3sGrid[:]),
		"kvaluesIQ4NL": i8(kvaluesIQ4NL[:]), "kvaluesFP4": i8(kvaluesFP4[:]), "iq1sGrid": iq1sGrid[:],
	}
	var ts []tables.Table
	for _, w := range tables.Wanted {
		ts = append(ts, tables.Table{Name: w.Name, CType: w.CType, GoName: w.GoName, Values: vals[w.GoName]})
	}
	return ts
}

// TestIQTablesCurrent: the generated Go tables are the ones whose
// canonical text's SHA-256 the generator recorded from llama.cpp's
// ggml-common.h (iqtables.sha256); with GGML_COMMON_H set to that header,
// they are also extracted again and compared table by table.
func TestIQTablesCurrent(t *testing.T) {
	want, err := os.ReadFile("iqtables.sha256")
	if err != nil {
		t.Fatal(err)
	}
	ts := goTables()
	sum := sha256.Sum256(tables.Canonical(ts))
	if got := hex.EncodeToString(sum[:]); got != strings.TrimSpace(string(want)) {
		t.Errorf("iqtables_gen.go hashes to %s, iqtables.sha256 records %s: regenerate with GGML_COMMON_H=... go generate ./tensors", got, want)
	}
	if h := os.Getenv("GGML_COMMON_H"); h != "" {
		src, err := os.ReadFile(h)
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := tables.Extract(src)
		if err != nil {
			t.Fatal(err)
		}
		for i := range fresh {
			if fmt.Sprint(fresh[i].Values) != fmt.Sprint(ts[i].Values) {
				t.Errorf("%s differs from %s's", ts[i].GoName, h)
			}
		}
	}
	// The shared E2M1 table is the one MXFP4 has had by hand.
	if kvaluesFP4 != mxfp4Values {
		t.Errorf("kvalues_fp4 %v, mxfp4Values %v", kvaluesFP4, mxfp4Values)
	}
}

// TestIQTablesExtractRefusesDamage: the extractor notices a table of the
// wrong length and a missing table rather than writing what it found.
func TestIQTablesExtractRefusesDamage(t *testing.T) {
	var b strings.Builder
	for _, tb := range goTables() {
		fmt.Fprintf(&b, "GGML_TABLE_BEGIN(%s, %s, %d)\n", tb.CType, tb.Name, len(tb.Values))
		for _, v := range tb.Values {
			b.WriteString(tb.GoLiteral(v) + ", ")
		}
		b.WriteString("\nGGML_TABLE_END()\n")
	}
	good := b.String()
	got, err := tables.Extract([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if string(tables.Canonical(got)) != string(tables.Canonical(goTables())) {
		t.Fatal("round trip through the header form changed the tables")
	}
	for name, bad := range map[string]string{
		"short":   strings.Replace(good, "1, 2, 4, 8, 16, 32, 64, 128, ", "1, 2, 4, 8, 16, 32, 64, ", 1),
		"missing": strings.Replace(good, "iq1s_grid", "iq1s_grid_old", 1),
		"range":   strings.Replace(good, "-127, ", "-129, ", 1),
	} {
		if _, err := tables.Extract([]byte(bad)); err == nil {
			t.Errorf("%s: Extract accepted it", name)
		}
	}
}

// TestIQuantMatchesLlamaCpp: DecodeBlocks gives llama.cpp's own
// dequantize_row_<type> values bit for bit on random blocks of every type
// (testdata/iquant.blocks and iquant.golden.json, written by
// scripts/iquant-golden.py from a llama.cpp build).
func TestIQuantMatchesLlamaCpp(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "iquant.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	blob, err := os.ReadFile(filepath.Join("testdata", "iquant.blocks"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		LlamaCpp string `json:"llama_cpp"`
		Types    map[string]struct {
			Offset, Blocks int
			F32SHA256      string    `json:"f32_sha256"`
			FirstValues    []float32 `json:"first_values"`
		}
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Types) != len(iqTypes) {
		t.Fatalf("golden has %d types, want %d", len(g.Types), len(iqTypes))
	}
	for _, dt := range iqTypes {
		gt, ok := g.Types[dt.String()]
		if !ok {
			t.Errorf("no golden for %s", dt)
			continue
		}
		end := gt.Offset + gt.Blocks*dt.BlockBytes()
		if gt.Blocks == 0 || end > len(blob) {
			t.Fatalf("%s: blocks %d at %d outside the %d-byte file", dt, gt.Blocks, gt.Offset, len(blob))
		}
		got := make([]float32, gt.Blocks*dt.BlockLen())
		if err := DecodeBlocks(dt, blob[gt.Offset:end], got); err != nil {
			t.Fatal(err)
		}
		for i, v := range gt.FirstValues {
			if math.Float32bits(got[i]) != math.Float32bits(v) {
				t.Errorf("%s: element %d = %g, llama.cpp %s gives %g", dt, i, got[i], g.LlamaCpp, v)
			}
		}
		b := make([]byte, 4*len(got))
		for i, v := range got {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		sum := sha256.Sum256(b)
		if hex.EncodeToString(sum[:]) != gt.F32SHA256 {
			t.Errorf("%s: %d blocks decode to other values than llama.cpp %s's", dt, gt.Blocks, g.LlamaCpp)
		}
	}
}

func TestIQuantTensorChecks(t *testing.T) {
	for _, dt := range iqTypes {
		if !dt.Valid() || !dt.Block() {
			t.Errorf("%s: Valid %v Block %v", dt, dt.Valid(), dt.Block())
		}
		if p, err := ParseDType(dt.String()); err != nil || p != dt {
			t.Errorf("ParseDType(%q) = %v, %v", dt.String(), p, err)
		}
		good := &Tensor{Name: "w", DType: dt, Shape: []int{3, 2 * dt.BlockLen()}, Data: make([]byte, 6*dt.BlockBytes())}
		if err := good.Check(); err != nil {
			t.Errorf("%s: %v", dt, err)
		}
		if vals, err := good.Float32(); err != nil || len(vals) != 6*dt.BlockLen() {
			t.Errorf("%s: Float32: %v", dt, err)
		}
		for _, bad := range []*Tensor{
			{Name: "w", DType: dt, Shape: []int{2, dt.BlockLen() / 2}, Data: make([]byte, dt.BlockBytes())},
			{Name: "w", DType: dt, Shape: []int{1, dt.BlockLen()}, Data: make([]byte, dt.BlockBytes()-1)},
		} {
			if err := bad.Check(); err == nil {
				t.Errorf("%s %v with %d bytes passes Check", dt, bad.Shape, len(bad.Data))
			}
		}
		if err := DecodeBlocks(dt, make([]byte, dt.BlockBytes()), make([]float32, dt.BlockLen()+1)); err == nil {
			t.Errorf("%s: DecodeBlocks of a partial block succeeds", dt)
		}
	}
}

// FuzzDecodeIQuant: any bytes of any I-quant type decode without
// panicking (every grid index a block can hold is in its grid), and
// partial blocks are an error.
func FuzzDecodeIQuant(f *testing.F) {
	rng := rand.New(rand.NewPCG(7, 8))
	for i, dt := range iqTypes {
		b := make([]byte, dt.BlockBytes())
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		f.Add(uint8(i), b)
		f.Add(uint8(i), b[:len(b)-1])
	}
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		dt := iqTypes[int(kind)%len(iqTypes)]
		dst := make([]float32, len(data)/dt.BlockBytes()*dt.BlockLen())
		if err := DecodeBlocks(dt, data, dst); (err == nil) != (len(data)%dt.BlockBytes() == 0) {
			t.Fatalf("%d bytes of %s: err = %v", len(data), dt, err)
		}
	})
}

// TestIQuantAllOnes: every index field at its largest value stays inside
// the grids (the fuzz target's worst case, run always).
func TestIQuantAllOnes(t *testing.T) {
	for _, dt := range iqTypes {
		b := make([]byte, dt.BlockBytes())
		for i := range b {
			b[i] = 0xff
		}
		if err := DecodeBlocks(dt, b, make([]float32, dt.BlockLen())); err != nil {
			t.Errorf("%s: %v", dt, err)
		}
	}
}
