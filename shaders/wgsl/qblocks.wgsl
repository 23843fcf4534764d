// Kernels for weights of llama.cpp's block types (tensors.Q4_1 ... Q3K, the I-quants, NVFP4, TQ1_0, TQ2_0),
// kept bit for bit as GGUF stores them (layouts: tensors/blocks.go).
//
// The family is compiled once per sub-block layout (shaders.QBlockVariant:
// module constants QL, one of QL_B32, QL_K45, QL_K6, QL_K23, QL_S32,
// QL_GRID, and QSUB, the elements per sub-block), so a module decodes one
// layout's sub-blocks and the compilers fold the others away; p.qt picks
// among the layout's few types (a uniform branch). The types of a layout
// differ in small parts only: a software driver runs every path of a
// kernel (llvmpipe masks both sides of a branch, uniform or not), and with
// the grid I-quants, IQ4_XS and the ternary types in Q4_K's module a 110M
// Q4_K_M decode step took 7.6 s on lavapipe instead of 1.0 s; so a type
// with much code of its own gets a layout of its own (shaders/README.md).
// qembed's qvalue, too, holds only its module's layout. A sub-block's
// constants (scale, min, Q5's high-bit word) are read once (qsub), its
// quants four at a time from one or two u32 loads, unpacked in registers
// (qquant4); each weight is a * q + c with the same f32 values as
// tensors.DecodeBlocks computes (a product and a sum, which a compiler may
// fuse).
//
// The weights of one row block [row_base, row_base+rows) of the matrix are
// bound as u32 words: row r (relative to the block) starts at byte
// r * (in_cols / block length) * block bytes, blocks in order.
//
// qmatvec (decode): workgroups of QV_WG (32) invocations in groups of
//   p.lanes per QV_ROWS weight rows; lane l of a group takes sub-blocks l,
//   l + lanes, ... (neighbouring lanes read neighbouring bytes), then a
//   workgroup-memory tree reduction. Dispatch (nrows, ceil(rows /
//   (QV_WG / lanes * QV_ROWS)), 1): the step's rows are the fastest dimension, as
//   matmul.wgsl's matvec_lanes. qmatvec_sg (Vulkan, devices with subgroup
//   operations, wgsl/ext/qsubgroups.wgsl) reduces through subgroup
//   shuffles instead.
// qmatmul (prefill): 32x32 tiles of tokens x rows, per step of 32 columns
//   each invocation dequantizes 16 weights of one row (its sub-block's
//   constants read once) into workgroup memory, dispatch (ceil(rows/32),
//   ceil(nrows/32), 1).
//   Both: out[t][row_base + r] = W[r]·x[t] (+ bias), added to out when accum.
// qembed: out[t] = scale * W[tokens[t]] for the tokens in the row block,
//   element by element (qweight: bitwise the CPU reference's values),
//   dispatch (ceil(in_cols/64), T, 1).

// The block type codes QT_* (and each type's QT_*_ELEMS, QT_*_BYTES) are
// generated from shaders/codes.go's table, which the host uses too.

struct QParams {
    in_cols: u32,  // elements per row of W (qembed: columns of out)
    out_cols: u32,
    row_base: u32,
    rows: u32,
    qt: u32,
    has_bias: u32,
    nrows: u32,    // rows of x and out (Tokens, or 1 after LastRow)
    accum: u32,
    scale: f32,    // qembed
    out_f16: u32,  // 1: out is an f16 activation (packed halves)
    x_f16: u32,    // 1: x is an f16 activation (packed halves)
    lanes: u32,    // qmatvec: invocations per row group, a power of two <= QV_WG
    pad3: u32,
    pad4: u32,
    pad5: u32,
    pad6: u32,
}

@group(0) @binding(0) var<uniform> p: QParams;
@group(0) @binding(1) var<storage, read> step: array<u32>; // [pos, T, tokens...]
@group(0) @binding(2) var<storage, read> x_w: array<u32>;
@group(0) @binding(3) var<storage, read> w: array<u32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> out_w: array<atomic<u32>>;
// The grid I-quants' lookup tables (shaders.IQGridTables, IQG_* offsets),
// llama.cpp's data as tensors.IQGrids lays it out; a placeholder for the
// other types.
@group(0) @binding(6) var<storage, read> grid: array<u32>;

// activations: x, out

// include: qblock_size

// qbyte is byte b of the bound weights.
fn qbyte(b: u32) -> u32 {
    return (w[b >> 2u] >> ((b & 3u) * 8u)) & 0xffu;
}

// qhalf is the f16 at byte b (always even in these layouts).
fn qhalf(b: u32) -> f32 {
    return unpack2x16float(w[b >> 2u] >> ((b & 2u) * 8u)).x;
}

// qword4 is the four bytes at byte b as a little-endian u32 (b need not be
// a multiple of 4).
fn qword4(b: u32) -> u32 {
    let sh = (b & 3u) * 8u;
    if sh == 0u {
        return w[b >> 2u];
    }
    return (w[b >> 2u] >> sh) | (w[(b >> 2u) + 1u] << (32u - sh));
}

