// Library snippet, not a family: a family's line "// include: qblock_size"
// is replaced by what follows (shaders.expandIncludes). It reads the
// QT_* block-type codes every module carries (codes.go), and holds the
// scale decoding the block kernels share (ue4m3_half).

// qblock_len is the elements of one block of type qt: 32 for the
// one-scale types (Q4_1 ... IQ4_NL), 64 for NVFP4, 256 for the K-quants,
// IQ4_XS and the ternary types.
fn qblock_len(qt: u32) -> u32 {
    return select(select(QT_Q4_1_ELEMS, QT_Q4K_ELEMS, qt >= QT_Q4K), QT_NVFP4_ELEMS, qt == QT_NVFP4);
}

// qblock_bytes is the bytes of one block of type qt.
fn qblock_bytes(qt: u32) -> u32 {
    var n = 0u;
    switch qt {
        case QT_Q4_1: { n = QT_Q4_1_BYTES; }
        case QT_Q5_0: { n = QT_Q5_0_BYTES; }
        case QT_Q5_1: { n = QT_Q5_1_BYTES; }
        case QT_Q8_0: { n = QT_Q8_0_BYTES; }
        case QT_MXFP4: { n = QT_MXFP4_BYTES; }
        case QT_IQ4NL: { n = QT_IQ4NL_BYTES; }
        case QT_IQ4XS: { n = QT_IQ4XS_BYTES; }
        case QT_NVFP4: { n = QT_NVFP4_BYTES; }
        case QT_TQ1_0: { n = QT_TQ1_0_BYTES; }
        case QT_TQ2_0: { n = QT_TQ2_0_BYTES; }
        case QT_IQ2XXS: { n = QT_IQ2XXS_BYTES; }
        case QT_IQ2XS: { n = QT_IQ2XS_BYTES; }
        case QT_IQ2S: { n = QT_IQ2S_BYTES; }
        case QT_IQ3XXS: { n = QT_IQ3XXS_BYTES; }
        case QT_IQ3S: { n = QT_IQ3S_BYTES; }
        case QT_IQ1S: { n = QT_IQ1S_BYTES; }
        case QT_IQ1M: { n = QT_IQ1M_BYTES; }
        case QT_Q4K: { n = QT_Q4K_BYTES; }
        case QT_Q5K: { n = QT_Q5K_BYTES; }
        case QT_Q2K: { n = QT_Q2K_BYTES; }
        case QT_Q3K: { n = QT_Q3K_BYTES; }
        default: { n = QT_Q6K_BYTES; }
    }
    return n;
}

// ue4m3_half is half the value of the UE4M3 scale byte x (NVFP4's: 4
// exponent bits, bias 7, 3 mantissa bits, the top bit ignored) with the
// CPU's bits (tensors.UE4M3Half): (1+m/8)*2^(e-8), m*2^-10 for e = 0, and
// 0 for 0x7f.
fn ue4m3_half(x: u32) -> f32 {
    let e = (x >> 3u) & 15u;
    let m = x & 7u;
    let v = select(bitcast<f32>(((e + 119u) << 23u) | (m << 20u)), f32(m) * 0.0009765625, e == 0u);
    return select(v, 0.0, x == 0x7fu);
}
