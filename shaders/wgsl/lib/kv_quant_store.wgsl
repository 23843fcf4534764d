// Library snippet, not a family: a family's line "// include:
// kv_quant_store" is replaced by what follows (shaders.expandIncludes).
// It writes the family's kc and vc bindings and needs kv_ring, kv_quant
// and pack_pair included (p.head_dim, p.ring).

// kvq_put stores row x (the head_dim values of head h at cache position
// pos) into the keys' cache (v false) or the values' (v true) of type ty,
// in every slot that holds pos: a float cache (ty 0) as kv_store lays it
// out (f32 words, or binary16 pairs with f16); a block cache rotated by
// H_rot first (rot > 0), then as kvq_words rows, keys and values alike
// ([kv_heads][slots][kvq_words]). One invocation writes the row whole:
// a block needs its 32 values and a rotation the head's.
fn kvq_put(v: bool, h: u32, pos: u32, x: ptr<function, array<f32, 256>>, ty: u32, rot: u32, half: bool) {
    let hd = p.head_dim;
    let n = kv_slots();
    if ty == 0u {
        let per = select(hd, (hd + 1u) / 2u, half);
        for (var c = 0u; c < kv_copies(); c++) {
            let s = kv_slot(pos) + c * p.ring;
            for (var e = 0u; e < per; e++) {
                var w = bitcast<u32>((*x)[e]);
                if half {
                    var x1 = 0.0;
                    if 2u * e + 1u < hd {
                        x1 = (*x)[2u * e + 1u];
                    }
                    w = pack_pair((*x)[2u * e], x1);
                }
                if v {
                    vc[(h * per + e) * n + s] = w;
                } else {
                    kc[(h * n + s) * per + e] = w;
                }
            }
        }
        return;
    }
    if rot > 0u {
        kvq_rotate(x, hd, rot);
    }
    let words = kvq_words(ty, hd);
    let nb = hd / 32u;
    let bw = kvq_block_words(ty);
    var q: array<u32, 8>;
    var lo = 0u; // the scale bits of the pair's even block
    for (var b = 0u; b < nb; b++) {
        let bits = kvq_quant(ty, x, b, &q);
        for (var c = 0u; c < kv_copies(); c++) {
            let row = (h * n + kv_slot(pos) + c * p.ring) * words;
            for (var w = 0u; w < bw; w++) {
                kvq_set(v, row + bw * b + w, q[w]);
            }
            if kvq_min(ty) {
                kvq_set(v, row + bw * nb + b, bits);
            } else if (b & 1u) == 1u || b + 1u == nb {
                kvq_set(v, row + bw * nb + b / 2u, select(bits, lo | (bits << 16u), (b & 1u) == 1u));
            }
        }
        lo = bits;
    }
}

// kvq_set writes word w at index i of the values' cache (v) or the keys'.
fn kvq_set(v: bool, i: u32, w: u32) {
    if v {
        vc[i] = w;
    } else {
        kc[i] = w;
    }
}
