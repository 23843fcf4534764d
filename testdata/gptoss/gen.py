#!/usr/bin/python3
"""gen.py: write a tiny random-weight gpt-oss GGUF (llama.cpp arch
"gpt-oss", src/models/openai-moe.cpp) with llama.cpp's gguf-py.

    GGUF_PY=$LLAMA/gguf-py /usr/bin/python3 gen.py SHARED_MODELS OUT.gguf

Shape: embedding 64, 4 query heads and 2 KV heads of 16, 2 layers (layer 0
slides over a window of 4, layer 1 attends to every position: llama.cpp's
pattern of 2), 4 experts of 32 units with 2 used per token, YaRN RoPE
(factor 4 over an original context of 16, base 150000), attention sinks,
biases on q, k, v, o, the router and every expert product. All F32; the
vocabulary (512 SentencePiece pieces) is ../shared/models/arch2's: the
prompt ids are what matter, not the text.
"""
import os
import sys

import numpy as np

if os.environ.get("GGUF_PY"):
    sys.path.insert(0, os.environ["GGUF_PY"])
import gguf  # noqa: E402

EMBD, HEADS, KV_HEADS, HEAD_DIM, LAYERS = 64, 4, 2, 16, 2
EXPERTS, USED, EXPERT_FF, WINDOW, CTX = 4, 2, 32, 4, 128


def main():
    models, out = sys.argv[1:]
    vocab = gguf.GGUFReader(os.path.join(models, "arch2", "qwen3moe.gguf"))
    rng = np.random.default_rng(20261127)
    w = gguf.GGUFWriter(out, "gpt-oss")
    w.add_name("tiny-gpt-oss")
    w.add_context_length(CTX)
    w.add_embedding_length(EMBD)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(EXPERT_FF)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_freq_base(150000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_expert_count(EXPERTS)
    w.add_expert_used_count(USED)
    w.add_expert_feed_forward_length(EXPERT_FF)
    w.add_sliding_window(WINDOW)
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(4.0)
    w.add_rope_scaling_orig_ctx_len(16)
    w.add_file_type(0)
    for name, f in vocab.fields.items():
        if not name.startswith("tokenizer."):
            continue
        vt = f.types[0]
        if vt == gguf.GGUFValueType.ARRAY:
            w.add_key_value(name, f.contents(), vt, sub_type=f.types[-1])
        else:
            w.add_key_value(name, f.contents(), vt)
    n_vocab = len(vocab.fields["tokenizer.ggml.tokens"].data)

    def t(name, *shape, scale=1.0):
        w.add_tensor(name, (rng.standard_normal(shape) * scale).astype(np.float32))

    def ones(name, n):
        w.add_tensor(name, (1 + 0.1 * rng.standard_normal(n)).astype(np.float32))

    t("token_embd.weight", n_vocab, EMBD)
    for i in range(LAYERS):
        b = f"blk.{i}."
        ones(b + "attn_norm.weight", EMBD)
        t(b + "attn_q.weight", HEADS * HEAD_DIM, EMBD, scale=0.2)
        t(b + "attn_q.bias", HEADS * HEAD_DIM, scale=0.1)
        t(b + "attn_k.weight", KV_HEADS * HEAD_DIM, EMBD, scale=0.2)
        t(b + "attn_k.bias", KV_HEADS * HEAD_DIM, scale=0.1)
        t(b + "attn_v.weight", KV_HEADS * HEAD_DIM, EMBD, scale=0.2)
        t(b + "attn_v.bias", KV_HEADS * HEAD_DIM, scale=0.1)
        t(b + "attn_output.weight", EMBD, HEADS * HEAD_DIM, scale=0.2)
        t(b + "attn_output.bias", EMBD, scale=0.1)
        t(b + "attn_sinks.weight", HEADS, scale=1.0)
        ones(b + "post_attention_norm.weight", EMBD)
        t(b + "ffn_gate_inp.weight", EXPERTS, EMBD, scale=0.3)
        t(b + "ffn_gate_inp.bias", EXPERTS, scale=0.3)
        t(b + "ffn_gate_exps.weight", EXPERTS, EXPERT_FF, EMBD, scale=0.3)
        t(b + "ffn_gate_exps.bias", EXPERTS, EXPERT_FF, scale=0.3)
        t(b + "ffn_up_exps.weight", EXPERTS, EXPERT_FF, EMBD, scale=0.3)
        t(b + "ffn_up_exps.bias", EXPERTS, EXPERT_FF, scale=0.3)
        t(b + "ffn_down_exps.weight", EXPERTS, EMBD, EXPERT_FF, scale=0.2)
        t(b + "ffn_down_exps.bias", EXPERTS, EMBD, scale=0.1)
    ones("output_norm.weight", EMBD)
    t("output.weight", n_vocab, EMBD, scale=0.2)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