// qnibble32 is element i (< 32) of a 16-byte nibble array at byte q: low
// nibbles are elements 0..15, high nibbles 16..31.
fn qnibble32(q: u32, i: u32) -> u32 {
    return (qbyte(q + (i & 15u)) >> ((i >> 4u) * 4u)) & 15u;
}

// qe8m0_half is half the scale of the E8M0 byte e, 2^(e-128), with the
// CPU's bits (tensors.MXFP4Half): exponent field e-1, or the subnormals
// 2^-128 and 2^-127 for e < 2.
fn qe8m0_half(e: u32) -> f32 {
    return bitcast<f32>(select((e - 1u) << 23u, 0x00200000u << e, e < 2u));
}

// qfp4 is the doubled E2M1 value of the codes c (< 16): sign bit 3,
// exponent bits 1..2, mantissa bit 0 (llama.cpp's kvalues_mxfp4: 0, 1, 2,
// 3, 4, 6, 8, 12, then the same negated; code 8 is 0).
fn qfp4(c: vec4<u32>) -> vec4<i32> {
    let m = c & vec4<u32>(1u);
    let e = (c >> vec4<u32>(1u)) & vec4<u32>(3u);
    let v = vec4<i32>(select(((vec4<u32>(2u) + m) << e) >> vec4<u32>(1u), m, e == vec4<u32>(0u)));
    return select(v, -v, (c & vec4<u32>(8u)) != vec4<u32>(0u));
}

// qiq4nl is the non-linear IQ4_NL values of the codes n (< 16):
// llama.cpp's kvalues_iq4nl, held as bytes in the words IQ4NL_W0..3.
fn qiq4nl(n: vec4<u32>) -> vec4<i32> {
    let k = n >> vec4<u32>(2u);
    let wd = select(select(vec4<u32>(IQ4NL_W0), vec4<u32>(IQ4NL_W1), k == vec4<u32>(1u)),
                    select(vec4<u32>(IQ4NL_W2), vec4<u32>(IQ4NL_W3), k == vec4<u32>(3u)), k >= vec4<u32>(2u));
    return bitcast<vec4<i32>>(wd << ((vec4<u32>(3u) - (n & vec4<u32>(3u))) * vec4<u32>(8u))) >> vec4<u32>(24u);
}

// qiq4xs_scale is d*(ls-32) for sub-block j of the IQ4_XS block at byte b:
// ls's low four bits are nibble j%2 of scales_l[j/2], its top two bits
// 2j..2j+1 of scales_h.
fn qiq4xs_scale(b: u32, j: u32) -> f32 {
    let sh = qbyte(b + 2u) | (qbyte(b + 3u) << 8u);
    let ls = ((qbyte(b + 4u + (j >> 1u)) >> (4u * (j & 1u))) & 15u) | (((sh >> (2u * j)) & 3u) << 4u);
    return qhalf(b) * f32(i32(ls) - 32);
}

// qtq1_at is where elements e .. e+3 (e a multiple of 4) of a TQ1_0 block
// live: x the byte offset of the four bytes in the block, y the base-3
// digit (0..4) they hold.
fn qtq1_at(e: u32) -> vec2<u32> {
    if e < 160u {
        return vec2<u32>(e & 31u, e >> 5u);
    }
    if e < 240u {
        return vec2<u32>(32u + ((e - 160u) & 15u), (e - 160u) >> 4u);
    }
    return vec2<u32>(48u, (e - 240u) >> 2u);
}

// qtq1_digits is digit n of the bytes q (TQ1_0's fixed-point base-3
// fractions), less one: ((q*3^n mod 256)*3 >> 8) - 1.
fn qtq1_digits(q: vec4<u32>, n: u32) -> vec4<i32> {
    let p = select(select(select(select(81u, 27u, n == 3u), 9u, n == 2u), 3u, n == 1u), 1u, n == 0u);
    return vec4<i32>((((q * vec4<u32>(p)) & vec4<u32>(255u)) * vec4<u32>(3u)) >> vec4<u32>(8u)) - vec4<i32>(1);
}

// qu16 is the little-endian u16 at byte b.
fn qu16(b: u32) -> u32 {
    return qbyte(b) | (qbyte(b + 1u) << 8u);
}

// qsign_byte is ksigns_iq2xs[code] (code < 128): the sign bits of a group
// of 8 (bit j negates value j) for its 7-bit code.
fn qsign_byte(code: u32) -> u32 {
    return (grid[IQG_KSIGNS_IQ2XS + (code >> 2u)] >> (8u * (code & 3u))) & 255u;
}

