#!/usr/bin/python3
"""moe-gguf.py: write a random-weight GGUF of the qwen3-moe-small shape (or of
its dense twin, qwen3-dense-small) that llama.cpp and gpurun both load, to
compare their CPU decode speed on one file (issue 32's done-when).

    /usr/bin/python3 scripts/moe-gguf.py [--dense] [--layers N] OUT.gguf

The shape is internal/synthetic's qwen3-moe-small: Qwen3-30B-A3B's layers
(embd 2048, 32 heads of 128, 4 KV heads, experts of 768 units, 8 used per
token, norm_topk_prob) with 24 layers of 32 experts and the 151936-token
vocabulary, untied. --dense writes qwen3-dense-small instead: arch qwen3,
one SwiGLU of 8 x 768 = 6144 units per layer, so that a decode step reads
the same weight bytes as the mixture's 8 selected experts.

Every matrix is Q8_0 (general.file_type 7), written block by block as
random int8 values with one f16 scale, without an f32 copy of the model in
memory; norms and the router are F32, as llama.cpp's converter leaves them.
Requantize with llama.cpp for the K-quants, e.g.

    llama-quantize --allow-requantize OUT.gguf OUT-q4km.gguf Q4_K_M

The tokenizer is a stand-in SentencePiece ("llama") vocabulary: <unk>,
<s>, </s>, the 256 byte tokens, then t259 ... : the vocabulary size is the
real model's, its text is not. The qwen3-moe-small file is about 4.7 GB at
Q8_0 (2.7 GB at Q4_K_M), the dense twin 1.9 GB: never commit them.

Needs numpy and llama.cpp's gguf-py (the directory in $GGUF_PY, or
installed as the gguf package).
"""

import argparse
import os
import sys

import numpy as np

if os.environ.get("GGUF_PY"):
    sys.path.insert(0, os.environ["GGUF_PY"])
try:
    import gguf  # noqa: E402
except ImportError:
    sys.exit("moe-gguf.py: needs llama.cpp's gguf-py: set GGUF_PY to the gguf-py "
             "directory of a llama.cpp checkout, or install the gguf package")

EMBD, HEADS, KV_HEADS, HEAD_DIM = 2048, 32, 4, 128
VOCAB, EXPERT_FF, USED = 151936, 768, 8
QK = 32  # elements per Q8_0 block (34 bytes: f16 scale, 32 int8)


def q8_0(rng, rows, cols, lead=()):
    """Random Q8_0 bytes of a [*lead, rows, cols] matrix (cols a multiple of
    32): values about N(0, 0.02) in spread."""
    shape = (*lead, rows, cols // QK)
    blocks = np.empty((*shape, 34), dtype=np.uint8)
    d = np.float16(0.02 / 37)  # q uniform in [-64, 64): std 37
    blocks[..., 0:2] = np.frombuffer(d.tobytes(), dtype=np.uint8)
    blocks[..., 2:] = rng.integers(-64, 64, size=(*shape, QK), dtype=np.int8).view(np.uint8)
    return blocks.reshape(*lead, rows, cols // QK * 34)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--dense", action="store_true", help="the dense twin (qwen3, FFN 8 x 768)")
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--experts", type=int, default=32)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    arch = "qwen3" if a.dense else "qwen3moe"
    rng = np.random.default_rng(a.seed)

    # (name, numpy byte shape or f32 shape, raw type, generator)
    ts = []

    def mat(name, rows, cols, lead=()):
        shape = (*lead, rows, cols // QK * 34)
        ts.append((name, shape, gguf.GGMLQuantizationType.Q8_0, lambda: q8_0(rng, rows, cols, lead)))

    def f32(name, *shape, fill=None):
        gen = (lambda: np.full(shape, fill, dtype=np.float32)) if fill is not None else \
            (lambda: (rng.standard_normal(shape) * 0.02).astype(np.float32))
        ts.append((name, shape, None, gen))

    mat("token_embd.weight", VOCAB, EMBD)
    for i in range(a.layers):
        b = f"blk.{i}."
        f32(b + "attn_norm.weight", EMBD, fill=1.0)
        mat(b + "attn_q.weight", HEADS * HEAD_DIM, EMBD)
        mat(b + "attn_k.weight", KV_HEADS * HEAD_DIM, EMBD)
        mat(b + "attn_v.weight", KV_HEADS * HEAD_DIM, EMBD)
        mat(b + "attn_output.weight", EMBD, HEADS * HEAD_DIM)
        f32(b + "attn_q_norm.weight", HEAD_DIM, fill=1.0)
        f32(b + "attn_k_norm.weight", HEAD_DIM, fill=1.0)
        f32(b + "ffn_norm.weight", EMBD, fill=1.0)
        if a.dense:
            mat(b + "ffn_gate.weight", USED * EXPERT_FF, EMBD)
            mat(b + "ffn_up.weight", USED * EXPERT_FF, EMBD)
            mat(b + "ffn_down.weight", EMBD, USED * EXPERT_FF)
        else:
            f32(b + "ffn_gate_inp.weight", a.experts, EMBD)
            mat(b + "ffn_gate_exps.weight", EXPERT_FF, EMBD, (a.experts,))
            mat(b + "ffn_up_exps.weight", EXPERT_FF, EMBD, (a.experts,))
            mat(b + "ffn_down_exps.weight", EMBD, EXPERT_FF, (a.experts,))
    f32("output_norm.weight", EMBD, fill=1.0)
    mat("output.weight", VOCAB, EMBD)

    w = gguf.GGUFWriter(a.out, arch)
    w.add_name(f"random-{'qwen3-dense-small' if a.dense else 'qwen3-moe-small'}")
    w.add_context_length(40960)
    w.add_embedding_length(EMBD)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(USED * EXPERT_FF)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_freq_base(1e6)
    w.add_layer_norm_rms_eps(1e-6)
    if not a.dense:
        w.add_expert_count(a.experts)
        w.add_expert_used_count(USED)
        w.add_expert_feed_forward_length(EXPERT_FF)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    toks = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.BYTE] * 256
    toks += [f"t{i}" for i in range(len(toks), VOCAB)]
    types += [gguf.TokenType.NORMAL] * (VOCAB - len(types))
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores([0.0] * VOCAB)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(False)

    for name, shape, raw, _ in ts:
        if raw is None:
            w.add_tensor_info(name, shape, np.dtype(np.float32), 4 * int(np.prod(shape)))
        else:
            w.add_tensor_info(name, shape, np.dtype(np.uint8), int(np.prod(shape)), raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for _, _, _, gen in ts:
        w.write_tensor_data(gen())
    w.close()


if __name__ == "__main__":
    main()
