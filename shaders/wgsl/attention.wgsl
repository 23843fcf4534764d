// Attention over the KV cache, three kernels sharing one parameter block.
//
// attention / attention_f16: one workgroup per (head, token), a streaming
// softmax over chunks of 64 positions: each invocation scores one position
// of the chunk into workgroup memory, then every invocation folds the chunk
// into its running max and sum (the same values everywhere) and into the
// output dims it owns (head_dim <= 256). The prefill path.
// Dispatch: (heads, Tokens, 1).
//
// attn_split / attn_split_f16 + attn_combine: the decode path, split over
// the sequence (flash-decoding). attn_split runs one workgroup per (kv
// head, batch of up to GB query heads of its group, chunk of CHUNK
// positions, token); a chunk that holds no visible position (past the
// query's position, or before its sliding window) returns at once, so the
// work follows the valid length, not the cache length. A live workgroup
// stages its chunk's keys, then its values, into workgroup memory with
// consecutive invocations reading consecutive words (coalesced in both
// cache layouts), scores every (head, position) pair of its batch from the
// staged keys (each K and V word is read from memory once for all the
// query heads of a GQA group), takes the chunk's softmax and writes per
// head a partial (chunk max m, sum of exp(s-m) l, unnormalized output o)
// to part. attn_combine (one workgroup per (head, token)) rescales the
// partials of the visible chunks to their common max and divides.
// Dispatch: attn_split (kv_heads*batches, chunks, Tokens);
// attn_combine (heads, Tokens, 1).
// part holds [Tokens][heads][chunks][head_dim+2] floats.
//
// attn_tiled / attn_tiled_f16: the tiled prefill path. One workgroup per
// (kv head, tile of QR query rows), a query row being a (token, head)
// pair of the kv head's GQA group (rows ordered token-major, so a tile
// holds consecutive tokens and all the heads of each). The workgroup walks
// the union of its rows' visible positions a chunk of CHUNK at a time:
// it stages the chunk's keys in workgroup memory once for all its rows
// (as attn_split does), scores every (row, position) pair (positions a row
// does not see weigh exactly 0), folds the chunk into each row's running
// max and sum (online softmax, one invocation per row), then stages the
// chunk's values and updates each row's unnormalized output, which lives
// in part, f32, at out's index (each (row, output word) pair belongs to one
// invocation for the whole walk, so no invocation reads another's storage
// writes), rescaled to the new max; the last chunk divides by the sum and
// writes out.
// Dispatch: (kv_heads, ceil(rows/QR), 1).
//
// No kernel here reads a workgroup word it has not written, so the Vulkan
// module goes without naga's zero-initialization of workgroup memory
// (lavapipe compiles that store of the 8 KiB tile for minutes); the marker
// line below tells shaders/internal/spirvgen:
// spirvgen: no-workgroup-zero-init
//
// The cache is bound as u32 words in either layout of kv.wgsl: the plain
// kernels read f32 bit patterns, the _f16 ones binary16 halves packed two
// per word along head_dim. In attention, with f32 words invocation i owns
// dims i, i+64, i+128 and i+192; with packed words it owns the pairs of
// words i and i+64, so each value word it reads serves two dims (acc[2b]
// and acc[2b+1] are dims 2(i+64b) and 2(i+64b)+1) and consecutive
// positions stay contiguous.

struct AttnParams {
    heads: u32,
    kv_heads: u32,
    head_dim: u32,
    max_len: u32,
    scale: f32,
    cap: f32,    // 0: no soft cap
    window: u32, // 0: no sliding window
    chunks: u32,  // attn_split: partial slots per (token, head), ceil(max_len/CHUNK)
    batches: u32, // attn_split: head batches per kv head, ceil(group/GB)
    pos_at: u32,  // 0: row t at position step[0]+t; else at step[pos_at+t] (batched steps)
    row0: u32,    // first row of the dispatch (batched steps: one dispatch per row)
    rows: u32,    // attn_tiled: query rows, Tokens * (heads / kv_heads)
    out_f16: u32, // 1: out is an f16 activation (packed halves)
    q_f16: u32,   // 1: q is an f16 activation (packed halves)
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> p: AttnParams;
@group(0) @binding(1) var<storage, read> step: array<u32>;
@group(0) @binding(2) var<storage, read> q_w: array<u32>;
@group(0) @binding(3) var<storage, read> kc: array<u32>;
@group(0) @binding(4) var<storage, read> vc: array<u32>;
@group(0) @binding(5) var<storage, read_write> out_w: array<atomic<u32>>;
@group(0) @binding(6) var<storage, read_write> part: array<f32>;
// qu: the query rows as a 64 KiB uniform window (attn_dec; the others bind
// a dummy there), words as q_w's (packed halves when q_f16).
@group(0) @binding(7) var<uniform> qu: array<vec4<u32>, 4096>;

// activations: q, out

// acc_at and acc_set hold attn_tiled's running output of element i in
// part (f32, bound with room for every row) until the last chunk, which
// writes out: packed halves could not hold the sums between chunks, and
// one place for both policies keeps the kernel free of a branch that
// lavapipe would run both sides of.
fn acc_at(i: u32) -> f32 {
    return part[i];
}

fn acc_set(i: u32, v: f32, last: bool) {
    if last {
        out_set(i, v);
    } else {
        part[i] = v;
    }
}

const WG: u32 = 64u;
const NO_ROW: u32 = 0xffffffffu; // the position of a batched step's unused row

// include: row_pos
var<workgroup> sc: array<f32, 64>;

@compute @workgroup_size(64)
fn attention(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    attend(wid.x, p.row0 + wid.y, lid.x, false);
}

@compute @workgroup_size(64)
fn attention_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    attend(wid.x, p.row0 + wid.y, lid.x, true);
}

