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
    var v = decode(w[word_of(e, p.wt)], e, p.wt);
    if p.block > 0u {
        let si = r * p.nblocks + c / p.block;
        v = v * decode_scale(s[scale_word(si, p.st)], si, p.st);
    }
    out_set(t * p.cols + c, v * p.scale);
}
