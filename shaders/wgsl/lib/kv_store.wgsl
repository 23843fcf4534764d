// Library snippet, not a family: a family's line "// include: kv_store"
// is replaced by what follows (shaders.expandIncludes). It writes the
// family's kc and vc bindings and needs kv_ring included (p.ring).

// kv_store writes word kw of the keys and vw of the values of head h at
// cache position pos: element (or packed pair) e of the head's per words
// per position, K [kv_heads][slots][per] and V [kv_heads][per][slots],
// into every slot that holds pos (two on a ring layer).
fn kv_store(h: u32, e: u32, per: u32, pos: u32, kw: u32, vw: u32) {
    let n = kv_slots();
    for (var c = 0u; c < kv_copies(); c++) {
        let s = kv_slot(pos) + c * p.ring;
        kc[(h * n + s) * per + e] = kw;
        vc[(h * per + e) * n + s] = vw;
    }
}