// key_dot is Q row qb times the key at word kr of the cache.
fn key_dot(qb: u32, kr: u32, packed: bool) -> f32 {
    var s = 0.0;
    if packed {
        let pairs = p.head_dim / 2u;
        for (var w = 0u; w < pairs; w++) {
            s += dot(vec2<f32>(q_at(qb + 2u * w), q_at(qb + 2u * w + 1u)), unpack2x16float(kc[kr + w]));
        }
        if (p.head_dim & 1u) == 1u {
            s += q_at(qb + p.head_dim - 1u) * unpack2x16float(kc[kr + pairs]).x;
        }
    } else {
        for (var d = 0u; d < p.head_dim; d++) {
            s += q_at(qb + d) * bitcast<f32>(kc[kr + d]);
        }
    }
    return s;
}

// out_dim is the output dim accumulator a of invocation i holds.
fn out_dim(i: u32, a: u32, packed: bool) -> u32 {
    if packed {
        return 2u * (i + (a >> 1u) * WG) + (a & 1u);
    }
    return i + a * WG;
}

fn attend(h: u32, t: u32, i: u32, packed: bool) {
    if t >= step[1] || row_pos(t) == NO_ROW {
        return; // uniform across the workgroup
    }
    let qp = min(row_pos(t), p.max_len - 1u);
    var lo = 0u;
    if p.window > 0u && qp + 1u > p.window {
        lo = qp + 1u - p.window;
    }
    // width: words per key, and rows of values per kv head.
    var width = p.head_dim;
    if packed {
        width = (p.head_dim + 1u) / 2u;
    }
    let kvh = h / (p.heads / p.kv_heads);
    let qb = (t * p.heads + h) * p.head_dim;
    let kb = kvh * p.max_len * width;
    let vb = kvh * width * p.max_len;

    var m = -3.0e38;
    var l = 0.0;
    var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
    for (var c0 = lo; c0 <= qp; c0 += WG) {
        let pi = c0 + i;
        var s = -3.0e38;
        if pi <= qp {
            s = key_dot(qb, kb + pi * width, packed) * p.scale;
            if p.cap > 0.0 {
                s = p.cap * tanh_safe(s / p.cap);
            }
        }
        sc[i] = s;
        workgroupBarrier();
        let n = min(WG, qp + 1u - c0);
        var cm = m;
        for (var j = 0u; j < n; j++) {
            cm = max(cm, sc[j]);
        }
        let rescale = exp(m - cm);
        l *= rescale;
        for (var a = 0u; a < 4u; a++) {
            acc[a] *= rescale;
        }
        for (var j = 0u; j < n; j++) {
            let e = exp(sc[j] - cm);
            l += e;
            let pos = c0 + j;
            if packed {
                for (var b = 0u; b < 2u; b++) {
                    let w = i + b * WG;
                    if w < width {
                        let v2 = unpack2x16float(vc[vb + w * p.max_len + pos]);
                        acc[2u * b] += e * v2.x;
                        acc[2u * b + 1u] += e * v2.y;
                    }
                }
            } else {
                for (var a = 0u; a < 4u; a++) {
                    let d = i + a * WG;
                    if d < p.head_dim {
                        acc[a] += e * bitcast<f32>(vc[vb + d * p.max_len + pos]);
                    }
                }
            }
        }
        m = cm;
        workgroupBarrier();
    }
    for (var a = 0u; a < 4u; a++) {
        let d = out_dim(i, a, packed);
        if d < p.head_dim {
            out_set(qb + d, acc[a] / l);
        }
    }
}

// ---- Decode split over the sequence (flash-decoding) ----

const CHUNK: u32 = 64u; // positions per attn_split workgroup
const GB: u32 = 8u;     // query heads per attn_split workgroup
// TILE words of workgroup memory stage keys (rows of width+1 words, the
// pad keeping the rows of consecutive positions in different banks) and
// then values (rows of CHUNK+1 words); 64 rows of 33 words.
const TILE: u32 = 2112u;
var<workgroup> tile: array<u32, 2112>;
var<workgroup> ws: array<f32, 512>; // [GB][CHUNK]: scores, then exp(score - max)
var<workgroup> wmax: array<f32, 8>; // [GB]: the chunk's max score per head

@compute @workgroup_size(64)
fn attn_split(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    split(wid, lid.x, false);
}

@compute @workgroup_size(64)
fn attn_split_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    split(wid, lid.x, true);
}

// visible is the first and last cache position query row t attends to.
fn visible(t: u32) -> vec2<u32> {
    let qp = min(row_pos(t), p.max_len - 1u);
    var lo = 0u;
    if p.window > 0u && qp + 1u > p.window {
        lo = qp + 1u - p.window;
    }
    return vec2<u32>(lo, qp);
}

