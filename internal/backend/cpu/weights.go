package cpu

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu/internal/simd"
	"github.com/gpurun/gpurun/tensors"
)

// weights maps tensor names to typed views of their stored bytes. Nothing is
// dequantized: matmul reads the stored type directly.
type weights struct {
	byName map[string]*matrix
}

func (w *weights) Release() { w.byName = nil }

// matrix is a tensor viewed as [rows, cols] in its stored type. Exactly one
// of the typed slices is set. Quantized tensors carry one scale per block of
// `block` consecutive elements of a row (block == cols for per-channel).
type matrix struct {
	name       string
	dtype      tensors.DType
	shape      []int
	rows, cols int

	f32 []float32 // F32
	u16 []uint16  // F16, BF16 bit patterns
	i8  []int8    // I8
	u8  []byte    // I4, two values per byte, element 0 in the low nibble
	blk []byte    // block types (Q4_1 ... Q3K, Q8_0, MXFP4): rows of whole blocks
	// kq is the K-quant kernel type of K-quant blocks and q32 the kernel
	// type of Q4_1, Q5_0, Q5_1, Q8_0 and MXFP4 blocks, -1 for any other type.
	kq  simd.KQuant
	q32 simd.Q32

	// Block scales of I8 and I4: rows * (cols/block) values, in their
	// stored type so they alias the model bytes like the weights (a
	// converted f32 copy would add a sixteenth of an int4 model's size).
	// Exactly one is set for quantized tensors.
	scalesF16 []uint16
	scalesF32 []float32
	block     int
	// units are cols/32 binary16 ones: the block scales the decode rows
	// kernels apply to weights with one f32 scale per row (set for those).
	units []uint16
	// gemm is the matrix repacked for the prefill GEMM (simd.PackQ8 or
	// PackQ4, kind gk): int8 and int4 weights with one binary16 scale per
	// 32 values, on CPUs with a GEMM kernel; nil otherwise.
	gemm []byte
	gk   simd.GemmKind
	// kgemm is a 2-D K-quant matrix (Q2_K ... Q6_K; kind kq) repacked for
	// the K-quant GEMM (simd.PackK) in dynamic math, on CPUs with its
	// kernel; nil otherwise. Prefill and decode read it; blk (the mapped
	// GGUF rows: the packed size for Q4_K and Q5_K, 1-5% smaller for the
	// others) stays for row gathers and fallbacks.
	kgemm []byte
	// colsT is a narrow binary16 matrix (narrowCols or fewer columns, a
	// LoRA B matrix [out, rank]) transposed, [cols][rows], in dynamic
	// math: a decode product is then a weighted sum of its columns
	// (simd.WeightedSumF16), streaming long rows instead of one short
	// dot per output. nil otherwise.
	colsT []uint16
}

// narrowCols is the most columns of a matrix kept transposed (colsT);
// such a matrix has at least four times as many rows.
const narrowCols = 64

// LoadWeights checks every tensor and builds views of its bytes. The tensor
// data is aliased, not copied (except f32/f16 data that is not aligned for
// a typed view, which is copied once in its own type).
func (b *backend) LoadWeights(ctx context.Context, ws []*tensors.Tensor) (gpu.Weights, error) {
	out := &weights{byName: make(map[string]*matrix, len(ws))}
	for _, t := range ws {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("cpu: loading weights: %w", err)
		}
		if t == nil {
			return nil, fmt.Errorf("cpu: nil tensor in weights")
		}
		if _, dup := out.byName[t.Name]; dup {
			return nil, fmt.Errorf("cpu: duplicate tensor %q", t.Name)
		}
		// A streamed tensor is read now and kept: the CPU computes on it.
		if err := t.Fill(); err != nil {
			return nil, fmt.Errorf("cpu: %w", err)
		}
		// Stacked experts (3-D: fusion.MoEOp) run one row at a time,
		// never through the prefill GEMM: no packed second copy of them.
		m, err := newMatrix(t, b.math == MathDynamic && len(t.Shape) < 3)
		if err != nil {
			return nil, fmt.Errorf("cpu: tensor %q: %w", t.Name, err)
		}
		out.byName[t.Name] = m
	}
	return out, nil
}