// qgrid4 is elements e .. e+3 (e a multiple of 4) of the grid I-quant
// block of type qt at byte b, as tensors.DecodeBlocks computes them
// (iquant.go has the layouts): in sub-block ib = e/32 they are values j .. j+3
// (j = e%8, 0 or 4) of group l = (e/8)%4, which share their scale, sign
// byte and grid index, so they are one word of the grid entry.
fn qgrid4(qt: u32, b: u32, e: u32) -> vec4<f32> {
    let ib = e >> 5u;
    let l = (e >> 3u) & 3u;
    let h = (e >> 2u) & 1u; // the group's first or second four values
    let by = vec4<u32>(0u, 8u, 16u, 24u);
    var db = 0.0;
    var gw = 0u; // the four grid bytes
    var sg = 0u; // the group's sign byte: bit j negates value j
    switch qt {
        case QT_IQ2XXS: { // d, per sub-block grid bytes a and a word of sign codes and scale
            let a = qword4(b + 2u + 8u * ib);
            let s = qword4(b + 6u + 8u * ib);
            db = (qhalf(b) * (0.5 + f32(s >> 28u))) * 0.25;
            gw = grid[IQG_IQ2XXS + 2u * ((a >> (8u * l)) & 255u) + h];
            sg = qsign_byte((s >> (7u * l)) & 127u);
        }
        case QT_IQ2XS: { // d, qs u16 (9-bit index, 7-bit sign code), scales[8]
            let q = qu16(b + 2u + 8u * ib + 2u * l);
            let sc = (qbyte(b + 66u + ib) >> (4u * (l >> 1u))) & 15u;
            db = (qhalf(b) * (0.5 + f32(sc))) * 0.25;
            gw = grid[IQG_IQ2XS + 2u * (q & 511u) + h];
            sg = qsign_byte(q >> 9u);
        }
        case QT_IQ2S: { // d, qs[32] low index bits, signs[32], qh[8], scales[8]
            let idx = qbyte(b + 2u + 4u * ib + l) | ((qbyte(b + 66u + ib) << (8u - 2u * l)) & 0x300u);
            let sc = (qbyte(b + 74u + ib) >> (4u * (l >> 1u))) & 15u;
            db = (qhalf(b) * (0.5 + f32(sc))) * 0.25;
            gw = grid[IQG_IQ2S + 2u * idx + h];
            sg = qbyte(b + 34u + 4u * ib + l);
        }
        case QT_IQ3XXS: { // d, qs[64] indices, per sub-block a word of sign codes and scale
            let s = qword4(b + 66u + 4u * ib);
            db = (qhalf(b) * (0.5 + f32(s >> 28u))) * 0.5;
            gw = grid[IQG_IQ3XXS + qbyte(b + 2u + 8u * ib + 2u * l + h)];
            sg = qsign_byte((s >> (7u * l)) & 127u);
        }
        case QT_IQ3S: { // d, qs[64], qh[8], signs[32], scales[4]
            let idx = qbyte(b + 2u + 8u * ib + 2u * l + h) | ((qbyte(b + 66u + ib) << (8u - 2u * l - h)) & 256u);
            db = qhalf(b) * f32(1u + 2u * ((qbyte(b + 106u + (ib >> 1u)) >> (4u * (ib & 1u))) & 15u));
            gw = grid[IQG_IQ3S + idx];
            sg = qbyte(b + 74u + 4u * ib + l);
        }
        case QT_IQ1S: { // d, qs[32], qh[8] u16: 3 index bits per group, scale, shift sign
            let qh = qu16(b + 34u + 2u * ib);
            let dl = qhalf(b) * f32(2u * ((qh >> 12u) & 7u) + 1u);
            let delta = select(0.125, -0.125, (qh & 0x8000u) != 0u);
            let idx = qbyte(b + 2u + 4u * ib + l) | (((qh >> (3u * l)) & 7u) << 8u);
            let g = extractBits(bitcast<vec4<i32>>(vec4<u32>(grid[IQG_IQ1S + 2u * idx + h]) >> by), 0u, 8u);
            return dl * (vec4<f32>(g) + delta);
        }
        default: { // IQ1_M: qs[32], qh[16], scales (4 u16; the f16 d in their top nibbles)
            let s0 = qu16(b + 48u);
            let s1 = qu16(b + 50u);
            let s2 = qu16(b + 52u);
            let s3 = qu16(b + 54u);
            let d = unpack2x16float((s0 >> 12u) | ((s1 >> 8u) & 0x00f0u) | ((s2 >> 4u) & 0x0f00u) | (s3 & 0xf000u)).x;
            let sw = qu16(b + 48u + 2u * (ib >> 1u)) >> (6u * (ib & 1u));
            let dl = d * f32(2u * ((sw >> (3u * (l >> 1u))) & 7u) + 1u);
            let hq = qbyte(b + 32u + 2u * ib + (l >> 1u)) >> (4u * (l & 1u));
            let idx = qbyte(b + 4u * ib + l) | ((hq & 7u) << 8u);
            let delta = select(0.125, -0.125, (hq & 8u) != 0u);
            let g = extractBits(bitcast<vec4<i32>>(vec4<u32>(grid[IQG_IQ1S + 2u * idx + h]) >> by), 0u, 8u);
            return dl * (vec4<f32>(g) + delta);
        }
    }
    let v = db * vec4<f32>((vec4<u32>(gw) >> by) & vec4<u32>(255u));
    let neg = ((vec4<u32>(sg) >> (vec4<u32>(0u, 1u, 2u, 3u) + vec4<u32>(4u * h))) & vec4<u32>(1u)) != vec4<u32>(0u);
    return select(v, -v, neg);
}

