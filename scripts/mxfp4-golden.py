#!/usr/bin/python3
"""mxfp4-golden.py: llama.cpp's own MXFP4 arithmetic on random blocks, as
goldens for gpurun's decoder and dot-product kernels.

    /usr/bin/python3 scripts/mxfp4-golden.py LLAMA_BUILD_BIN

LLAMA_BUILD_BIN is a llama.cpp build's bin directory (libggml-base.so,
libggml-cpu.so). The script calls, through ctypes:

  - dequantize_row_mxfp4 (ggml-base) on 320 blocks: every E8M0 exponent
    byte 0 ... 255 once, then 64 more in the usual range, random codes;
    written to tensors/testdata/mxfp4.golden.json;
  - ggml_vec_dot_mxfp4_q8_0_generic (ggml-cpu: the scalar reference form)
    on rows of 1 to 9 blocks against random Q8_0 activation blocks (int8
    in -127 ... 127, as Q8_0 quantization writes them), written to
    internal/backend/cpu/internal/simd/testdata/mxfp4_dot.golden.json. Built
    with FMA (GGML_AVX2), GCC contracts its "sumf += d*(sumi1 + sumi2)"
    into one fused multiply-add per block, so these sums can differ from
    the source's separate roundings (which gpurun's Go form keeps) by a
    rounding per block, and overflow differently.

Both files record the llama.cpp commit they came from (git rev-parse in
LLAMA_BUILD_BIN/../..). Bytes are hex, f32 results too (their four
little-endian bytes: every bit, NaNs included).
"""
import ctypes
import json
import os
import random
import struct
import subprocess
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    bindir = sys.argv[1]
    base = ctypes.CDLL(os.path.join(bindir, "libggml-base.so"))
    cpu = ctypes.CDLL(os.path.join(bindir, "libggml-cpu.so"))
    commit = subprocess.run(["git", "-C", os.path.join(bindir, "..", ".."), "rev-parse", "HEAD"],
                            capture_output=True, text=True, check=True).stdout.strip()
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    rng = random.Random(39)

    # Dequantization.
    exps = list(range(256)) + [rng.randrange(110, 135) for _ in range(64)]
    blocks = bytearray()
    for e in exps:
        blocks += bytes([e]) + bytes(rng.randrange(256) for _ in range(16))
    n = 32 * len(exps)
    out = (ctypes.c_float * n)()
    base.dequantize_row_mxfp4(ctypes.c_char_p(bytes(blocks)), out, ctypes.c_int64(n))
    raw = ctypes.string_at(out, 4 * n)
    write(os.path.join(root, "tensors", "testdata", "mxfp4.golden.json"), {
        "llama_cpp": commit,
        "function": "dequantize_row_mxfp4",
        "blocks": blocks.hex(),
        "values": raw.hex(),
    })

    # Dot products against Q8_0 activations (ggml_cpu_init fills the f16
    # conversion table the CPU kernels read).
    cpu.ggml_cpu_init()
    rows = []
    fn = cpu.ggml_vec_dot_mxfp4_q8_0_generic
    fn.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_float), ctypes.c_size_t, ctypes.c_char_p,
                   ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
    for i in range(200):
        nb = 1 + i % 9
        w = bytearray()
        x = bytearray()
        for _ in range(nb):
            e = rng.randrange(116, 128) if i % 5 else rng.choice([0, 1, 2, 3, 200, 254, 255, rng.randrange(256)])
            w += bytes([e]) + bytes(rng.randrange(256) for _ in range(16))
            d = struct.pack("<e", rng.uniform(1e-4, 0.05))
            x += d + bytes(rng.randrange(-127, 128) & 0xff for _ in range(32))  # as Q8_0 quantizes: never -128
        s = ctypes.c_float()
        fn(32 * nb, ctypes.byref(s), 0, bytes(w), 0, bytes(x), 0, 1)
        rows.append({"w": w.hex(), "x": x.hex(), "dot": ctypes.string_at(ctypes.addressof(s), 4).hex()})
    write(os.path.join(root, "gpu", "backend", "cpu", "internal", "simd", "testdata", "mxfp4_dot.golden.json"), {
        "llama_cpp": commit,
        "function": "ggml_vec_dot_mxfp4_q8_0_generic",
        "rows": rows,
    })


def write(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