// tile_dot is query row qb times the key staged at word kr of tile.
fn tile_dot(qb: u32, kr: u32, width: u32, packed: bool) -> f32 {
    var s = 0.0;
    if packed {
        let pairs = p.head_dim / 2u;
        for (var w = 0u; w < pairs; w++) {
            s += dot(vec2<f32>(q_at(qb + 2u * w), q_at(qb + 2u * w + 1u)), unpack2x16float(tile[kr + w]));
        }
        if (p.head_dim & 1u) == 1u {
            s += q_at(qb + p.head_dim - 1u) * unpack2x16float(tile[kr + pairs]).x;
        }
    } else {
        for (var d = 0u; d < width; d++) {
            s += q_at(qb + d) * bitcast<f32>(tile[kr + d]);
        }
    }
    return s;
}

fn split(wid: vec3<u32>, i: u32, packed: bool) {
    let t = p.row0 + wid.z;
    if t >= step[1] || row_pos(t) == NO_ROW {
        return; // uniform across the workgroup, as are all the exits below
    }
    let vis = visible(t);
    let c0 = wid.y * CHUNK;
    if c0 > vis.y || c0 + CHUNK <= vis.x {
        return; // no visible position in this chunk
    }
    // Visible positions of the chunk, relative to c0.
    let jlo = max(vis.x, c0) - c0;
    let jhi = min(vis.y, c0 + CHUNK - 1u) - c0;
    let group = p.heads / p.kv_heads;
    let kvh = wid.x / p.batches;
    let hb = wid.x % p.batches;
    let h0 = kvh * group + hb * GB;
    let nb = min(GB, group - hb * GB);
    var width = p.head_dim;
    if packed {
        width = (p.head_dim + 1u) / 2u;
    }
    let qb = (t * p.heads + h0) * p.head_dim; // query row of head h0; the batch's rows follow

    // Scores, a tile of kt keys at a time.
    let kb = (kvh * p.max_len + c0) * width;
    let kt = min(CHUNK, TILE / (width + 1u));
    for (var k0 = jlo - jlo % kt; k0 <= jhi; k0 += kt) {
        let nk = min(k0 + kt, jhi + 1u) - k0;
        for (var e = i; e < nk * width; e += WG) {
            let r = e / width;
            tile[r * (width + 1u) + e - r * width] = kc[kb + k0 * width + e];
        }
        workgroupBarrier();
        for (var e = i; e < nb * nk; e += WG) {
            let g = e / nk;
            let j = e - g * nk;
            if k0 + j >= jlo {
                var s = tile_dot(qb + g * p.head_dim, j * (width + 1u), width, packed) * p.scale;
                if p.cap > 0.0 {
                    s = p.cap * tanh_safe(s / p.cap);
                }
                ws[g * CHUNK + k0 + j] = s;
            }
        }
        workgroupBarrier();
    }

    // The chunk's softmax: max per head, then the weights.
    if i < nb {
        var m = -3.0e38;
        for (var j = jlo; j <= jhi; j++) {
            m = max(m, ws[i * CHUNK + j]);
        }
        wmax[i] = m;
    }
    workgroupBarrier();
    for (var e = i; e < nb * CHUNK; e += WG) {
        let j = e % CHUNK;
        if j >= jlo && j <= jhi {
            ws[e] = exp(ws[e] - wmax[e / CHUNK]);
        }
    }
    workgroupBarrier();
    let stride = p.head_dim + 2u;
    let slot = (t * p.heads + h0) * p.chunks + wid.y; // head h0's partial; head h0+g is g*chunks further
    if i < nb {
        var l = 0.0;
        for (var j = jlo; j <= jhi; j++) {
            l += ws[i * CHUNK + j];
        }
        let o = (slot + i * p.chunks) * stride;
        part[o] = wmax[i];
        part[o + 1u] = l;
    }

    // Weighted values, a tile of vt value rows (words of head_dim) at a time.
    let vb = kvh * width * p.max_len + c0;
    let vt = TILE / (CHUNK + 1u);
    let span = jhi + 1u - jlo;
    for (var w0 = 0u; w0 < width; w0 += vt) {
        let nr = min(vt, width - w0);
        for (var e = i; e < nr * span; e += WG) {
            let r = e / span;
            let j = jlo + e - r * span;
            tile[r * (CHUNK + 1u) + j] = vc[vb + (w0 + r) * p.max_len + j];
        }
        workgroupBarrier();
        for (var e = i; e < nb * nr; e += WG) {
            let g = e / nr;
            let r = e - g * nr;
            let row = r * (CHUNK + 1u);
            let o = (slot + g * p.chunks) * stride + 2u;
            if packed {
                var a = vec2<f32>(0.0);
                for (var j = jlo; j <= jhi; j++) {
                    a += ws[g * CHUNK + j] * unpack2x16float(tile[row + j]);
                }
                let d = 2u * (w0 + r);
                part[o + d] = a.x;
                if d + 1u < p.head_dim {
                    part[o + d + 1u] = a.y;
                }
            } else {
                var a = 0.0;
                for (var j = jlo; j <= jhi; j++) {
                    a += ws[g * CHUNK + j] * bitcast<f32>(tile[row + j]);
                }
                part[o + w0 + r] = a;
            }
        }
        workgroupBarrier();
    }
}

