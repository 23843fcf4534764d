// Library snippet, not a family: a family's line "// include: qblock_size"
// is replaced by what follows (shaders.expandIncludes). It reads the
// QT_* block-type codes every module carries (codes.go).

// qblock_len is the elements of one block of type qt: 32 for the
// one-scale types (Q4_1 ... IQ4_NL), 256 for the K-quants and IQ4_XS.
fn qblock_len(qt: u32) -> u32 {
    return select(QT_Q4_1_ELEMS, QT_Q4K_ELEMS, qt >= QT_Q4K);
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
        case QT_Q4K: { n = QT_Q4K_BYTES; }
        case QT_Q5K: { n = QT_Q5K_BYTES; }
        case QT_Q2K: { n = QT_Q2K_BYTES; }
        case QT_Q3K: { n = QT_Q3K_BYTES; }
        default: { n = QT_Q6K_BYTES; }
    }
    return n;
}