// qscale_min is the 6-bit scale and min of sub-block j of a Q4_K/Q5_K block
// whose 12 scale bytes start at byte s.
fn qscale_min(s: u32, j: u32) -> vec2<f32> {
    if j < 4u {
        return vec2<f32>(f32(qbyte(s + j) & 63u), f32(qbyte(s + j + 4u) & 63u));
    }
    let b = qbyte(s + j + 4u);
    return vec2<f32>(f32((b & 15u) | ((qbyte(s + j - 4u) >> 6u) << 4u)),
                     f32((b >> 4u) | ((qbyte(s + j) >> 6u) << 4u)));
}

// qvalue is element i of the block of type qt (of this module's layout QL)
// starting at byte b: the module's layout is a constant, so each module
// holds only its own types' code.
fn qvalue(qt: u32, b: u32, i: u32) -> f32 {
    var v = 0.0;
    switch QL {
        case QL_B32: {
            switch qt {
                case QT_Q4_1: { // Q4_1
                    v = f32(qnibble32(b + 4u, i)) * qhalf(b) + qhalf(b + 2u);
                }
                case QT_Q5_0: { // Q5_0
                    let hb = (qbyte(b + 2u + (i >> 3u)) >> (i & 7u)) & 1u;
                    v = f32(i32(qnibble32(b + 6u, i) | (hb << 4u)) - 16) * qhalf(b);
                }
                case QT_Q5_1: { // Q5_1
                    let hb = (qbyte(b + 4u + (i >> 3u)) >> (i & 7u)) & 1u;
                    v = f32(qnibble32(b + 8u, i) | (hb << 4u)) * qhalf(b) + qhalf(b + 2u);
                }
                case QT_Q8_0: { // Q8_0: d, 32 int8
                    v = f32(extractBits(bitcast<i32>(qbyte(b + 2u + i)), 0u, 8u)) * qhalf(b);
                }
                case QT_MXFP4: { // MXFP4: E8M0 e, 16 bytes of E2M1 codes
                    v = f32(qfp4(vec4<u32>(qnibble32(b + 1u, i))).x) * qe8m0_half(qbyte(b));
                }
                default: { // IQ4_NL: d, 16 bytes of codes
                    v = qhalf(b) * f32(qiq4nl(vec4<u32>(qnibble32(b + 2u, i))).x);
                }
            }
        }
        case QL_K45: { // Q4_K, Q5_K
            let j = i >> 5u; // sub-block
            let l = i & 31u;
            let sm = qscale_min(b + 4u, j);
            var qs = b + 16u;
            if qt == QT_Q5K {
                qs = b + 48u;
            }
            var q = (qbyte(qs + 32u * (j >> 1u) + l) >> ((j & 1u) * 4u)) & 15u;
            if qt == QT_Q5K {
                q |= ((qbyte(b + 16u + l) >> j) & 1u) << 4u;
            }
            let d1 = qhalf(b) * sm.x;
            let m1 = qhalf(b + 2u) * sm.y;
            v = d1 * f32(q) - m1;
        }
        case QL_S32: {
            switch qt {
                case QT_IQ4XS: { // IQ4_XS: d, scales_h, scales_l[4], 8 sub-blocks of IQ4_NL codes
                    let j = i >> 5u;
                    v = qiq4xs_scale(b, j) * f32(qiq4nl(vec4<u32>(qnibble32(b + 8u + 16u * j, i & 31u))).x);
                }
                case QT_TQ1_0: { // TQ1_0: qs[48], qh[4] of base-3 digits, d
                    let at = qtq1_at(i & ~3u);
                    v = f32(qtq1_digits(vec4<u32>(qbyte(b + at.x + (i & 3u))), at.y).x) * qhalf(b + 52u);
                }
                default: { // TQ2_0: element 128h + 32l + m is bits 2l of qs[32h + m]; d
                    let q = (qbyte(b + 32u * (i >> 7u) + (i & 31u)) >> (2u * ((i >> 5u) & 3u))) & 3u;
                    v = f32(i32(q) - 1) * qhalf(b + 64u);
                }
            }
        }
        case QL_GRID: {
            v = qgrid4(qt, b, i & ~3u)[i & 3u];
        }
        case QL_K6: { // Q6_K
            let h = i >> 7u;
            let k = (i >> 5u) & 3u;
            let l = i & 31u;
            let lo = (qbyte(b + 64u * h + l + 32u * (k & 1u)) >> ((k >> 1u) * 4u)) & 15u;
            let hi = (qbyte(b + 128u + 32u * h + l) >> (2u * k)) & 3u;
            let sc = f32(extractBits(bitcast<i32>(qbyte(b + 192u + 8u * h + 2u * k + (l >> 4u))), 0u, 8u));
            v = qhalf(b + 208u) * sc * f32(i32(lo | (hi << 4u)) - 32);
        }
        default: { // QL_K23
            switch qt {
                case QT_NVFP4: { // NVFP4: 4 UE4M3 scales, 4 sub-blocks of 16 (8 bytes of nibbles each)
                    let s = i >> 4u;
                    let j = i & 15u;
                    let c = (qbyte(b + 4u + 8u * s + (j & 7u)) >> (4u * (j >> 3u))) & 15u;
                    v = f32(qfp4(vec4<u32>(c)).x) * ue4m3_half(qbyte(b + s));
                }
                default: { // Q2_K, Q3_K: element l of sub-block 8h + 2j + u
                    let h = i >> 7u;
                    let j = (i >> 5u) & 3u;
                    let u = (i >> 4u) & 1u;
                    let l = i & 15u;
                    let s = 8u * h + 2u * j + u;
                    if qt == QT_Q2K {
                        let q = (qbyte(b + 16u + 32u * h + 16u * u + l) >> (2u * j)) & 3u;
                        let sc = qbyte(b + s);
                        let dl = qhalf(b + 80u) * f32(sc & 15u);
                        let ml = qhalf(b + 82u) * f32(sc >> 4u);
                        v = dl * f32(q) - ml;
                    } else {
                        var q = i32((qbyte(b + 32u + 32u * h + 16u * u + l) >> (2u * j)) & 3u);
                        if ((qbyte(b + 16u * u + l) >> (4u * h + j)) & 1u) == 0u {
                            q -= 4;
                        }
                        let lo = (qbyte(b + 96u + (s & 7u)) >> (4u * (s >> 3u))) & 15u;
                        let hi = (qbyte(b + 104u + (s & 3u)) >> (2u * (s >> 2u))) & 3u;
                        let dl = qhalf(b + 108u) * f32(i32(lo | (hi << 4u)) - 32);
                        v = dl * f32(q);
                    }
                }
            }
        }
    }
    return v;
}

