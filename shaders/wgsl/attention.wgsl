// Attention over the KV cache, three kernels sharing one parameter block.
//
// attention / attention_f16: one workgroup per (head, token), a streaming
// softmax over chunks of 64 positions: each invocation scores one position
// of the chunk into workgroup memory, then every invocation folds the chunk
// into its running max and sum (the same values everywhere) and into the
// output dims it owns, 256 per pass over the positions. The fallback.
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
// A ring cache (p.ring = R > 0, kv.wgsl) holds R positions in 2R slots
// per head (position pos at slot pos % R and pos % R + R), and
// kv_slots() (2R) replaces max_len as the per-head stride. A step's rows
// read positions at most R apart (fusion validates window + Tokens - 1 <=
// R), none older than the newest stored minus R, so, as on the CPU, the
// positions a kernel reads from first on are consecutive slots from
// kv_slot(first): position pos at slot off + pos with off = kv_slot(first)
// - first (u32 arithmetic wraps; off = 0 on a full layer), the same
// addressing as a full cache.
//
// Attention sinks (p.has_sinks = 1, gpt-oss): head h's softmax has one
// more logit, sinks[h], taken as it is (not scaled or capped), which adds
// to the denominator and to no output. The streaming kernels (attention,
// attn_tiled) start each row's running max and sum from it (m = sinks[h],
// l = exp(0) = 1, an output of 0), which the online rescaling then folds
// in exactly as a position that weighs no value; attn_split's partials
// leave it out and attn_combine adds it once per (head, token), in the
// common max and the sum.

// The cache is bound as u32 words in either layout of kv.wgsl: the plain
// kernels read f32 bit patterns, the _f16 ones binary16 halves packed two
// per word along head_dim. In attention, with f32 words invocation i owns
// dims i, i+64, i+128 and i+192 of each pass of 256 dims; with packed
// words it owns the pairs of words i and i+64, so each value word it reads serves two dims (acc[2b]
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
    ring: u32,    // 0: slot = position; else kv.wgsl's mirrored ring of 2*ring slots
    has_sinks: u32, // 1: sinks holds a sink logit per query head
    non_causal: u32, // 1: a row sees every position of its step, later ones too (visible)
    kv_quant: u32, // 0: float caches; else kv.wgsl's quantized cache (attention_q only; see kvq_query)
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
@group(0) @binding(7) var<storage, read> sinks: array<f32>;

// activations: q, out

// acc_at and acc_set hold attn_tiled's running output of element i in
// part (f32, bound with room for every row) until the last chunk, which
// writes out: packed halves could not hold the sums between chunks, and
// one place for both activation policies keeps one code path.
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

// include: kv_ring

// sink_start is the running (max, sum) a row of head h starts from: its
// sink logit with weight exp(0), or no mass at all without sinks.
fn sink_start(h: u32) -> vec2<f32> {
    if p.has_sinks != 0u {
        return vec2<f32>(sinks[h], 1.0);
    }
    return vec2<f32>(-3.0e38, 0.0);
}

var<workgroup> sc: array<f32, 64>;

// include: kv_quant

// A quantized cache (p.kv_quant != 0; the planner runs only attention_q
// on one) is read as the CPU backend reads it: with block
// keys the query row, rotated by H_krot first where the keys were, is
// quantized to q8_0 once per workgroup (kvq_query, into kvq_q and kvq_d)
// (q8_1 with its block sums for q4_1 and q5_1 keys) and each score is the
// sum over blocks of d_k*d_q*Σ k_j q_j (+ m_k*s_q); block values are
// dequantized (d*q, d*q + m) into the weighted sum, and with rotated values
// the head's output is rotated back by H_vrot (its own inverse).
var<workgroup> kvq_q: array<u32, 64>; // the quantized query, four int8 to a word
var<workgroup> kvq_d: array<f32, 8>;  // its block scales
var<workgroup> kvq_s: array<f32, 8>;  // its block sums (q8_1, for keys with a minimum)
var<workgroup> kvq_o: array<f32, 256>; // the output row being rotated back

