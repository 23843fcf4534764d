// Library snippet, not a family: a family's line "// include: qdecode"
// is replaced by what follows (shaders.expandIncludes). The decoding of
// llama.cpp's block types (tensors.DecodeBlocks' f32 operations, element
// by element) over the weight words the family's fn qw(i: u32) -> u32
// returns: qblocks.wgsl's matrices, moe.wgsl's experts.

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

// qbyte is byte b of the weights qw reads.
fn qbyte(b: u32) -> u32 {
    return (qw(b >> 2u) >> ((b & 3u) * 8u)) & 0xffu;
}

// qhalf is the f16 at byte b (always even in these layouts).
fn qhalf(b: u32) -> f32 {
    return unpack2x16float(qw(b >> 2u) >> ((b & 2u) * 8u)).x;
}

// qword4 is the four bytes at byte b as a little-endian u32 (b need not be
// a multiple of 4).
fn qword4(b: u32) -> u32 {
    let sh = (b & 3u) * 8u;
    if sh == 0u {
        return qw(b >> 2u);
    }
    return (qw(b >> 2u) >> sh) | (qw((b >> 2u) + 1u) << (32u - sh));
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