// attn_combine merges the partials of the chunks query row t of head h
// sees; invocation i owns dims i, i+64, i+128 and i+192.
@compute @workgroup_size(64)
fn attn_combine(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let h = wid.x;
    let t = p.row0 + wid.y;
    let i = lid.x;
    if t >= step[1] || row_pos(t) == NO_ROW {
        return;
    }
    let vis = visible(t);
    let stride = p.head_dim + 2u;
    let base = (t * p.heads + h) * p.chunks;
    var m = -3.0e38;
    for (var c = vis.x / CHUNK; c <= vis.y / CHUNK; c++) {
        m = max(m, part[(base + c) * stride]);
    }
    var l = 0.0;
    var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
    for (var c = vis.x / CHUNK; c <= vis.y / CHUNK; c++) {
        let o = (base + c) * stride;
        let f = exp(part[o] - m);
        l += f * part[o + 1u];
        for (var a = 0u; a < 4u; a++) {
            let d = i + a * WG;
            if d < p.head_dim {
                acc[a] += f * part[o + 2u + d];
            }
        }
    }
    let ob = (t * p.heads + h) * p.head_dim;
    for (var a = 0u; a < 4u; a++) {
        let d = i + a * WG;
        if d < p.head_dim {
            out_set(ob + d, acc[a] / l);
        }
    }
}

// ---- Decode on CPU-class devices: one position per lane, no barriers ----
//
// attn_dec_d* (one query head per workgroup) and attn_dec_g4_d* (up to 4
// query heads of a GQA group per workgroup, each K and V word read once
// for them), for head dims up to 8, 64 or 128, with an f32 or (_f16) a
// packed binary16 cache: one workgroup of DL invocations per
// (kv head, head batch, chunk of DCH positions, token). Invocation i walks
// the visible positions c0+i, c0+i+DL, ... of its chunk with an online
// softmax of its own (running max, sum and unnormalized output per head,
// all in registers: the loops over a row's words have constant bounds, so
// the compilers unroll them and index the accumulators with constants),
// reading each key and value word of its positions once, the query from
// the uniform window qu (a uniform load is one scalar load on lavapipe, a
// storage load a loop over the lanes), and writes its partial (max, sum,
// output) to part: [Tokens][heads][chunks*DL][head_dim+2]. No workgroup
// memory and no barrier. A chunk with no visible position returns at once.
// attn_dec_combine (one workgroup per (head, token)) merges the partials
// of the visible chunks. Head dims up to 128. For an f16 cache whose head
// dim is a multiple of 8 and whose length is a multiple of 4, attndec.wgsl's
// attn_dec4 takes attn_dec's place (16-byte loads, blocks of 4 positions).
// Dispatch: attn_dec* (kv_heads*batches, chunks, Tokens);
// attn_dec_combine (heads, Tokens, 1).

const DL: u32 = 8u;     // invocations per attn_dec workgroup
const DCH: u32 = 256u;  // positions per attn_dec workgroup
const DNB: u32 = 4u;    // query heads per attn_dec_g4 workgroup
const DAP: u32 = 64u;   // accumulator pairs per head: head dims up to 128

// Entry points per largest head dim (8, 64, 128: the loops over a row's
// dim pairs run that many times, unrolled), heads per workgroup (1, or
// DNB for GQA groups) and cache type.
@compute @workgroup_size(8)
fn attn_dec_d8(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    dec(wid, lid.x, false, 1u, 4u);
}
@compute @workgroup_size(8)
fn attn_dec_d8_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    dec(wid, lid.x, true, 1u, 4u);
}
@compute @workgroup_size(8)
fn attn_dec_g4_d8(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    dec(wid, lid.x, false, DNB, 4u);
}
@compute @workgroup_size(8)
fn attn_dec_g4_d8_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    dec(wid, lid.x, true, DNB, 4u);
}
@compute @workgroup_size(8)
fn attn_dec_d64(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    dec(wid, lid.x, false, 1u, 32u);
}
@compute @workgroup_size(8)
fn attn_dec_d64_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    dec(wid, lid.x, true, 1u, 32u);
}
@compute @workgroup_size(8)
fn attn_dec_g4_d64(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    dec(wid, lid.x, false, DNB, 32u);
}
@compute @workgroup_size(8)
fn attn_dec_g4_d64_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    dec(wid, lid.x, true, DNB, 32u);
}
@compute @workgroup_size(8)
fn attn_dec_d128(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    dec(wid, lid.x, false, 1u, 64u);
}
@compute @workgroup_size(8)
fn attn_dec_d128_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    dec(wid, lid.x, true, 1u, 64u);
}
@compute @workgroup_size(8)
fn attn_dec_g4_d128(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    dec(wid, lid.x, false, DNB, 64u);
}
@compute @workgroup_size(8)
fn attn_dec_g4_d128_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    dec(wid, lid.x, true, DNB, 64u);
}

// qu_at is q_at read from the uniform window qu.
fn qu_at(i: u32) -> f32 {
    let h = p.q_f16 != 0u;
    let j = select(i, i >> 1u, h);
    return act_value(qu[j >> 2u][j & 3u], i, h);
}

