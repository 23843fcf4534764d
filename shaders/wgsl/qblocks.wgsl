// Kernels for weights of llama.cpp's block types (tensors.Q4_1 ... Q3K),
// kept bit for bit as GGUF stores them (layouts: tensors/blocks.go) and
// dequantized here, element by element, with the same f32 operations as
// tensors.DecodeBlocks, so every weight equals the CPU reference's bitwise.
//
// The weights of one row block [row_base, row_base+rows) of the matrix are
// bound as u32 words: row r (relative to the block) starts at byte
// r * (in_cols / block length) * block bytes, blocks in order.
//
// qmatvec (decode): one invocation per output row and token,
//   dispatch (ceil(rows/64), nrows, 1).
// qmatmul (prefill): 32x32 tiles of tokens x rows, dequantized weight tiles
//   in workgroup memory, dispatch (ceil(rows/32), ceil(nrows/32), 1).
//   Both: out[t][row_base + r] = W[r]·x[t] (+ bias), added to out when accum.
// qembed: out[t] = scale * W[tokens[t]] for the tokens in the row block,
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
    pad2: u32,
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

// activations: x, out

fn qblock_len(qt: u32) -> u32 {
    return select(QT_Q4_1_ELEMS, QT_Q4K_ELEMS, qt >= QT_Q4K);
}

fn qblock_bytes(qt: u32) -> u32 {
    var n = 0u;
    switch qt {
        case QT_Q4_1: { n = QT_Q4_1_BYTES; }
        case QT_Q5_0: { n = QT_Q5_0_BYTES; }
        case QT_Q5_1: { n = QT_Q5_1_BYTES; }
        case QT_Q4K: { n = QT_Q4K_BYTES; }
        case QT_Q5K: { n = QT_Q5K_BYTES; }
        case QT_Q2K: { n = QT_Q2K_BYTES; }
        case QT_Q3K: { n = QT_Q3K_BYTES; }
        default: { n = QT_Q6K_BYTES; }
    }
    return n;
}

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

