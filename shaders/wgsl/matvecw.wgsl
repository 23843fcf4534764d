// base: matmul
//
// matvec_w: the decode matrix-vector product of matmul.wgsl's matvec_u (same
// variants, parameters, activations and epilogue: finish), with the
// weights and scales read through uniform bindings instead of storage. CPU
// class only: on lavapipe a storage load is a loop over the SIMD lanes
// (~12 ns per 32-bit word and lane), a uniform load a gather (~0.8 ns),
// and a 2048x2048 f32 matvec_u spends nearly all its time in weight loads.
// A uniform binding holds at most 64 KiB, so the host binds eight windows
// of the weight matrix per dispatch, each wu<k> a run of p.win_rows whole
// rows starting at a 256-byte aligned offset, and dispatches once per eight
// windows. Invocation i computes row i of each window: rows i + k *
// win_rows (k < 8) of the dispatch's block of p.rows rows, the first of
// which is p.row_base of the output. In GLU variants windows 0-3 are
// rows of W (the gate) and windows 4-7 the same rows of W2 (up), so an
// invocation computes 4 outputs. The scales of the block's rows are one
// more window (su; GLU: su for W and su2 for W2), starting at the block's
// first row: scale i of the block is row i / nblocks, block i % nblocks.
// Window bytes past the weights (the last block's) come from padding the
// host adds to every weight buffer; their rows are not stored.
//
// matvec_w_norm: the same with the RMS-norm prologue (matvec_u_norm's).
//
// Dispatch: (ceil(win_rows / 8), rows of x (<= 4096 vec4s in xu), 1).

@group(0) @binding(11) var<uniform> wu0: array<vec4<u32>, 4096>;
@group(0) @binding(12) var<uniform> wu1: array<vec4<u32>, 4096>;
@group(0) @binding(13) var<uniform> wu2: array<vec4<u32>, 4096>;
@group(0) @binding(14) var<uniform> wu3: array<vec4<u32>, 4096>;
@group(0) @binding(15) var<uniform> wu4: array<vec4<u32>, 4096>;
@group(0) @binding(16) var<uniform> wu5: array<vec4<u32>, 4096>;
@group(0) @binding(17) var<uniform> wu6: array<vec4<u32>, 4096>;
@group(0) @binding(18) var<uniform> wu7: array<vec4<u32>, 4096>;
@group(0) @binding(19) var<uniform> su: array<vec4<u32>, 4096>;
@group(0) @binding(20) var<uniform> su2: array<vec4<u32>, 4096>;

// wscale is scale i of the block (su; su2 when up, a constant in each
// caller), 1 unquantized.
fn wscale(i: u32, up: bool) -> f32 {
    if !QUANT {
        return 1.0;
    }
    if ST == ST_F16 {
        var v: vec4<u32>;
        if up {
            v = su2[i >> 3u];
        } else {
            v = su[i >> 3u];
        }
        let h = unpack2x16float(v[(i >> 1u) & 3u]);
        return select(h.x, h.y, (i & 1u) == 1u);
    }
    var v: vec4<u32>;
    if up {
        v = su2[i >> 2u];
    } else {
        v = su[i >> 2u];
    }
    return bitcast<f32>(v[i & 3u]);
}

// wsc is the (W, W2) scale pair of block row r, scale block b.
fn wsc(r: u32, b: u32) -> vec2<f32> {
    let i = r * p.nblocks + b;
    if GLU {
        return vec2<f32>(wscale(i, false), wscale(i, true));
    }
    return vec2<f32>(wscale(i, false), 1.0);
}

@compute @workgroup_size(8)
fn matvec_w(@builtin(global_invocation_id) gid: vec3<u32>) {
    mvw(gid, false);
}

@compute @workgroup_size(8)
fn matvec_w_norm(@builtin(global_invocation_id) gid: vec3<u32>) {
    mvw(gid, true);
}