// qpair is dims 2c and 2c+1 of the query row starting at word qb (0 past
// head_dim).
fn qpair(qb: u32, c: u32) -> vec2<f32> {
    let a = qb + 2u * c;
    let b = a + 1u;
    var r = vec2<f32>(qu_at(a), qu_at(b));
    if 2u * c + 1u >= p.head_dim {
        r.y = 0.0;
    }
    return r;
}

// dec: nbm is the most query heads per workgroup, np the most dim pairs
// per head (head_dim <= 2*np); both are constants at each call.
fn dec(wid: vec3<u32>, i: u32, packed: bool, nbm: u32, np: u32) {
    let t = p.row0 + wid.z;
    if t >= step[1] || row_pos(t) == NO_ROW {
        return; // uniform across the workgroup, as are all the exits below
    }
    let vis = visible(t);
    let c0 = wid.y * DCH;
    if c0 > vis.y || c0 + DCH <= vis.x {
        return;
    }
    let jlo = max(vis.x, c0) - c0;
    let jhi = min(vis.y, c0 + DCH - 1u) - c0;
    let group = p.heads / p.kv_heads;
    let kvh = wid.x / p.batches;
    let hb = wid.x % p.batches;
    let h0 = kvh * group + hb * nbm;
    let nb = min(nbm, group - hb * nbm);
    var width = p.head_dim;
    if packed {
        width = (p.head_dim + 1u) / 2u;
    }
    // Query rows per head of the batch (heads past nb repeat head h0).
    var qb = array<u32, 4>();
    for (var g = 0u; g < nbm; g++) {
        qb[g] = (t * p.heads + h0 + select(0u, g, g < nb)) * p.head_dim;
    }
    var m = array<f32, 4>(-3.0e38, -3.0e38, -3.0e38, -3.0e38);
    var l = array<f32, 4>();
    var acc = array<vec2<f32>, 256>(); // [DNB][DAP]: dims 2c, 2c+1 of head g at g*DAP+c
    let kb = kvh * p.max_len * width;
    let vb = kvh * width * p.max_len;
    // This invocation's first position of the chunk at or past jlo.
    var j = jlo - jlo % DL + i;
    if j < jlo {
        j += DL;
    }
    for (; j <= jhi; j += DL) {
        let pos = c0 + j;
        let kr = kb + pos * width;
        var s = array<f32, 4>();
        for (var c = 0u; c < np; c++) {
            if 2u * c < p.head_dim {
                var kv: vec2<f32>;
                if packed {
                    kv = unpack2x16float(kc[kr + c]);
                } else {
                    kv = vec2<f32>(bitcast<f32>(kc[kr + 2u * c]), 0.0);
                    if 2u * c + 1u < p.head_dim {
                        kv.y = bitcast<f32>(kc[kr + 2u * c + 1u]);
                    }
                }
                for (var g = 0u; g < nbm; g++) {
                    s[g] += dot(qpair(qb[g], c), kv);
                }
            }
        }
        var f = array<f32, 4>();
        var e = array<f32, 4>();
        for (var g = 0u; g < nbm; g++) {
            var sg = s[g] * p.scale;
            if p.cap > 0.0 {
                sg = p.cap * tanh_safe(sg / p.cap);
            }
            let mn = max(m[g], sg);
            f[g] = exp(m[g] - mn);
            e[g] = exp(sg - mn);
            l[g] = l[g] * f[g] + e[g];
            m[g] = mn;
        }
        for (var c = 0u; c < np; c++) {
            if 2u * c < p.head_dim {
                var v2: vec2<f32>;
                if packed {
                    v2 = unpack2x16float(vc[vb + c * p.max_len + pos]);
                } else {
                    v2 = vec2<f32>(bitcast<f32>(vc[vb + 2u * c * p.max_len + pos]), 0.0);
                    if 2u * c + 1u < p.head_dim {
                        v2.y = bitcast<f32>(vc[vb + (2u * c + 1u) * p.max_len + pos]);
                    }
                }
                for (var g = 0u; g < nbm; g++) {
                    acc[g * DAP + c] = acc[g * DAP + c] * f[g] + e[g] * v2;
                }
            }
        }
    }
    let stride = p.head_dim + 2u;
    let slots = p.chunks * DL;
    for (var g = 0u; g < nbm; g++) {
        if g < nb {
            let o = ((t * p.heads + h0 + g) * slots + wid.y * DL + i) * stride;
            part[o] = m[g];
            part[o + 1u] = l[g];
            for (var c = 0u; c < np; c++) {
                let d = 2u * c;
                if d < p.head_dim {
                    part[o + 2u + d] = acc[g * DAP + c].x;
                }
                if d + 1u < p.head_dim {
                    part[o + 3u + d] = acc[g * DAP + c].y;
                }
            }
        }
    }
}