// qweight is W[r][c] of the bound row block.
fn qweight(r: u32, c: u32) -> f32 {
    let bl = qblock_len(p.qt);
    let blk = r * (p.in_cols / bl) + c / bl;
    return qvalue(p.qt, blk * qblock_bytes(p.qt), c % bl);
}

fn qstore(i: u32, v: f32) {
    if p.accum != 0u {
        out_set(i, out_at(i) + v);
    } else {
        out_set(i, v);
    }
}

// QSub is the constants of one sub-block: its weights are a * q + c for
// the quants q of qquant4; h is Q5_0's and Q5_1's word of high bits.
struct QSub {
    a: f32,
    c: f32,
    h: u32,
}

// qsub reads the constants of sub-block s of the block of type qt (of
// layout ql) at byte b.
fn qsub(ql: u32, qt: u32, b: u32, s: u32) -> QSub {
    var r = QSub(0.0, 0.0, 0u);
    switch ql {
        case QL_B32: { // Q4_1 d, m, qs; Q5_0 d, qh, qs; Q5_1 d, m, qh, qs; Q8_0 d, qs; MXFP4 e, qs
            if qt == QT_MXFP4 {
                r.a = qe8m0_half(qbyte(b)); // h*fp4(q): no offset
                return r;
            }
            if qt == QT_IQ4NL {
                r.a = qhalf(b); // d*kvalues[q]: no offset
                return r;
            }
            r.a = qhalf(b);
            if qt == QT_Q8_0 {
                // d*q: no offset, no high bits
            } else if qt == QT_Q5_0 {
                r.h = qword4(b + 2u);
            } else {
                r.c = qhalf(b + 2u);
                if qt == QT_Q5_1 {
                    r.h = w[(b + 4u) >> 2u]; // blocks of 24 bytes start on words
                }
            }
        }
        case QL_K45: { // d, dmin, 12 scale bytes, (Q5_K: 32 bytes of high bits), qs
            let sm = qscale_min(b + 4u, s);
            r.a = qhalf(b) * sm.x;
            r.c = -(qhalf(b + 2u) * sm.y);
        }
        case QL_S32: { // IQ4_XS: d, scales_h, scales_l[4], qs; TQ1_0, TQ2_0: one d
            if qt == QT_IQ4XS {
                r.a = qiq4xs_scale(b, s);
            } else { // d*(digit-1): one scale, the offset in qquant4
                r.a = qhalf(b + select(64u, 52u, qt == QT_TQ1_0));
            }
        }
        case QL_GRID: { // qquant4 gives the values themselves
            r.a = 1.0;
        }
        case QL_K6: { // ql 128, qh 64, int8 scales 16, d
            r.a = qhalf(b + 208u) * f32(extractBits(bitcast<i32>(qbyte(b + 192u + s)), 0u, 8u));
        }
        default: { // Q2_K: scales 16, qs 64, d, dmin; Q3_K: hmask 32, qs 64, scales 12, d; NVFP4: d[4], qs 32
            if qt == QT_NVFP4 {
                r.a = ue4m3_half(qbyte(b + s));
            } else if qt == QT_Q2K {
                let sc = qbyte(b + s);
                r.a = qhalf(b + 80u) * f32(sc & 15u);
                r.c = -(qhalf(b + 82u) * f32(sc >> 4u));
            } else {
                let lo = (qbyte(b + 96u + (s & 7u)) >> (4u * (s >> 3u))) & 15u;
                let hi = (qbyte(b + 104u + (s & 3u)) >> (2u * (s >> 2u))) & 3u;
                r.a = qhalf(b + 108u) * f32(i32(lo | (hi << 4u)) - 32);
            }
        }
    }
    return r;
}

