// Library snippet, not a family: a family's line "// include: kv_ring"
// is replaced by what follows (shaders.expandIncludes). It reads the
// family's p.max_len and p.ring (0: a full layer; R > 0: a ring).

// kv_slots is the slots per head of the cache: max_len, or 2*ring for a
// ring (position pos at slot pos % ring and again ring slots further).
fn kv_slots() -> u32 {
    return select(p.max_len, 2u * p.ring, p.ring > 0u);
}

// kv_slot is the first slot of cache position pos.
fn kv_slot(pos: u32) -> u32 {
    if p.ring == 0u {
        return pos; // uniform: no modulo on full layers
    }
    return pos % p.ring;
}

// kv_copies is how many slots hold a position: 2 on a ring, else 1.
fn kv_copies() -> u32 {
    return select(1u, 2u, p.ring > 0u);
}
