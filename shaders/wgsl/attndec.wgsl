// base: attention
//
// attn_dec4: attn_dec (attention.wgsl) for a packed binary16 cache whose
// head dim is a multiple of 8 and whose length is a multiple of 4, read
// in 16-byte words. This family is attention.wgsl (its bindings, helpers
// and the partials' layout, merged by its attn_dec_combine) plus the two
// bindings below: the same K and V caches as kc and vc, viewed as
// vec4<u32> words.
//
// Invocation i of a workgroup takes the blocks of 4 positions
// c0+4b .. c0+4b+3 of its chunk with b = i + DL*k, k < NBL: it reads each
// key as head_dim/8 words of 8 halves (kc4, the K layout
// [kv_heads][max_len][head_dim/2 words]) and each value dim pair of a
// block as one word (vc4, the V layout [kv_heads][head_dim/2 words]
// [max_len]), the query 8 dims at a time as one uniform word (f16
// activations) or two (f32). On lavapipe a storage load is a loop over
// the lanes whatever its width, so 16-byte words cut the loads per cache
// byte by 4 against attn_dec, and the query's loads serve 4 positions.
// Positions of a block outside the visible span weigh exactly 0 and their
// values are not used (the cache past the valid length may hold anything).
//
// Head dims over 8 (dec4_rows): first the scores of all NBL blocks (kept
// in registers), their max and weights, then the values one dim pair (one
// row of the V layout) at a time, the 8 invocations' words of a block side
// by side, so the chunk's part of each row is read through in order
// instead of head_dim/2 rows advancing together, which on lavapipe is the
// difference between one memory stream and 32 when the cache is not in
// the CPU's caches (110M model at position 990: ~22 -> ~16 ms of
// attention per token). Head dims up to 8 (dec4_online) walk the blocks
// once with an online softmax (a row is a single word there).
// Dispatch: as attn_dec: (kv_heads*batches, chunks, Tokens), then
// attn_dec_combine.

@group(0) @binding(8) var<storage, read> kc4: array<vec4<u32>>;
@group(0) @binding(9) var<storage, read> vc4: array<vec4<u32>>;

const NBL: u32 = DCH / (4u * DL); // blocks of 4 positions per invocation and chunk

@compute @workgroup_size(8)
fn attn_dec4_d8(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    dec4_online(wid, lid.x, 1u);
}
@compute @workgroup_size(8)
fn attn_dec4_g4_d8(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    dec4_online(wid, lid.x, DNB);
}
@compute @workgroup_size(8)
fn attn_dec4_d64(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    dec4_rows(wid, lid.x, 1u, 8u);
}
@compute @workgroup_size(8)
fn attn_dec4_g4_d64(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    dec4_rows(wid, lid.x, DNB, 8u);
}
@compute @workgroup_size(8)
fn attn_dec4_d128(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    dec4_rows(wid, lid.x, 1u, 16u);
}
@compute @workgroup_size(8)
fn attn_dec4_g4_d128(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    dec4_rows(wid, lid.x, DNB, 16u);
}

// halves8 is the 8 halves of word w as two vectors of 4.
fn halves8(w: vec4<u32>) -> array<vec4<f32>, 2> {
    return array<vec4<f32>, 2>(
        vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y)),
        vec4<f32>(unpack2x16float(w.z), unpack2x16float(w.w)));
}

// q8 is dims 8c .. 8c+7 of the query row starting at element qb (a
// multiple of 8) of the uniform window qu.
fn q8(qb: u32, c: u32) -> array<vec4<f32>, 2> {
    if p.q_f16 != 0u {
        return halves8(qu[(qb >> 3u) + c]);
    }
    let w = (qb >> 2u) + 2u * c;
    return array<vec4<f32>, 2>(bitcast<vec4<f32>>(qu[w]), bitcast<vec4<f32>>(qu[w + 1u]));
}

// DecSpan is what a dec4 workgroup works on: query row t, its chunk's
// first position c0 and the visible positions jlo..jhi relative to c0,
// kv head kvh and the query heads h0 .. h0+nb-1 of its batch, whose query
// rows start at qb[g] (heads past nb repeat head h0); live is false when
// the workgroup has nothing to do (the same for all its invocations).
struct DecSpan {
    live: bool,
    t: u32,
    c0: u32,
    jlo: u32,
    jhi: u32,
    kvh: u32,
    h0: u32,
    nb: u32,
    qb: array<u32, 4>,
}