// attn_dec_combine merges the partials attn_dec wrote for query row t of
// head h (the DL partials of each visible chunk; an invocation that saw no
// position left max -3e38 and sum 0); invocation i owns dims i and i+64.
@compute @workgroup_size(64)
fn attn_dec_combine(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let h = wid.x;
    let t = p.row0 + wid.y;
    let i = lid.x;
    if t >= step[1] || row_pos(t) == NO_ROW {
        return;
    }
    let vis = visible(t);
    let stride = p.head_dim + 2u;
    let slots = p.chunks * DL;
    let base = (t * p.heads + h) * slots;
    let s0 = (vis.x / DCH) * DL;
    let s1 = (vis.y / DCH + 1u) * DL;
    var m = -3.0e38;
    for (var s = s0; s < s1; s++) {
        m = max(m, part[(base + s) * stride]);
    }
    var l = 0.0;
    var acc = vec2<f32>(0.0);
    for (var s = s0; s < s1; s++) {
        let o = (base + s) * stride;
        let f = exp(part[o] - m);
        l += f * part[o + 1u];
        if i < p.head_dim {
            acc.x += f * part[o + 2u + i];
        }
        if i + WG < p.head_dim {
            acc.y += f * part[o + 2u + i + WG];
        }
    }
    let ob = (t * p.heads + h) * p.head_dim;
    if i < p.head_dim {
        out_set(ob + i, acc.x / l);
    }
    if i + WG < p.head_dim {
        out_set(ob + i + WG, acc.y / l);
    }
}

// ---- Prefill tiled over queries and keys ----

const QR: u32 = 8u; // query rows per attn_tiled workgroup (ws holds QR*CHUNK scores)
var<workgroup> rl: array<f32, 8>; // [QR]: running sum of exp(score - max)
var<workgroup> rf: array<f32, 8>; // [QR]: this chunk's rescale of the running output

@compute @workgroup_size(64)
fn attn_tiled(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    tiled(wid, lid.x, false);
}

@compute @workgroup_size(64)
fn attn_tiled_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    tiled(wid, lid.x, true);
}

// TRow is query row g of a tile: its token, head and visible positions
// (lo > hi when the row is not live).
struct TRow {
    t: u32,
    h: u32,
    lo: u32,
    hi: u32,
}

fn tile_row(tile0: u32, kvh: u32, g: u32) -> TRow {
    let group = p.heads / p.kv_heads;
    let rho = tile0 + g;
    let t = p.row0 + rho / group;
    var r = TRow(t, kvh * group + rho % group, 1u, 0u);
    if rho < p.rows && t < step[1] && row_pos(t) != NO_ROW {
        let v = visible(t);
        r.lo = v.x;
        r.hi = v.y;
    }
    return r;
}

// tile_span is the union of the visible positions of a tile's rows (first,
// last), or (1, 0) when no row is live.
fn tile_span(tile0: u32, kvh: u32) -> vec2<u32> {
    var lo = 0xffffffffu;
    var hi = 0u;
    var live = false;
    for (var g = 0u; g < QR; g++) {
        let r = tile_row(tile0, kvh, g);
        if r.lo <= r.hi {
            lo = min(lo, r.lo);
            hi = max(hi, r.hi);
            live = true;
        }
    }
    return select(vec2<u32>(1u, 0u), vec2<u32>(lo, hi), live);
}