fn mvw(gid: vec3<u32>, nm: bool) {
    let i = gid.x;
    let t = gid.y;
    let n = p.win_rows;
    if i >= n || t >= min(step[1], p.nrows) {
        return;
    }
    let cpr = p.in_cols / CW; // chunks per row
    let cpb = p.block / CW;   // chunks per scale block
    let xb = t * (p.in_cols / 4u);
    let rw = i * cpr; // the row's first chunk in each window
    var ss = vec4<f32>(0.0);
    var a0 = vec2<f32>(0.0);
    var a1 = vec2<f32>(0.0);
    var a2 = vec2<f32>(0.0);
    var a3 = vec2<f32>(0.0);
    var a4 = vec2<f32>(0.0);
    var a5 = vec2<f32>(0.0);
    var a6 = vec2<f32>(0.0);
    var a7 = vec2<f32>(0.0);
    for (var b = 0u; b < p.nblocks; b++) {
        var q0 = mat4x2<f32>();
        var q1 = mat4x2<f32>();
        for (var j = b * cpb; j < (b + 1u) * cpb; j++) {
            let v0 = wu0[rw + j];
            let v1 = wu1[rw + j];
            let v2 = wu2[rw + j];
            let v3 = wu3[rw + j];
            let v4 = wu4[rw + j];
            let v5 = wu5[rw + j];
            let v6 = wu6[rw + j];
            let v7 = wu7[rw + j];
            if GLU {
                // Rows 0-3 of W with the same rows of W2 (windows 4-7);
                // q1 repeats q0 and is dropped.
                mv8(v0, v1, v2, v3, v0, v1, v2, v3, v4, v5, v6, v7, v4, v5, v6, v7, xb + j * EPW, xb, true, nm, &ss, &q0, &q1);
            } else {
                mv8(v0, v1, v2, v3, v4, v5, v6, v7, v0, v1, v2, v3, v4, v5, v6, v7, xb + j * EPW, xb, true, nm, &ss, &q0, &q1);
            }
        }
        a0 += q0[0] * wsc(i, b);
        a1 += q0[1] * wsc(i + n, b);
        a2 += q0[2] * wsc(i + 2u * n, b);
        a3 += q0[3] * wsc(i + 3u * n, b);
        if !GLU {
            a4 += q1[0] * wsc(i + 4u * n, b);
            a5 += q1[1] * wsc(i + 5u * n, b);
            a6 += q1[2] * wsc(i + 6u * n, b);
            a7 += q1[3] * wsc(i + 7u * n, b);
        }
    }
    if nm {
        let r = 1.0 / sqrt(((ss.x + ss.y) + (ss.z + ss.w)) / f32(p.in_cols) + p.norm_eps);
        a0 *= r;
        a1 *= r;
        a2 *= r;
        a3 *= r;
        a4 *= r;
        a5 *= r;
        a6 *= r;
        a7 *= r;
    }
    var acc = array<vec2<f32>, 8>(a0, a1, a2, a3, a4, a5, a6, a7);
    var outs = 8u;
    if GLU {
        outs = 4u;
    }
    for (var k = 0u; k < outs; k++) {
        let r = i + k * n;
        if r < p.rows {
            finish(t, r, acc[k]);
        }
    }
}

// matmul_few_w: matmul_few_u (prefill on a CPU-class device, tokens from
// xu, whose row 0 is token x_t0) with matvec_w's windows: invocation
// (i, y) computes rows i + k * win_rows of the eight windows (GLU: four of
// W, the same four of W2) for tokens x_t0 + 4y .. +3, so each uniform weight
// load serves 4 tokens. Dispatch: (ceil(win_rows / 8), groups of 4 tokens
// whose activations xu holds, 1) per eight windows.
@compute @workgroup_size(8)
fn matmul_few_w(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    let n = p.win_rows;
    let t0 = p.x_t0 + 4u * gid.y;                   // the invocation's first token
    let nt = min(min(step[1], p.nrows), t0 + 4u); // past its last token
    if i >= n || t0 >= nt {
        return;
    }
    let m = nt - t0; // tokens of the invocation (1-4); later slots repeat the last
    let tl = 4u * gid.y + vec4<u32>(0u, min(1u, m - 1u), min(2u, m - 1u), min(3u, m - 1u));
    let cpr = p.in_cols / CW;
    let cpb = p.block / CW;
    let xs = p.in_cols / 4u;
    let rw = i * cpr;
    var acc = Tile(mat4x4<f32>(), mat4x4<f32>());
    for (var b = 0u; b < p.nblocks; b++) {
        let s0 = wsc(i, b);
        let s1 = wsc(i + n, b);
        let s2_ = wsc(i + 2u * n, b);
        let s3 = wsc(i + 3u * n, b);
        let sl = vec4<f32>(s0.x, s1.x, s2_.x, s3.x);
        var sh = vec4<f32>(s0.y, s1.y, s2_.y, s3.y); // GLU: W2's scales of the same rows
        if !GLU {
            sh = vec4<f32>(wsc(i + 4u * n, b).x, wsc(i + 5u * n, b).x, wsc(i + 6u * n, b).x, wsc(i + 7u * n, b).x);
        }
        for (var j = b * cpb; j < (b + 1u) * cpb; j++) {
            let v = array<vec4<u32>, 8>(wu0[rw + j], wu1[rw + j], wu2[rw + j], wu3[rw + j],
                                        wu4[rw + j], wu5[rw + j], wu6[rw + j], wu7[rw + j]);
            var xi = tl * xs + j * EPW;
            if XH == 1u && EPW > 1u {
                // Even (rows of whole 4 * EPW chunks): clearing the low bit
                // shows the compilers that vec4s xi + 2k and xi + 2k + 1
                // are the two halves of one f16 word, loaded once.
                xi = (xi >> vec4<u32>(1u)) << vec4<u32>(1u);
            }
            acc = add_tile(acc, chunk_tile(v, sl, sh, xi, m, true));
        }
    }
    var lo = acc.lo; // column s: token s's slots 0-3 (hi: 4-7)
    var hi = acc.hi;
    for (var s = 0u; s < m; s++) {
        let t = t0 + s;
        for (var k = 0u; k < 4u; k++) {
            let r = i + k * n;
            if GLU {
                if r < p.rows {
                    finish(t, r, vec2<f32>(lo[s][k], hi[s][k]));
                }
            } else {
                if r < p.rows {
                    finish(t, r, vec2<f32>(lo[s][k], 0.0));
                }
                if r + 4u * n < p.rows {
                    finish(t, r + 4u * n, vec2<f32>(hi[s][k], 0.0));
                }
            }
        }
    }
}