// kvq_query quantizes query row qb into kvq_q and kvq_d (invocation 0;
// the others wait at the barrier).
fn kvq_query(qb: u32, i: u32) {
    if i == 0u {
        var x: array<f32, 256>;
        for (var d = 0u; d < p.head_dim; d++) {
            x[d] = q_at(qb + d);
        }
        if kvq_krot() > 0u {
            kvq_rotate(&x, p.head_dim, kvq_krot());
        }
        var q: array<u32, 8>;
        for (var b = 0u; b < p.head_dim / 32u; b++) {
            kvq_d[b] = unpack2x16float(kvq_quant8(&x, b, &q)).x;
            var amax = 0.0;
            var sq = 0;
            for (var w = 0u; w < 8u; w++) {
                kvq_q[8u * b + w] = q[w];
                for (var j = 0u; j < 4u; j++) {
                    amax = max(amax, abs(x[32u * b + 4u * w + j]));
                    sq += i32(kvq_i8(q[w], j));
                }
            }
            // q8_1's block sum (keys with a minimum): f16(amax/127 * Σq),
            // amax/127 unrounded, as llama.cpp's x86 quantize_row_q8_1.
            var s1 = 0.0;
            if amax != 0.0 {
                s1 = to_f16(kvq_div(amax, 127.0) * f32(sq));
            }
            kvq_s[b] = s1;
        }
    }
    workgroupBarrier();
}

// kvq_key_dot is the quantized query times the key row at word kr: per
// block d_k*d_q*Σ k_j q_j (+ m_k*s_q for q4_1 and q5_1, s_q the q8_1
// query's block sum), the integer sum exact in i32.
fn kvq_key_dot(kr: u32) -> f32 {
    let ty = kvq_ktype();
    let bw = kvq_block_words(ty);
    var s = 0.0;
    for (var b = 0u; b < p.head_dim / 32u; b++) {
        var si = 0;
        let kb = kr + bw * b;
        if ty == KVQ_Q8_0 {
            for (var w = 0u; w < 8u; w++) {
                si += kvq_dot4(kc[kb + w], kvq_q[8u * b + w]);
            }
        } else {
            let qh = kc[kb + bw - 1u]; // the 5-bit types' high bits (unused otherwise)
            for (var j = 0u; j < 32u; j++) {
                let k = kvq_level(ty, kc[kb + (j % 16u) / 4u], qh, j);
                si += k * i32(kvq_i8(kvq_q[8u * b + j / 4u], j % 4u));
            }
        }
        let dm = kvq_scales(ty, kc[kr + kvq_scale_word(ty, p.head_dim, b)], b);
        if kvq_min(ty) {
            s += dm.x * kvq_d[b] * f32(si) + dm.y * kvq_s[b];
        } else {
            s += dm.x * kvq_d[b] * f32(si);
        }
    }
    return s;
}

// kvq_value is dim d of the value row at word vr: d*q, d*q + m.
fn kvq_value(vr: u32, d: u32) -> f32 {
    let ty = kvq_vtype();
    let bw = kvq_block_words(ty);
    let b = d / 32u;
    let dm = kvq_scales(ty, vc[vr + kvq_scale_word(ty, p.head_dim, b)], b);
    if ty == KVQ_Q8_0 {
        return kvq_i8(vc[vr + d / 4u], d % 4u) * dm.x;
    }
    let j = d % 32u;
    let vb = vr + bw * b;
    let n = f32(kvq_level(ty, vc[vb + (j % 16u) / 4u], vc[vb + bw - 1u], j));
    if kvq_min(ty) {
        return n * dm.x + dm.y;
    }
    return n * dm.x;
}

@compute @workgroup_size(64)
fn attention(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    attend(wid.x, p.row0 + wid.y, lid.x, false, 0u);
}

@compute @workgroup_size(64)
fn attention_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    attend(wid.x, p.row0 + wid.y, lid.x, true, 0u);
}