// newMatrix views t; with gemm, weights the prefill GEMM takes (dynamic
// math only) are also repacked for it.
func newMatrix(t *tensors.Tensor, gemm bool) (*matrix, error) {
	if err := t.Check(); err != nil {
		return nil, err
	}
	m := &matrix{name: t.Name, dtype: t.DType, shape: t.Shape, rows: t.Rows(), cols: t.Cols(), kq: -1, q32: -1}
	if k, ok := kquants[t.DType]; ok {
		m.kq = k
	}
	if k, ok := q32s[t.DType]; ok {
		m.q32 = k
	}
	switch t.DType {
	case tensors.F32:
		m.f32 = viewF32(t.Data)
	case tensors.F16, tensors.BF16:
		m.u16 = viewU16(t.Data)
		if gemm && t.DType == tensors.F16 && len(t.Shape) == 2 && m.cols <= narrowCols && m.rows >= 4*m.cols {
			m.colsT = make([]uint16, len(m.u16))
			for r := range m.rows {
				for c := range m.cols {
					m.colsT[c*m.rows+r] = m.u16[r*m.cols+c]
				}
			}
		}
	case tensors.I8:
		m.i8 = unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(t.Data))), len(t.Data))
	case tensors.I4:
		m.u8 = t.Data
	default:
		if t.DType.Block() {
			m.blk = t.Data
			if gemm {
				if err := m.packK(); err != nil {
					return nil, err
				}
			}
			break
		}
		return nil, fmt.Errorf("%w: dtype %s cannot be a weight", tensors.ErrShape, t.DType)
	}
	if t.Scales != nil {
		m.block = t.BlockSize()
		if t.Scales.DType == tensors.F16 {
			m.scalesF16 = viewU16(t.Scales.Data)
		} else {
			m.scalesF32 = viewF32(t.Scales.Data)
		}
		if m.block == m.cols && m.scalesF16 == nil && m.cols%simd.QBlock == 0 {
			m.units = make([]uint16, m.cols/simd.QBlock)
			for i := range m.units {
				m.units[i] = unitScale[0]
			}
		}
		if gemm {
			if err := m.pack(); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// pack repacks int8 and int4 weights with one binary16 scale per 32 values
// or one scale per row for the prefill GEMM when the CPU has its kernel (a
// second copy of the weights, streamed in order by the kernel). A row's
// binary16 scale becomes each of its blocks' scale; a row's f32 scale
// (random int8 models' per-channel weights) stays apart, the blocks packed
// with scale 1 and the row scaled after the GEMM (rowScaled), as the row
// kernels do with units.
func (m *matrix) pack() error {
	ws, ok := m.packScales()
	if !ok {
		return nil
	}
	var err error
	switch {
	case m.dtype == tensors.I8 && simd.HasGemm(simd.GemmQ8):
		m.gk = simd.GemmQ8
		m.gemm = make([]byte, m.gk.PackedBytes(m.rows, m.cols))
		err = simd.PackQ8(m.gemm, m.i8, ws, m.rows, m.cols)
	case m.dtype == tensors.I4 && simd.HasGemm(simd.GemmQ4):
		m.gk = simd.GemmQ4
		m.gemm = make([]byte, m.gk.PackedBytes(m.rows, m.cols))
		err = simd.PackQ4(m.gemm, m.u8, ws, m.rows, m.cols)
	}
	if err != nil {
		return fmt.Errorf("packing for the GEMM: %w", err)
	}
	return nil
}

// packScales returns the binary16 scale of every 32-value block for pack:
// the stored ones, or each row's scale repeated (1 for an f32 row scale);
// false for weights the GEMM does not take.
func (m *matrix) packScales() ([]uint16, bool) {
	if m.cols%simd.QBlock != 0 {
		return nil, false
	}
	switch {
	case m.scalesF16 != nil && m.block == simd.QBlock:
		return m.scalesF16, true
	case m.block == m.cols && (m.scalesF16 != nil || m.units != nil):
		nb := m.cols / simd.QBlock
		ws := make([]uint16, m.rows*nb)
		for r := range m.rows {
			sc := unitScale[0]
			if m.scalesF16 != nil {
				sc = m.scalesF16[r]
			}
			for b := range nb {
				ws[r*nb+b] = sc
			}
		}
		return ws, true
	}
	return nil, false
}

// rowScaled scales out[i] by the f32 scale of row r0+i when w's GEMM copy
// was packed with unit block scales (pack); otherwise it does nothing.
func (m *matrix) rowScaled(out []float32, r0 int) {
	if m.gemm == nil || m.units == nil {
		return
	}
	for i, sc := range m.scalesF32[r0 : r0+len(out)] {
		out[i] *= sc
	}
}

// packK repacks the rows of a K-quant matrix for the K-quant prefill GEMM
// when the CPU has its kernel (matrices only: a stack of experts is not
// multiplied as one).
func (m *matrix) packK() error {
	if m.kq < 0 || len(m.shape) != 2 || m.cols%simd.QK != 0 || !simd.HasGemmK(m.kq) {
		return nil
	}
	m.kgemm = make([]byte, m.kq.GemmPackedBytes(m.rows, m.cols))
	if err := simd.PackK(m.kq, m.kgemm, m.blk, m.rows, m.cols); err != nil {
		return fmt.Errorf("packing for the GEMM: %w", err)
	}
	// Prefill and decode read the packed copy from now on: let the
	// stored rows leave memory (only embedding lookups and fallback paths
	// read them again), so the weights are not resident twice.
	pageOut(m.blk)
	return nil
}

// kquants maps the K-quant block types to their dynamic kernels.
var kquants = map[tensors.DType]simd.KQuant{
	tensors.Q4K: simd.Q4K, tensors.Q5K: simd.Q5K, tensors.Q6K: simd.Q6K, tensors.Q2K: simd.Q2K, tensors.Q3K: simd.Q3K,
	tensors.IQ4_XS: simd.IQ4XS, tensors.IQ3_S: simd.IQ3S, tensors.IQ3_XXS: simd.IQ3XXS, tensors.IQ2_XXS: simd.IQ2XXS,
}

// q32s maps the 32-value block types to their dynamic kernels.
var q32s = map[tensors.DType]simd.Q32{tensors.Q4_1: simd.Q4_1, tensors.Q5_0: simd.Q5_0, tensors.Q5_1: simd.Q5_1, tensors.Q8_0: simd.Q8_0, tensors.MXFP4: simd.MXFP4,
	tensors.IQ4_NL: simd.IQ4_NL}

// littleEndian is true on hosts whose memory order matches the stored order,
// which lets typed views alias the bytes.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

func viewF32(b []byte) []float32 {
	n := len(b) / 4
	if n == 0 {
		return nil
	}
	if littleEndian && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), n)
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func viewU16(b []byte) []uint16 {
	n := len(b) / 2
	if n == 0 {
		return nil
	}
	if littleEndian && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%2 == 0 {
		return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b))), n)
	}
	out := make([]uint16, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return out
}

