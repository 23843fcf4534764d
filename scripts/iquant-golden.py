#!/usr/bin/python3
"""iquant-golden.py: llama.cpp's own dequantization of random I-quant,
NVFP4 and ternary blocks, as goldens for gpurun's decoders.

    /usr/bin/python3 scripts/iquant-golden.py LLAMA_BUILD_BIN LLAMA_COMMIT

LLAMA_BUILD_BIN is a llama.cpp build's bin directory (libggml-base.so);
LLAMA_COMMIT the upstream commit its sources are (recorded in the golden).
The script calls, through ctypes, dequantize_row_<type> (ggml-base) on
random blocks of every type (seeded, so reruns give the same bytes), the
f16 scale fields kept finite (IQ1_M's, spread over its scale nibbles, by
redrawing the block); NVFP4's scale bytes run through all 256 values. It
writes tensors/testdata/iquant.blocks (the blocks of every type, one after
the other) and tensors/testdata/iquant.golden.json (per type: its blocks'
offset and count in that file and the SHA-256 of llama.cpp's f32 values,
little-endian).
"""
import ctypes
import hashlib
import json
import os
import random
import struct
import sys

# name, elements per block, bytes per block, offsets of f16 fields, blocks
TYPES = [
    ("iq4_nl", 32, 18, [0], 256),
    ("iq4_xs", 256, 136, [0], 32),
    ("iq3_s", 256, 110, [0], 32),
    ("iq3_xxs", 256, 98, [0], 32),
    ("iq2_xxs", 256, 66, [0], 32),
    ("iq2_xs", 256, 74, [0], 128),
    ("iq2_s", 256, 82, [0], 128),
    ("iq1_s", 256, 50, [0], 128),
    ("iq1_m", 256, 56, [], 128),
    ("nvfp4", 64, 36, [], 256),
    ("tq1_0", 256, 54, [52], 32),
    ("tq2_0", 256, 66, [64], 32),
]


def finite_half(rng):
    # A random finite binary16 of either sign (exponent field below 31).
    return rng.randrange(0x7c00) | rng.randrange(2) << 15


def iq1m_half(blk):
    sc = struct.unpack_from("<4H", blk, 48)
    return sc[0] >> 12 | (sc[1] >> 8) & 0x00f0 | (sc[2] >> 4) & 0x0f00 | sc[3] & 0xf000


def block(rng, name, size, halves, k):
    while True:
        b = bytearray(rng.randrange(256) for _ in range(size))
        for off in halves:
            struct.pack_into("<H", b, off, finite_half(rng))
        if name == "nvfp4":
            b[0:4] = bytes((4 * k + s) & 255 for s in range(4))
        if name == "iq1_m" and iq1m_half(b) & 0x7c00 == 0x7c00:
            continue
        return bytes(b)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    bindir, commit = sys.argv[1], sys.argv[2]
    base = ctypes.CDLL(os.path.join(bindir, "libggml-base.so"))
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    rng = random.Random(42)
    blob = bytearray()
    golden = {"llama_cpp": commit, "function": "dequantize_row_<type>", "types": {}}
    for name, qk, size, halves, nblocks in TYPES:
        blocks = b"".join(block(rng, name, size, halves, k) for k in range(nblocks))
        n = qk * nblocks
        out = (ctypes.c_float * n)()
        fn = getattr(base, "dequantize_row_" + name)
        fn.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_float), ctypes.c_int64]
        fn(blocks, out, n)
        raw = ctypes.string_at(out, 4 * n)
        golden["types"][name] = {"offset": len(blob), "blocks": nblocks,
                                 "f32_sha256": hashlib.sha256(raw).hexdigest(),
                                 "first_values": list(struct.unpack_from("<8f", raw))}
        blob += blocks
    with open(os.path.join(root, "tensors", "testdata", "iquant.blocks"), "wb") as f:
        f.write(blob)
    with open(os.path.join(root, "tensors", "testdata", "iquant.golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