fn dec_span(wid: vec3<u32>, nbm: u32) -> DecSpan {
    var d: DecSpan;
    d.t = p.row0 + wid.z;
    if d.t >= step[1] || row_pos(d.t) == NO_ROW {
        return d;
    }
    let vis = visible(d.t);
    d.c0 = wid.y * DCH;
    if d.c0 > vis.y || d.c0 + DCH <= vis.x {
        return d;
    }
    d.live = true;
    d.jlo = max(vis.x, d.c0) - d.c0;
    d.jhi = min(vis.y, d.c0 + DCH - 1u) - d.c0;
    let group = p.heads / p.kv_heads;
    d.kvh = wid.x / p.batches;
    d.h0 = d.kvh * group + (wid.x % p.batches) * nbm;
    d.nb = min(nbm, group - (wid.x % p.batches) * nbm);
    for (var g = 0u; g < nbm; g++) {
        d.qb[g] = (d.t * p.heads + d.h0 + select(0u, g, g < d.nb)) * p.head_dim;
    }
    return d;
}

// seen4 marks the positions of the block at j0 (relative to c0) that are
// visible.
fn seen4(d: DecSpan, j0: u32) -> vec4<bool> {
    let j = vec4<u32>(j0, j0 + 1u, j0 + 2u, j0 + 3u);
    return j >= vec4<u32>(d.jlo) & j <= vec4<u32>(d.jhi);
}

// block_scores is the scaled (and capped) scores of the nbm heads for
// the block at j0, -3e38 at positions not seen; nw is the most 16-byte
// words per key (a constant at each call).
fn block_scores(d: DecSpan, j0: u32, nbm: u32, nw: u32) -> array<vec4<f32>, 4> {
    let kw = p.head_dim / 8u;
    let kr = (d.kvh * p.max_len + d.c0 + j0) * kw; // the block's first key, in 16-byte words
    var qb = d.qb; // a variable: wgpu-native's naga indexes value arrays only by constants
    var s = array<vec4<f32>, 4>(); // [head]
    for (var c = 0u; c < nw; c++) {
        if c < kw {
            var qg = array<array<vec4<f32>, 2>, 4>();
            for (var g = 0u; g < nbm; g++) {
                qg[g] = q8(qb[g], c);
            }
            for (var r = 0u; r < 4u; r++) {
                let kh = halves8(kc4[kr + r * kw + c]);
                for (var g = 0u; g < nbm; g++) {
                    s[g][r] += dot(qg[g][0], kh[0]) + dot(qg[g][1], kh[1]);
                }
            }
        }
    }
    let seen = seen4(d, j0);
    for (var g = 0u; g < nbm; g++) {
        var sg = s[g] * p.scale;
        if p.cap > 0.0 {
            for (var r = 0u; r < 4u; r++) {
                sg[r] = p.cap * tanh_safe(sg[r] / p.cap);
            }
        }
        s[g] = select(vec4<f32>(-3.0e38), sg, seen);
    }
    return s;
}

// weigh4 is the sum of the 4 values v (one 16-byte word: a dim pair at 4
// positions) weighted by e, a value whose weight is 0 left out.
fn weigh4(e: vec4<f32>, vw: vec4<u32>) -> vec2<f32> {
    return select(vec2<f32>(0.0), e.x * unpack2x16float(vw.x), e.x > 0.0)
         + select(vec2<f32>(0.0), e.y * unpack2x16float(vw.y), e.y > 0.0)
         + select(vec2<f32>(0.0), e.z * unpack2x16float(vw.z), e.z > 0.0)
         + select(vec2<f32>(0.0), e.w * unpack2x16float(vw.w), e.w > 0.0);
}

// part_at is the offset in part of the partial of head g of the batch.
fn part_at(d: DecSpan, wid: vec3<u32>, i: u32, g: u32) -> u32 {
    return ((d.t * p.heads + d.h0 + g) * (p.chunks * DL) + wid.y * DL + i) * (p.head_dim + 2u);
}