// rowScales returns the block scales of row r as f32: a view of stored f32
// scales, or stored f16 scales converted into dst (len cols/block). The
// conversion is one table lookup per block, once per row for all tokens.
func (m *matrix) rowScales(r int, dst []float32) []float32 {
	nb := m.cols / m.block
	if m.scalesF32 != nil {
		return m.scalesF32[r*nb : (r+1)*nb]
	}
	dst = dst[:nb]
	for i, h := range m.scalesF16[r*nb : (r+1)*nb] {
		dst[i] = simd.F16ToF32[h]
	}
	return dst
}

// scale returns block scale i (counted over the whole matrix).
func (m *matrix) scale(i int) float32 {
	if m.scalesF32 != nil {
		return m.scalesF32[i]
	}
	return simd.F16ToF32[m.scalesF16[i]]
}

// vector returns all values of a small tensor (norm scales, biases) as f32.
func (m *matrix) vector() []float32 {
	out := make([]float32, m.rows*m.cols)
	for r := range m.rows {
		m.row(r, out[r*m.cols:(r+1)*m.cols])
	}
	return out
}

// row dequantizes row r into dst (len cols).
func (m *matrix) row(r int, dst []float32) {
	base := r * m.cols
	switch m.dtype {
	case tensors.F32:
		copy(dst, m.f32[base:base+m.cols])
	case tensors.F16:
		for i, h := range m.u16[base : base+m.cols] {
			dst[i] = simd.F16ToF32[h]
		}
	case tensors.BF16:
		for i, h := range m.u16[base : base+m.cols] {
			dst[i] = math.Float32frombits(uint32(h) << 16)
		}
	case tensors.I8:
		q := m.i8[base : base+m.cols]
		for bl := 0; bl < m.cols; bl += m.block {
			s := m.scale((base + bl) / m.block)
			d := dst[bl : bl+m.block]
			for i, v := range q[bl : bl+m.block] {
				d[i] = float32(v) * s
			}
		}
	default: // block types: Check made rows whole blocks
		rb := m.dtype.ByteSize(m.cols)
		tensors.DecodeBlocks(m.dtype, m.blk[r*rb:(r+1)*rb], dst)
	case tensors.I4:
		q := m.u8[base/2 : (base+m.cols)/2]
		for bl := 0; bl < m.cols; bl += m.block {
			s := m.scale((base + bl) / m.block)
			d := dst[bl : bl+m.block]
			for i, b := range q[bl/2 : (bl+m.block)/2] {
				p := &simd.I4Pairs[b]
				d[2*i] = p[0] * s
				d[2*i+1] = p[1] * s
			}
		}
	}
}