// attention_q is attention over a quantized cache (p.kv_quant != 0), its
// float side (if any) packed halves when the code says so (kvq_half).
@compute @workgroup_size(64)
fn attention_q(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let code = kvq_begin(lid.x);
    attend(wid.x, p.row0 + wid.y, lid.x, kvq_half(), code);
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

// out_dim is the output dim accumulator a of invocation i holds in the
// pass of output dims from d0 (a multiple of 4*WG).
fn out_dim(d0: u32, i: u32, a: u32, packed: bool) -> u32 {
    if packed {
        return d0 + 2u * (i + (a >> 1u) * WG) + (a & 1u);
    }
    return d0 + i + a * WG;
}

// attend computes query row t of head h, 4*WG output dims per pass over
// the positions (one pass for heads up to 256 dims; Gemma 4's 512-dim
// global heads take two, each scoring the keys again).
fn attend(h: u32, t: u32, i: u32, packed: bool, code: u32) {
    if t >= step[STEP_ROWS] || row_pos(t) == NO_ROW {
        return; // uniform across the workgroup
    }
    for (var d0 = 0u; d0 < p.head_dim; d0 += 4u * WG) {
        attend_dims(h, t, i, d0, packed, code);
    }
}

// attend_dims is one pass of attend: the output dims from d0.
// code is the cache's kv_quant code, a constant 0 in attention and
// attention_f16 (no quantized path once the driver inlines), kvq_begin's
// in attention_q (uniform: the branches below hold barriers).
fn attend_dims(h: u32, t: u32, i: u32, d0: u32, packed: bool, code: u32) {
    let vis = visible(t);
    let lo = vis.x;
    let qp = vis.y; // the last position the row sees
    // width: words per key, and rows of values per kv head.
    var width = p.head_dim;
    if packed {
        width = (p.head_dim + 1u) / 2u;
    }
    let kvh = h / (p.heads / p.kv_heads);
    let qb = (t * p.heads + h) * p.head_dim;
    let ns = kv_slots();
    let off = kv_slot(lo) - lo; // slot of position pos: off + pos (the mirror; wraps in u32)
    let kq = (code & 15u) != 0u;
    let vq = ((code >> 4u) & 15u) != 0u;
    let qw = kvq_words(kvq_vtype(), p.head_dim); // words per quantized value row
    var kw = width;
    if kq {
        kw = kvq_words(kvq_ktype(), p.head_dim);
        kvq_query(qb, i);
    }
    let kb = kvh * ns * kw;
    var vb = kvh * width * ns + off;
    if vq {
        vb = (kvh * ns + off) * qw; // row of position pos: vb + pos * qw
    }
    let w0 = d0 / 2u; // the pass's first packed value word

    let start = sink_start(h);
    var m = start.x;
    var l = start.y;
    var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
    for (var c0 = lo; c0 <= qp; c0 += WG) {
        let pi = c0 + i;
        var s = -3.0e38;
        if pi <= qp {
            if kq {
                s = kvq_key_dot(kb + (off + pi) * kw) * p.scale;
            } else {
                s = key_dot(qb, kb + (off + pi) * width, packed) * p.scale;
            }
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
            if vq {
                for (var a = 0u; a < 4u; a++) {
                    let d = out_dim(d0, i, a, packed);
                    if d < p.head_dim {
                        acc[a] += e * kvq_value(vb + pos * qw, d);
                    }
                }
            } else if packed {
                for (var b = 0u; b < 2u; b++) {
                    let w = w0 + i + b * WG;
                    if w < width {
                        let v2 = unpack2x16float(vc[vb + w * ns + pos]);
                        acc[2u * b] += e * v2.x;
                        acc[2u * b + 1u] += e * v2.y;
                    }
                }
            } else {
                for (var a = 0u; a < 4u; a++) {
                    let d = d0 + i + a * WG;
                    if d < p.head_dim {
                        acc[a] += e * bitcast<f32>(vc[vb + d * ns + pos]);
                    }
                }
            }
        }
        m = cm;
        workgroupBarrier();
    }
    if (code >> 24u) > 0u { // kvq_vrot
        // Rotated values: the row (one pass: quantized heads are at most
        // KVQ_MAX dims) rotated back by invocation 0 in kvq_o.
        for (var a = 0u; a < 4u; a++) {
            let d = out_dim(d0, i, a, packed);
            if d < p.head_dim {
                kvq_o[d] = acc[a] / l;
            }
        }
        workgroupBarrier();
        if i == 0u {
            var x: array<f32, 256>;
            for (var d = 0u; d < p.head_dim; d++) {
                x[d] = kvq_o[d];
            }
            kvq_rotate(&x, p.head_dim, kvq_vrot());
            for (var d = 0u; d < p.head_dim; d++) {
                kvq_o[d] = x[d];
            }
        }
        workgroupBarrier();
        for (var a = 0u; a < 4u; a++) {
            let d = out_dim(d0, i, a, packed);
            if d < p.head_dim {
                out_set(qb + d, kvq_o[d]);
            }
        }
        return;
    }
    for (var a = 0u; a < 4u; a++) {
        let d = out_dim(d0, i, a, packed);
        if d < p.head_dim {
            out_set(qb + d, acc[a] / l);
        }
    }
}

// ---- Decode split over the sequence (flash-decoding) ----

const CHUNK: u32 = 64u; // positions per attn_split workgroup
// SPLIT_WG invocations per attn_split workgroup: half of WG, so the 10.5
// KiB of workgroup memory below is zero-initialized by 32 invocations. In
// Chromium (Dawn, which initializes it through Vulkan's
// VK_KHR_zero_initialize_workgroup_memory) on SwiftShader that cost grows
// with invocations times bytes; the loops stride by SPLIT_WG, so any size
// works.
const SPLIT_WG: u32 = 32u;
const GB: u32 = 8u;     // query heads per attn_split workgroup
// TILE words of workgroup memory stage keys (rows of width+1 words, the
// pad keeping the rows of consecutive positions in different banks) and
// then values (rows of CHUNK+1 words); 64 rows of 33 words.
const TILE: u32 = 2112u;
var<workgroup> tile: array<u32, 2112>;
var<workgroup> ws: array<f32, 512>; // [GB][CHUNK]: scores, then exp(score - max)
var<workgroup> wmax: array<f32, 8>; // [GB]: the chunk's max score per head

@compute @workgroup_size(SPLIT_WG)
fn attn_split(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    split(wid, lid.x, false);
}

@compute @workgroup_size(SPLIT_WG)
fn attn_split_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    split(wid, lid.x, true);
}