// qvalue is element i of the block of type qt starting at byte b.
fn qvalue(qt: u32, b: u32, i: u32) -> f32 {
    var v = 0.0;
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
        case QT_Q4K, QT_Q5K: { // Q4_K, Q5_K
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
        case QT_Q2K, QT_Q3K: { // Q2_K, Q3_K: element l of sub-block 8h + 2j + u
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
        default: { // Q6_K
            let h = i >> 7u;
            let k = (i >> 5u) & 3u;
            let l = i & 31u;
            let lo = (qbyte(b + 64u * h + l + 32u * (k & 1u)) >> ((k >> 1u) * 4u)) & 15u;
            let hi = (qbyte(b + 128u + 32u * h + l) >> (2u * k)) & 3u;
            let sc = f32(extractBits(bitcast<i32>(qbyte(b + 192u + 8u * h + 2u * k + (l >> 4u))), 0u, 8u));
            v = qhalf(b + 208u) * sc * f32(i32(lo | (hi << 4u)) - 32);
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

// qsub_dot is the dot product of sub-block j (elements 32j .. 32j+31) of
// the block of type qt at byte b with x[xi ..]: the block's constants are
// read once, each weight computed as qvalue computes it.
fn qsub_dot(qt: u32, b: u32, j: u32, xi: u32) -> f32 {
    var acc = 0.0;
    switch qt {
        case QT_Q4K, QT_Q5K: { // Q4_K, Q5_K: blocks of 144 and 176 bytes start on words
            let sm = qscale_min(b + 4u, j);
            let d1 = qhalf(b) * sm.x;
            let m1 = qhalf(b + 2u) * sm.y;
            var qs = b + 16u;
            if qt == QT_Q5K {
                qs = b + 48u;
            }
            let qw = (qs + 32u * (j >> 1u)) >> 2u;
            let sh = vec4<u32>(0u, 8u, 16u, 24u) + vec4<u32>((j & 1u) * 4u);
            let hsh = vec4<u32>(0u, 8u, 16u, 24u) + vec4<u32>(j);
            for (var k = 0u; k < 8u; k++) {
                var q = (vec4<u32>(w[qw + k]) >> sh) & vec4<u32>(15u);
                if qt == QT_Q5K {
                    q |= ((vec4<u32>(w[((b + 16u) >> 2u) + k]) >> hsh) & vec4<u32>(1u)) << vec4<u32>(4u);
                }
                let v = d1 * vec4<f32>(q) - m1;
                acc += dot(v, vec4<f32>(x_at(xi + 4u * k), x_at(xi + 4u * k + 1u), x_at(xi + 4u * k + 2u), x_at(xi + 4u * k + 3u)));
            }
        }
        case QT_Q6K: { // Q6_K: blocks of 210 bytes start on even bytes
            let d = qhalf(b + 208u);
            let h = j >> 2u;
            let k = j & 3u;
            let lo0 = b + 64u * h + 32u * (k & 1u);
            let hi0 = b + 128u + 32u * h;
            let lsh = vec4<u32>(0u, 8u, 16u, 24u) + vec4<u32>((k >> 1u) * 4u);
            let hsh = vec4<u32>(0u, 8u, 16u, 24u) + vec4<u32>(2u * k);
            for (var half = 0u; half < 2u; half++) {
                let ds = d * f32(extractBits(bitcast<i32>(qbyte(b + 192u + 8u * h + 2u * k + half)), 0u, 8u));
                for (var l = 16u * half; l < 16u * half + 16u; l += 4u) {
                    let q = ((vec4<u32>(qword4(lo0 + l)) >> lsh) & vec4<u32>(15u)) |
                            (((vec4<u32>(qword4(hi0 + l)) >> hsh) & vec4<u32>(3u)) << vec4<u32>(4u));
                    let v = ds * vec4<f32>(vec4<i32>(q) - vec4<i32>(32));
                    acc += dot(v, vec4<f32>(x_at(xi + l), x_at(xi + l + 1u), x_at(xi + l + 2u), x_at(xi + l + 3u)));
                }
            }
        }
        case QT_Q2K, QT_Q3K: { // Q2_K, Q3_K
            for (var i = 0u; i < 32u; i++) {
                acc += qvalue(qt, b, 32u * j + i) * x_at(xi + i);
            }
        }
        default: { // Q4_1, Q5_0, Q5_1: one 32-element block
            let d = qhalf(b);
            var m = 0.0;
            var qh = 0u;
            var qs = b + 4u;
            if qt == QT_Q5_0 {
                qh = qword4(b + 2u);
                qs = b + 6u;
            } else if qt == QT_Q5_1 {
                m = qhalf(b + 2u);
                qh = qword4(b + 4u);
                qs = b + 8u;
            } else {
                m = qhalf(b + 2u);
            }
            for (var l = 0u; l < 16u; l++) {
                let c = qbyte(qs + l);
                let lo = (c & 15u) | (((qh >> l) & 1u) << 4u);
                let hi = (c >> 4u) | (((qh >> (l + 16u)) & 1u) << 4u);
                var v0 = 0.0;
                var v1 = 0.0;
                if qt == QT_Q5_0 {
                    v0 = f32(i32(lo) - 16) * d;
                    v1 = f32(i32(hi) - 16) * d;
                } else {
                    v0 = f32(lo) * d + m;
                    v1 = f32(hi) * d + m;
                }
                acc += v0 * x_at(xi + l) + v1 * x_at(xi + l + 16u);
            }
        }
    }
    return acc;
}

@compute @workgroup_size(64)
fn qmatvec(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r = gid.x;
    let t = gid.y;
    if r >= p.rows || t >= min(step[STEP_ROWS], p.nrows) {
        return;
    }
    let bl = qblock_len(p.qt);
    let bb = qblock_bytes(p.qt);
    let nb = p.in_cols / bl;
    let subs = bl / 32u;
    let xb = t * p.in_cols;
    var acc = 0.0;
    for (var k = 0u; k < nb; k++) {
        let base = (r * nb + k) * bb;
        for (var j = 0u; j < subs; j++) {
            acc += qsub_dot(p.qt, base, j, xb + k * bl + 32u * j);
        }
    }
    let o = p.row_base + r;
    if p.has_bias != 0u {
        acc += bias[o];
    }
    qstore(t * p.out_cols + o, acc);
}

// qmatmul tiles as matmul.wgsl's matmul: a workgroup of 8x8 invocations
// computes 32 rows x 32 tokens, each invocation 4x4 outputs, stepping
// through k 16 at a time with activations and dequantized weights staged
// in workgroup memory.
const QTM: u32 = 32u;
const QTK: u32 = 16u;
var<workgroup> qxs: array<array<f32, 16>, 32>; // [token][k]
var<workgroup> qws: array<array<f32, 16>, 32>; // [row][k]

@compute @workgroup_size(8, 8)
fn qmatmul(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
           @builtin(local_invocation_index) li: u32) {
    let n = min(step[STEP_ROWS], p.nrows);
    let t0 = wid.y * QTM;
    if t0 >= n {
        return; // uniform across the workgroup
    }
    let r0 = wid.x * QTM;
    var acc: array<array<f32, 4>, 4>; // [token i][row j]
    for (var k0 = 0u; k0 < p.in_cols; k0 += QTK) {
        for (var m = 0u; m < 8u; m++) {
            let idx = li + 64u * m;
            let row = idx / QTK;
            let k = k0 + idx % QTK;
            var xv = 0.0;
            if k < p.in_cols && t0 + row < n {
                xv = x_at((t0 + row) * p.in_cols + k);
            }
            qxs[row][idx % QTK] = xv;
            var wv = 0.0;
            if k < p.in_cols && r0 + row < p.rows {
                wv = qweight(r0 + row, k);
            }
            qws[row][idx % QTK] = wv;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < QTK; kk++) {
            var xr: array<f32, 4>;
            var wr: array<f32, 4>;
            for (var i = 0u; i < 4u; i++) {
                xr[i] = qxs[lid.y + 8u * i][kk];
                wr[i] = qws[lid.x + 8u * i][kk];
            }
            for (var i = 0u; i < 4u; i++) {
                for (var j = 0u; j < 4u; j++) {
                    acc[i][j] += xr[i] * wr[j];
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
                let o = p.row_base + r;
                var v = acc[i][j];
                if p.has_bias != 0u {
                    v += bias[o];
                }
                qstore(t * p.out_cols + o, v);
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