fn tiled(wid: vec3<u32>, i: u32, packed: bool) {
    let kvh = wid.x;
    let tile0 = wid.y * QR;
    let span = tile_span(tile0, kvh);
    if span.x > span.y {
        return; // no live row (uniform: every invocation computes the same)
    }
    let lo = span.x;
    let hi = span.y;
    var width = p.head_dim;
    if packed {
        width = (p.head_dim + 1u) / 2u;
    }
    // Per row: the query row's first word (row 0 for rows that are not
    // live, so no read leaves q) and the visible positions.
    var qrow: array<u32, 8>;
    var rlo: array<u32, 8>;
    var rhi: array<u32, 8>;
    for (var g = 0u; g < QR; g++) {
        let r = tile_row(tile0, kvh, g);
        rlo[g] = r.lo;
        rhi[g] = r.hi;
        qrow[g] = 0u;
        if r.lo <= r.hi {
            qrow[g] = (r.t * p.heads + r.h) * p.head_dim;
        }
    }
    if i < QR {
        wmax[i] = -3.0e38;
        rl[i] = 0.0;
    }
    let kt = min(CHUNK, TILE / (width + 1u));
    let vt = TILE / (CHUNK + 1u);
    var first = true;
    for (var c0 = lo; c0 <= hi; c0 += CHUNK) {
        let n = min(CHUNK, hi + 1u - c0); // positions of this chunk
        let last = c0 + n > hi;           // the walk's last chunk: divide by the sums
        // Scores, a tile of kt keys at a time; ws[g*CHUNK + j] for position c0+j.
        let kb = (kvh * p.max_len + c0) * width;
        for (var k0 = 0u; k0 < n; k0 += kt) {
            let nk = min(kt, n - k0);
            for (var e = i; e < nk * width; e += WG) {
                let r = e / width;
                tile[r * (width + 1u) + e - r * width] = kc[kb + k0 * width + e];
            }
            workgroupBarrier();
            // Invocation i scores key k0+i against every row: each staged
            // key word is read once for the QR rows, and the query words
            // are read at addresses every invocation shares.
            if i < nk {
                var s = array<f32, 8>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
                let kr = i * (width + 1u);
                if packed {
                    let pairs = p.head_dim / 2u;
                    for (var w = 0u; w < pairs; w++) {
                        let kv = unpack2x16float(tile[kr + w]);
                        for (var g = 0u; g < QR; g++) {
                            let qb = qrow[g] + 2u * w;
                            s[g] += q_at(qb) * kv.x + q_at(qb + 1u) * kv.y;
                        }
                    }
                    if (p.head_dim & 1u) == 1u {
                        let kx = unpack2x16float(tile[kr + pairs]).x;
                        for (var g = 0u; g < QR; g++) {
                            s[g] += q_at(qrow[g] + p.head_dim - 1u) * kx;
                        }
                    }
                } else {
                    for (var w = 0u; w < width; w++) {
                        let kv = bitcast<f32>(tile[kr + w]);
                        for (var g = 0u; g < QR; g++) {
                            s[g] += q_at(qrow[g] + w) * kv;
                        }
                    }
                }
                let pos = c0 + k0 + i;
                for (var g = 0u; g < QR; g++) {
                    var sg = -3.0e38;
                    if pos >= rlo[g] && pos <= rhi[g] {
                        sg = s[g] * p.scale;
                        if p.cap > 0.0 {
                            sg = p.cap * tanh_safe(sg / p.cap);
                        }
                    }
                    ws[g * CHUNK + k0 + i] = sg;
                }
            }
            workgroupBarrier();
        }
        // Online softmax: the new max per row, then the weights (0 where
        // the row does not see the position), then the new sum.
        if i < QR {
            var m = wmax[i];
            for (var j = 0u; j < n; j++) {
                m = max(m, ws[i * CHUNK + j]);
            }
            rf[i] = exp(wmax[i] - m);
            wmax[i] = m;
        }
        workgroupBarrier();
        for (var e = i; e < QR * CHUNK; e += WG) {
            let g = e / CHUNK;
            let j = e - g * CHUNK;
            if j < n {
                let pos = c0 + j;
                var w = 0.0;
                if pos >= rlo[g] && pos <= rhi[g] {
                    w = exp(ws[e] - wmax[g]);
                }
                ws[e] = w;
            }
        }
        workgroupBarrier();
        if i < QR {
            var l = 0.0;
            for (var j = 0u; j < n; j++) {
                l += ws[i * CHUNK + j];
            }
            rl[i] = rl[i] * rf[i] + l;
        }
        // Weighted values, a tile of vt value rows (words of head_dim) at a time.
        let vb = kvh * width * p.max_len + c0;
        for (var w0 = 0u; w0 < width; w0 += vt) {
            let nr = min(vt, width - w0);
            for (var e = i; e < nr * n; e += WG) {
                let r = e / n;
                let j = e - r * n;
                tile[r * (CHUNK + 1u) + j] = vc[vb + (w0 + r) * p.max_len + j];
            }
            workgroupBarrier();
            // Invocation i owns value word w0+i of every row: each staged
            // value word is read once for the QR rows, the weights at
            // addresses every invocation shares.
            if i < nr {
                let row = i * (CHUNK + 1u);
                var a = array<vec2<f32>, 8>();
                for (var j = 0u; j < n; j++) {
                    var v2 = vec2<f32>(bitcast<f32>(tile[row + j]), 0.0);
                    if packed {
                        v2 = unpack2x16float(tile[row + j]);
                    }
                    for (var g = 0u; g < QR; g++) {
                        a[g] += ws[g * CHUNK + j] * v2;
                    }
                }
                for (var g = 0u; g < QR; g++) {
                    if rlo[g] <= rhi[g] {
                        var r = a[g];
                        let o = qrow[g];
                        let f = rf[g];
                        if packed {
                            let d = 2u * (w0 + i);
                            let two = d + 1u < p.head_dim;
                            if !first {
                                r.x += f * acc_at(o + d);
                                if two {
                                    r.y += f * acc_at(o + d + 1u);
                                }
                            }
                            if last {
                                r /= rl[g];
                            }
                            acc_set(o + d, r.x, last);
                            if two {
                                acc_set(o + d + 1u, r.y, last);
                            }
                        } else {
                            let d = w0 + i;
                            if !first {
                                r.x += f * acc_at(o + d);
                            }
                            if last {
                                r.x /= rl[g];
                            }
                            acc_set(o + d, r.x, last);
                        }
                    }
                }
            }
            workgroupBarrier();
        }
        first = false;
    }
}

// ---- attn_tiled_d64_f16: attn_tiled for CPU-class devices, head_dim 64, f16 cache ----
//
// The same walk as attn_tiled (one workgroup per kv head and tile of QR
// query rows, a chunk of CHUNK positions at a time, online softmax), with
// the work split for a device whose every memory load is a loop over the
// lanes of a SIMD batch (lavapipe: storage and workgroup loads alike):
// invocation i serves row g = i / 8 of the tile and slot sl = i % 8. It
// holds its row's query (32 dim pairs) in registers for the whole walk,
// scores keys sl, sl+8, ..., sl+56 of each chunk with vec4 loads of the
// staged keys (8 per key), and owns output words sl, sl+8, sl+16, sl+24 of
// its row (dims 2w and 2w+1), accumulated in registers over the walk and
// written once at its end: per vec4 of staged values, 4 positions of one
// word. Eight lanes of a row reduce its max and sum through wm and wl.
var<workgroup> t4: array<vec4<u32>, 512>; // a chunk's keys [64][8 vec4], then its values [32 words][16 vec4]
var<workgroup> w4s: array<vec4<f32>, 128>; // [QR][CHUNK/4]: the chunk's weights exp(s - max), 0 where unseen
var<workgroup> wm: array<f32, 64>;        // [QR][8]: the slots' chunk maxima
var<workgroup> wl: array<f32, 64>;        // [QR][8]: the slots' chunk sums