// qquant4 is the quants of elements l .. l+3 (l a multiple of 4) of
// sub-block s (constants sub) of the block of type qt (layout ql) at byte
// b, offsets applied (Q5_0's 16, Q6_K's 32, Q3_K's 4 where the high bit is
// clear): one or two u32 loads per array, unpacked in registers.
fn qquant4(ql: u32, qt: u32, b: u32, s: u32, sub: QSub, l: u32) -> vec4<f32> {
    let by = vec4<u32>(0u, 8u, 16u, 24u);
    var q = vec4<i32>(0);
    switch ql {
        case QL_B32: { // low nibbles are elements 0..15, high nibbles 16..31
            if qt == QT_Q8_0 { // signed bytes l .. l+3 after d
                return vec4<f32>(extractBits(bitcast<vec4<i32>>(vec4<u32>(qword4(b + 2u + l)) >> by), 0u, 8u));
            }
            if qt == QT_MXFP4 { // E2M1 codes in nibbles after e
                return vec4<f32>(qfp4((vec4<u32>(qword4(b + 1u + (l & 15u))) >> (by + vec4<u32>((l >> 4u) * 4u))) & vec4<u32>(15u)));
            }
            if qt == QT_IQ4NL { // IQ4_NL codes in nibbles after d
                return vec4<f32>(qiq4nl((vec4<u32>(qword4(b + 2u + (l & 15u))) >> (by + vec4<u32>((l >> 4u) * 4u))) & vec4<u32>(15u)));
            }
            var qs = b + 4u;
            if qt == QT_Q5_0 {
                qs = b + 6u;
            } else if qt == QT_Q5_1 {
                qs = b + 8u;
            }
            let n = (vec4<u32>(qword4(qs + (l & 15u))) >> (by + vec4<u32>((l >> 4u) * 4u))) & vec4<u32>(15u);
            let hb = ((vec4<u32>(sub.h) >> (vec4<u32>(l) + vec4<u32>(0u, 1u, 2u, 3u))) & vec4<u32>(1u)) << vec4<u32>(4u);
            q = vec4<i32>(n | hb);
            if qt == QT_Q5_0 {
                q -= vec4<i32>(16);
            }
        }
        case QL_K45: { // sub-blocks 2i and 2i+1: low and high nibbles of qs bytes 32i ..
            var qs = b + 16u;
            if qt == QT_Q5K {
                qs = b + 48u;
            }
            var n = (vec4<u32>(w[(qs + 32u * (s >> 1u) + l) >> 2u]) >> (by + vec4<u32>((s & 1u) * 4u))) & vec4<u32>(15u);
            if qt == QT_Q5K { // bit s of high-bit byte l
                n |= ((vec4<u32>(w[(b + 16u + l) >> 2u]) >> (by + vec4<u32>(s))) & vec4<u32>(1u)) << vec4<u32>(4u);
            }
            q = vec4<i32>(n);
        }
        case QL_S32: {
            if qt == QT_IQ4XS { // sub-block s: IQ4_NL's nibble layout over qs bytes 16s ..
                return vec4<f32>(qiq4nl((vec4<u32>(qword4(b + 8u + 16u * s + (l & 15u))) >> (by + vec4<u32>((l >> 4u) * 4u))) & vec4<u32>(15u)));
            }
            if qt == QT_TQ2_0 { // sub-block s = 4h + j: bits 2j of qs bytes 32h ..
                return vec4<f32>(vec4<i32>((vec4<u32>(qword4(b + 32u * (s >> 2u) + l)) >> (by + vec4<u32>(2u * (s & 3u)))) & vec4<u32>(3u)) - vec4<i32>(1));
            }
            let at = qtq1_at(32u * s + l); // TQ1_0
            return vec4<f32>(qtq1_digits((vec4<u32>(qword4(b + at.x)) >> by) & vec4<u32>(255u), at.y));
        }
        case QL_GRID: { // the values, element by element (qsub's a is 1)
            return qgrid4(qt, b, 32u * s + l);
        }
        case QL_K6: { // element 128h + 32k + e (e = 16 (s & 1) + l): s = 8h + 2k + (s & 1)
            let h = s >> 3u;
            let k = (s >> 1u) & 3u;
            let e = 16u * (s & 1u) + l;
            let lo = (vec4<u32>(qword4(b + 64u * h + 32u * (k & 1u) + e)) >> (by + vec4<u32>((k >> 1u) * 4u))) & vec4<u32>(15u);
            let hi = (vec4<u32>(qword4(b + 128u + 32u * h + e)) >> (by + vec4<u32>(2u * k))) & vec4<u32>(3u);
            q = vec4<i32>(lo | (hi << vec4<u32>(4u))) - vec4<i32>(32);
        }
        default: { // element 128h + 32j + 16u + l: s = 8h + 2j + u, 2 bits at 2j
            if qt == QT_NVFP4 { // sub-block s: element j < 8 the low nibble of byte 8s + j, j+8 its high one
                return vec4<f32>(qfp4((vec4<u32>(qword4(b + 4u + 8u * s + (l & 7u))) >> (by + vec4<u32>((l >> 3u) * 4u))) & vec4<u32>(15u)));
            }
            let h = s >> 3u;
            let j = (s >> 1u) & 3u;
            let u = s & 1u;
            var qs = b + 16u;
            if qt == QT_Q3K {
                qs = b + 32u;
            }
            q = vec4<i32>((vec4<u32>(qword4(qs + 32u * h + 16u * u + l)) >> (by + vec4<u32>(2u * j))) & vec4<u32>(3u));
            if qt == QT_Q3K { // minus 4 where bit 4h + j of hmask byte 16u + l is clear
                let m = (vec4<u32>(qword4(b + 16u * u + l)) >> (by + vec4<u32>(4u * h + j))) & vec4<u32>(1u);
                q -= vec4<i32>(4) * vec4<i32>(vec4<u32>(1u) - m);
            }
        }
    }
    return vec4<f32>(q);
}