// visible is the first and last cache position query row t attends to:
// causally up to its own position; non-causally (p.non_causal) up to the
// step's last row's, a sliding window still dropping only the keys too
// far back (fusion.AttentionOp.NonCausal).
fn visible(t: u32) -> vec2<u32> {
    let qp = min(row_pos(t), p.max_len - 1u);
    var lo = 0u;
    if p.window > 0u && qp + 1u > p.window {
        lo = qp + 1u - p.window;
    }
    var hi = qp;
    if p.non_causal != 0u {
        hi = max(qp, min(row_pos(step[STEP_ROWS] - 1u), p.max_len - 1u));
    }
    return vec2<u32>(lo, hi);
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
    if t >= step[STEP_ROWS] || row_pos(t) == NO_ROW {
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
    // On a ring the row's visible positions are consecutive slots from
    // kv_slot(vis.x) (the mirror), position c0+j at slot off + c0 + j; no
    // key tile starts before jlo there (a slot before the window's first
    // may lie outside the ring).
    let ns = kv_slots();
    let off = kv_slot(vis.x) - vis.x;
    let kb = (kvh * ns + c0 + off) * width;
    let kt = min(CHUNK, TILE / (width + 1u));
    for (var k0 = select(jlo - jlo % kt, jlo, p.ring > 0u); k0 <= jhi; k0 += kt) {
        let nk = min(k0 + kt, jhi + 1u) - k0;
        for (var e = i; e < nk * width; e += SPLIT_WG) {
            let r = e / width;
            tile[r * (width + 1u) + e - r * width] = kc[kb + k0 * width + e];
        }
        workgroupBarrier();
        for (var e = i; e < nb * nk; e += SPLIT_WG) {
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
    for (var e = i; e < nb * CHUNK; e += SPLIT_WG) {
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
    let vb = kvh * width * ns + c0 + off;
    let vt = TILE / (CHUNK + 1u);
    let span = jhi + 1u - jlo;
    for (var w0 = 0u; w0 < width; w0 += vt) {
        let nr = min(vt, width - w0);
        for (var e = i; e < nr * span; e += SPLIT_WG) {
            let r = e / span;
            let j = jlo + e - r * span;
            tile[r * (CHUNK + 1u) + j] = vc[vb + (w0 + r) * ns + j];
        }
        workgroupBarrier();
        for (var e = i; e < nb * nr; e += SPLIT_WG) {
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
// sees; invocation i owns dims d0+i, d0+i+64, d0+i+128 and d0+i+192 of
// each pass of 4*WG dims (one pass up to 256 dims).
@compute @workgroup_size(64)
fn attn_combine(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let h = wid.x;
    let t = p.row0 + wid.y;
    let i = lid.x;
    if t >= step[STEP_ROWS] || row_pos(t) == NO_ROW {
        return;
    }
    for (var d0 = 0u; d0 < p.head_dim; d0 += 4u * WG) {
        combine_dims(h, t, i, d0);
    }
}

// combine_dims is one pass of attn_combine: the output dims from d0.
fn combine_dims(h: u32, t: u32, i: u32, d0: u32) {
    let vis = visible(t);
    let stride = p.head_dim + 2u;
    let base = (t * p.heads + h) * p.chunks;
    var m = -3.0e38;
    for (var c = vis.x / CHUNK; c <= vis.y / CHUNK; c++) {
        m = max(m, part[(base + c) * stride]);
    }
    var l = 0.0;
    if p.has_sinks != 0u {
        // The sink, once per (head, token): in the common max and the sum.
        let s = sinks[h];
        m = max(m, s);
        l = exp(s - m);
    }
    var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
    for (var c = vis.x / CHUNK; c <= vis.y / CHUNK; c++) {
        let o = (base + c) * stride;
        let f = exp(part[o] - m);
        l += f * part[o + 1u];
        for (var a = 0u; a < 4u; a++) {
            let d = d0 + i + a * WG;
            if d < p.head_dim {
                acc[a] += f * part[o + 2u + d];
            }
        }
    }
    let ob = (t * p.heads + h) * p.head_dim;
    for (var a = 0u; a < 4u; a++) {
        let d = d0 + i + a * WG;
        if d < p.head_dim {
            out_set(ob + d, acc[a] / l);
        }
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
    if rho < p.rows && t < step[STEP_ROWS] && row_pos(t) != NO_ROW {
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
    // The tile's positions [lo, hi] are those of one step's rows, at most
    // ring apart: on a ring, consecutive slots from kv_slot(lo) (the
    // mirror), position pos at slot off + pos.
    let ns = kv_slots();
    let off = kv_slot(lo) - lo;
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
        var start = vec2<f32>(-3.0e38, 0.0);
        let r = tile_row(tile0, kvh, i);
        if r.lo <= r.hi {
            start = sink_start(r.h);
        }
        wmax[i] = start.x;
        rl[i] = start.y;
    }
    let kt = min(CHUNK, TILE / (width + 1u));
    let vt = TILE / (CHUNK + 1u);
    var first = true;
    for (var c0 = lo; c0 <= hi; c0 += CHUNK) {
        let n = min(CHUNK, hi + 1u - c0); // positions of this chunk
        let last = c0 + n > hi;           // the walk's last chunk: divide by the sums
        // Scores, a tile of kt keys at a time; ws[g*CHUNK + j] for position c0+j.
        let kb = (kvh * ns + c0 + off) * width;
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
        let vb = kvh * width * ns + c0 + off;
        for (var w0 = 0u; w0 < width; w0 += vt) {
            let nr = min(vt, width - w0);
            for (var e = i; e < nr * n; e += WG) {
                let r = e / n;
                let j = e - r * n;
                tile[r * (CHUNK + 1u) + j] = vc[vb + (w0 + r) * ns + j];
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