// dec4_rows: nbm is the most query heads per workgroup, nw the most
// 16-byte words per key (head_dim <= 8*nw); both are constants at each
// call.
fn dec4_rows(wid: vec3<u32>, i: u32, nbm: u32, nw: u32) {
    let d = dec_span(wid, nbm);
    if !d.live {
        return;
    }
    // The scores of this invocation's blocks, their max per head, then
    // the weights exp(s - max) (0 where not seen) and their sum.
    var e = array<array<vec4<f32>, NBL>, 4>(); // [head][k]
    var m = array<f32, 4>(-3.0e38, -3.0e38, -3.0e38, -3.0e38);
    for (var k = 0u; k < NBL; k++) {
        let j0 = 4u * (i + DL * k);
        var s = array<vec4<f32>, 4>(vec4<f32>(-3.0e38), vec4<f32>(-3.0e38), vec4<f32>(-3.0e38), vec4<f32>(-3.0e38));
        if j0 <= d.jhi && j0 + 3u >= d.jlo {
            s = block_scores(d, j0, nbm, nw);
        }
        for (var g = 0u; g < nbm; g++) {
            e[g][k] = s[g];
            m[g] = max(m[g], max(max(s[g].x, s[g].y), max(s[g].z, s[g].w)));
        }
    }
    var l = array<f32, 4>();
    for (var g = 0u; g < nbm; g++) {
        for (var k = 0u; k < NBL; k++) {
            let s = e[g][k];
            e[g][k] = select(vec4<f32>(0.0), exp(s - vec4<f32>(m[g])), s > vec4<f32>(-3.0e38));
            l[g] += (e[g][k].x + e[g][k].y) + (e[g][k].z + e[g][k].w);
        }
        if g < d.nb {
            let o = part_at(d, wid, i, g);
            part[o] = m[g];
            part[o + 1u] = l[g];
        }
    }
    // The values, a row (dim pair) at a time.
    let width = p.head_dim / 2u;
    let rowv = p.max_len / 4u; // 16-byte words per value row
    let vb = d.kvh * width * rowv + d.c0 / 4u;
    for (var c = 0u; c < nw * 4u; c++) {
        if c < width {
            var a = array<vec2<f32>, 4>();
            for (var k = 0u; k < NBL; k++) {
                let j0 = 4u * (i + DL * k);
                if j0 <= d.jhi && j0 + 3u >= d.jlo {
                    let vw = vc4[vb + c * rowv + j0 / 4u];
                    for (var g = 0u; g < nbm; g++) {
                        a[g] += weigh4(e[g][k], vw);
                    }
                }
            }
            for (var g = 0u; g < nbm; g++) {
                if g < d.nb {
                    let o = part_at(d, wid, i, g) + 2u + 2u * c;
                    part[o] = a[g].x;
                    part[o + 1u] = a[g].y;
                }
            }
        }
    }
}

// dec4_online: dec4_rows for head dims up to 8 (one 16-byte word per key,
// one dim pair word per value row): the blocks walked once, folded into a
// running max, sum and output per head (one rescale per block).
fn dec4_online(wid: vec3<u32>, i: u32, nbm: u32) {
    let d = dec_span(wid, nbm);
    if !d.live {
        return;
    }
    let width = p.head_dim / 2u;
    let rowv = p.max_len / 4u;
    let vb = d.kvh * width * rowv + d.c0 / 4u;
    var m = array<f32, 4>(-3.0e38, -3.0e38, -3.0e38, -3.0e38);
    var l = array<f32, 4>();
    var acc = array<array<vec2<f32>, 4>, 4>(); // [head][dim pair]
    for (var k = 0u; k < NBL; k++) {
        let j0 = 4u * (i + DL * k);
        if j0 <= d.jhi && j0 + 3u >= d.jlo {
            var s = block_scores(d, j0, nbm, 1u);
            var f = array<f32, 4>();
            var e = array<vec4<f32>, 4>();
            for (var g = 0u; g < nbm; g++) {
                let mn = max(m[g], max(max(s[g].x, s[g].y), max(s[g].z, s[g].w)));
                f[g] = exp(m[g] - mn);
                e[g] = select(vec4<f32>(0.0), exp(s[g] - vec4<f32>(mn)), s[g] > vec4<f32>(-3.0e38));
                l[g] = l[g] * f[g] + (e[g].x + e[g].y) + (e[g].z + e[g].w);
                m[g] = mn;
            }
            for (var c = 0u; c < 4u; c++) {
                if c < width {
                    let vw = vc4[vb + c * rowv + j0 / 4u];
                    for (var g = 0u; g < nbm; g++) {
                        acc[g][c] = acc[g][c] * f[g] + weigh4(e[g], vw);
                    }
                }
            }
        }
    }
    for (var g = 0u; g < nbm; g++) {
        if g < d.nb {
            let o = part_at(d, wid, i, g);
            part[o] = m[g];
            part[o + 1u] = l[g];
            for (var c = 0u; c < 4u; c++) {
                if c < width {
                    part[o + 2u + 2u * c] = acc[g][c].x;
                    part[o + 3u + 2u * c] = acc[g][c].y;
                }
            }
        }
    }
}