// qx4 is activations x[i .. i+3] (i even).
fn qx4(i: u32) -> vec4<f32> {
    if p.x_f16 != 0u {
        let j = i >> 1u;
        return vec4<f32>(unpack2x16float(x_w[j]), unpack2x16float(x_w[j + 1u]));
    }
    return bitcast<vec4<f32>>(vec4<u32>(x_w[i], x_w[i + 1u], x_w[i + 2u], x_w[i + 3u]));
}

// qrows_part is lane's share (of lanes) of W[r]·x[t] for rows r0 .. r0+3
// (QV_ROWS; rows past the last repeat it, qrows_finish drops them), in
// x .. w: sub-blocks lane, lane + lanes, ... of each row, each one's
// constants read once, each activation load shared by the four rows.
fn qrows_part(t: u32, r0: u32, lane: u32, lanes: u32) -> vec4<f32> {
    let bl = qblock_len(p.qt);
    let bb = qblock_bytes(p.qt);
    let spb = bl / QSUB; // sub-blocks per block
    let bpr = p.in_cols / bl; // blocks per row
    let last = p.rows - 1u;
    let rb = vec4<u32>(r0, min(r0 + 1u, last), min(r0 + 2u, last), min(r0 + 3u, last)) * bpr; // the rows' first blocks
    let xb = t * p.in_cols;
    var acc = vec4<f32>(0.0);
    for (var u = lane; u < p.in_cols / QSUB; u += lanes) {
        let s = u % spb;
        let b = (rb + vec4<u32>(u / spb)) * bb;
        let s0 = qsub(QL, p.qt, b.x, s);
        let s1 = qsub(QL, p.qt, b.y, s);
        let s2 = qsub(QL, p.qt, b.z, s);
        let s3 = qsub(QL, p.qt, b.w, s);
        let xi = xb + u * QSUB;
        for (var l = 0u; l < QSUB; l += 4u) {
            let xv = qx4(xi + l);
            acc += vec4<f32>(dot(s0.a * qquant4(QL, p.qt, b.x, s, s0, l) + s0.c, xv),
                             dot(s1.a * qquant4(QL, p.qt, b.y, s, s1, l) + s1.c, xv),
                             dot(s2.a * qquant4(QL, p.qt, b.z, s, s2, l) + s2.c, xv),
                             dot(s3.a * qquant4(QL, p.qt, b.w, s, s3, l) + s3.c, xv));
        }
    }
    return acc;
}

// qfinish adds the bias to row r's sum v for token t and stores it.
fn qfinish(t: u32, r: u32, v: f32) {
    let o = p.row_base + r;
    var acc = v;
    if p.has_bias != 0u {
        acc += bias[o];
    }
    qstore(t * p.out_cols + o, acc);
}

// qrows_finish stores the sums v of rows r0 .. r0+3 of token t that exist.
fn qrows_finish(t: u32, r0: u32, v: vec4<f32>) {
    for (var k = 0u; k < QV_ROWS; k++) {
        if r0 + k < p.rows {
            qfinish(t, r0 + k, v[k]);
        }
    }
}

var<workgroup> qred: array<vec4<f32>, QV_WG>;