// half4 is the 8 halves of the vec4 of packed words k, weighted by the 4
// dim pairs (or positions) a, b, c and d.
fn half4(k: vec4<u32>, a: vec2<f32>, b: vec2<f32>, c: vec2<f32>, d: vec2<f32>) -> f32 {
    return dot(a, unpack2x16float(k.x)) + dot(b, unpack2x16float(k.y)) + dot(c, unpack2x16float(k.z)) + dot(d, unpack2x16float(k.w));
}

@compute @workgroup_size(64)
fn attn_tiled_d64_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = lid.x;
    let kvh = wid.x;
    let tile0 = wid.y * QR;
    let span = tile_span(tile0, kvh);
    if span.x > span.y {
        return; // no live row (uniform across the workgroup)
    }
    let lo = span.x;
    let hi = span.y;
    let g = i >> 3u;
    let sl = i & 7u;
    let me = tile_row(tile0, kvh, g);
    let mine = me.lo <= me.hi;
    var qb = 0u; // rows that are not live read row 0 and write nothing
    if mine {
        qb = (me.t * p.heads + me.h) * 64u;
    }
    var qr: array<vec2<f32>, 32>;
    for (var w = 0u; w < 32u; w++) {
        qr[w] = vec2<f32>(q_at(qb + 2u * w), q_at(qb + 2u * w + 1u));
    }
    if i < QR {
        wmax[i] = -3.0e38;
        rl[i] = 0.0;
    }
    var acc = array<vec2<f32>, 4>();
    for (var c0 = lo; c0 <= hi; c0 += CHUNK) {
        let n = min(CHUNK, hi + 1u - c0);
        // Keys: word w of key j at t4[8j + w/4][w%4] (0 past the chunk).
        let kb = (kvh * p.max_len + c0) * 32u;
        for (var e = i; e < 2048u; e += WG) {
            var word = 0u;
            if (e >> 5u) < n {
                word = kc[kb + e];
            }
            t4[e >> 2u][e & 3u] = word;
        }
        workgroupBarrier();
        var sc: array<f32, 8>;
        var m = -3.0e38;
        for (var k = 0u; k < 8u; k++) {
            let j = sl + 8u * k;
            var s = 0.0;
            for (var w4 = 0u; w4 < 8u; w4++) {
                s += half4(t4[8u * j + w4], qr[4u * w4], qr[4u * w4 + 1u], qr[4u * w4 + 2u], qr[4u * w4 + 3u]);
            }
            let pos = c0 + j;
            var sg = -3.0e38;
            if j < n && pos >= me.lo && pos <= me.hi {
                sg = s * p.scale;
                if p.cap > 0.0 {
                    sg = p.cap * tanh_safe(sg / p.cap);
                }
            }
            sc[k] = sg;
            m = max(m, sg);
        }
        wm[i] = m;
        workgroupBarrier();
        // The row's new max, this chunk's weights and their sum.
        let mold = wmax[g];
        var mnew = mold;
        for (var s2 = 0u; s2 < 8u; s2++) {
            mnew = max(mnew, wm[8u * g + s2]);
        }
        let f = exp(mold - mnew);
        var l = 0.0;
        for (var k = 0u; k < 8u; k++) {
            let j = sl + 8u * k;
            let pos = c0 + j;
            var e = 0.0;
            if j < n && pos >= me.lo && pos <= me.hi {
                e = exp(sc[k] - mnew);
            }
            w4s[16u * g + (j >> 2u)][j & 3u] = e;
            l += e;
        }
        wl[i] = l;
        workgroupBarrier();
        if sl == 0u {
            var lsum = 0.0;
            for (var s2 = 0u; s2 < 8u; s2++) {
                lsum += wl[8u * g + s2];
            }
            rl[g] = rl[g] * f + lsum;
            wmax[g] = mnew;
        }
        // Values: positions 4v..4v+3 of word w at t4[16w + v] (0 past the chunk).
        let vb = kvh * 32u * p.max_len + c0;
        for (var e = i; e < 2048u; e += WG) {
            let w = e >> 6u;
            let j = e & 63u;
            var word = 0u;
            if j < n {
                word = vc[vb + w * p.max_len + j];
            }
            t4[e >> 2u][e & 3u] = word;
        }
        workgroupBarrier();
        for (var a = 0u; a < 4u; a++) {
            acc[a] *= f;
        }
        for (var v = 0u; v < 16u; v++) {
            let pw = w4s[16u * g + v];
            for (var a = 0u; a < 4u; a++) {
                let vw = t4[16u * (sl + 8u * a) + v];
                acc[a] += pw.x * unpack2x16float(vw.x) + pw.y * unpack2x16float(vw.y) + pw.z * unpack2x16float(vw.z) + pw.w * unpack2x16float(vw.w);
            }
        }
        workgroupBarrier();
    }
    if mine {
        let l = rl[g];
        for (var a = 0u; a < 4u; a++) {
            let d = 2u * (sl + 8u * a);
            out_set(qb + d, acc[a].x / l);
            out_set(qb + d + 1u, acc[a].y / l);
        }
    }
}
