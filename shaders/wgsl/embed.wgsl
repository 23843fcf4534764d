// Embed: out[t] = scale * W[tokens[t]], W one row block [row_base, row_base+rows)
// of the table (tables over the binding limit are split by rows, one dispatch
// per block; each dispatch writes only the tokens its block holds).
// Dispatch: (ceil(cols/64), Tokens, 1).

struct EmbedParams {
    cols: u32,
    row_base: u32,
    rows: u32,
    wt: u32,
    st: u32,
    block: u32,   // elements per scale (0: unquantized)
    nblocks: u32, // scales per row
    scale: f32,
    out_f16: u32, // 1: out is an f16 activation (packed halves)
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> p: EmbedParams;
@group(0) @binding(1) var<storage, read> step: array<u32>; // [pos, T, tokens...]
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read> s: array<u32>;
@group(0) @binding(4) var<storage, read_write> out_w: array<atomic<u32>>;

// activations: out

// embed_decode is common.wgsl's decode(w[word_of(e, p.wt)], e, p.wt)
// without branches: every stored type's value is computed and the one of
// p.wt selected (and so is the scale, below). A branch on uniforms alone lets a
// CPU driver specialize the kernel to the bound values: lavapipe (Mesa
// 22.3) inlines them and compiles the kernel again each time it is bound,
// which made this one-workgroup dispatch cost more than a matrix product.
fn embed_decode(e: u32) -> f32 {
    let wt = p.wt;
    let halves = wt == WT_F16 || wt == WT_BF16;
    let shift = select(select(select(0u, 1u, halves), 2u, wt == WT_I8), 3u, wt == WT_I4);
    let word = w[e >> shift];
    let h = unpack2x16float(word);
    let hv = select(h.x, h.y, (e & 1u) == 1u);
    let bv = bitcast<f32>((word >> ((e & 1u) * 16u)) << 16u);
    let i8v = f32(extractBits(bitcast<i32>(word), (e & 3u) * 8u, 8u));
    let i4v = f32(extractBits(bitcast<i32>(word), (e & 7u) * 4u, 4u));
    var v = bitcast<f32>(word);
    v = select(v, hv, wt == WT_F16);
    v = select(v, bv, wt == WT_BF16);
    v = select(v, i8v, wt == WT_I8);
    return select(v, i4v, wt == WT_I4);
}

@compute @workgroup_size(64)
fn embed(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    let t = gid.y;
    if c >= p.cols || t >= step[STEP_ROWS] {
        return;
    }
    let tok = step[STEP_TOKEN + t];
    if tok < p.row_base || tok >= p.row_base + p.rows {
        return;
    }
    let r = tok - p.row_base;
    let e = r * p.cols + c;
    let v = embed_decode(e);
    let quant = p.block > 0u; // unquantized tables bind a one-word s, read at 0
    let si = select(0u, r * p.nblocks + c / max(p.block, 1u), quant);
    let sw = s[select(si, si >> 1u, p.st == ST_F16)];
    let hs = unpack2x16float(sw);
    let sv = select(bitcast<f32>(sw), select(hs.x, hs.y, (si & 1u) == 1u), p.st == ST_F16);
    out_set(t * p.cols + c, select(v, v * sv, quant) * p.scale);
}