// qmatvec: workgroups of QV_WG (32) invocations in groups of p.lanes, each
// group QV_ROWS rows of token t (dispatch: step rows x row groups).
@compute @workgroup_size(QV_WG)
fn qmatvec(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wid.x;
    if t >= min(step[STEP_ROWS], p.nrows) {
        return; // uniform: the whole workgroup shares t
    }
    let lanes = p.lanes;
    let lane = li & (lanes - 1u);
    let r0 = (wid.y * (QV_WG / lanes) + li / lanes) * QV_ROWS;
    var v = vec4<f32>(0.0);
    if r0 < p.rows {
        v = qrows_part(t, r0, lane, lanes);
    }
    qred[li] = v;
    workgroupBarrier();
    for (var h = lanes / 2u; h > 0u; h = h / 2u) {
        if lane < h {
            qred[li] += qred[li + h];
        }
        workgroupBarrier();
    }
    if lane == 0u {
        qrows_finish(t, r0, qred[li]);
    }
}

// qmatmul tiles as matmul.wgsl's matmul: a workgroup of 8x8 invocations
// computes 32 rows x 32 tokens, each invocation 4x4 outputs, stepping
// through k 32 at a time (a whole number of sub-blocks: rows are whole
// blocks of 32 or 256) with activations and dequantized weights staged in
// workgroup memory (rows padded to 33 words against bank conflicts).
//
// No kernel of this family reads a workgroup word it has not written (the
// padding word of a tile row is never read; qred is written before the
// barrier ahead of its reads), so the Vulkan modules go without naga's
// zero-initialization of workgroup memory, which lavapipe unrolls into a
// store per element of the tiles; the marker line tells
// shaders/internal/spirvgen:
// spirvgen: no-workgroup-zero-init
const QTM: u32 = 32u;
const QTK: u32 = 32u;
var<workgroup> qxs: array<array<f32, 33>, 32>; // [token][k]
var<workgroup> qws: array<array<f32, 33>, 32>; // [row][k]

@compute @workgroup_size(8, 8)
fn qmatmul(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
           @builtin(local_invocation_index) li: u32) {
    let n = min(step[STEP_ROWS], p.nrows);
    let t0 = wid.y * QTM;
    if t0 >= n {
        return; // uniform across the workgroup
    }
    let r0 = wid.x * QTM;
    let bl = qblock_len(p.qt);
    let bb = qblock_bytes(p.qt);
    let nb = p.in_cols / bl;
    // This invocation's weights: 16 of row wr per step.
    let wr = li >> 1u;
    let wh = 16u * (li & 1u);
    var acc: array<array<f32, 4>, 4>; // [token i][row j]
    for (var k0 = 0u; k0 < p.in_cols; k0 += QTK) {
        // Activations: 32 tokens x 8 vec4, 4 per invocation.
        for (var m = li; m < 256u; m += 64u) {
            let tok = m / 8u;
            let kq = 4u * (m % 8u);
            var xv = vec4<f32>(0.0);
            if t0 + tok < n {
                xv = qx4((t0 + tok) * p.in_cols + k0 + kq);
            }
            qxs[tok][kq] = xv.x;
            qxs[tok][kq + 1u] = xv.y;
            qxs[tok][kq + 2u] = xv.z;
            qxs[tok][kq + 3u] = xv.w;
        }
        // Weights: elements k0 + wh .. +15 of row r0 + wr, within one sub-block.
        let e = k0 + wh;
        let b = ((r0 + wr) * nb + e / bl) * bb;
        let s = (e % bl) / QSUB;
        let l0 = e % QSUB;
        var sub = QSub(0.0, 0.0, 0u);
        if r0 + wr < p.rows {
            sub = qsub(QL, p.qt, b, s);
        }
        for (var l = 0u; l < 16u; l += 4u) {
            var v = vec4<f32>(0.0);
            if r0 + wr < p.rows {
                v = sub.a * qquant4(QL, p.qt, b, s, sub, l0 + l) + sub.c;
            }
            qws[wr][wh + l] = v.x;
            qws[wr][wh + l + 1u] = v.y;
            qws[wr][wh + l + 2u] = v.z;
            qws[wr][wh + l + 3u] = v.w;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < QTK; kk++) {
            var xr: array<f32, 4>;
            var wv: array<f32, 4>;
            for (var i = 0u; i < 4u; i++) {
                xr[i] = qxs[lid.y + 8u * i][kk];
                wv[i] = qws[lid.x + 8u * i][kk];
            }
            for (var i = 0u; i < 4u; i++) {
                for (var j = 0u; j < 4u; j++) {
                    acc[i][j] += xr[i] * wv[j];
                }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i++) {
        let t = t0 + lid.y + 8u * i;
        for (var j = 0u; j < 4u; j++) {
            let r = r0 + lid.x + 8u * j;
            if t < n && r < p.rows {
                qfinish(t, r, acc[i][j]);
            }
        }
    }
}

@compute @workgroup_size(64)
fn qembed(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    let t = gid.y;
    if c >= p.in_cols || t >= step[STEP_ROWS] {
        return;
    }
    let tok = step[STEP_TOKEN + t];
    if tok < p.row_base || tok >= p.row_base + p.rows {
        return;
    }
    var v = qweight(tok - p.row_base, c);
    if p.scale != 0.0 && p.scale != 1.0 {
        v = v * p.scale;
    }
    out_set(t * p.in_cols + c, v);
}
