"""Writes the random LoRA adapters of testdata/lora (GGUF and PEFT forms of
the same matrices) for the tiny models of ../shared/models.

Run by gen.sh (which also makes the llama.cpp goldens); run it from the
repository root:  /usr/bin/python3 testdata/lora/gen.py ../shared/models

GGUF adapters are laid out as llama.cpp's convert_lora_to_gguf.py writes
them: general.type "adapter", adapter.type "lora", adapter.lora.alpha, and
per target "<base tensor>.lora_a" (ggml [in, r]) / ".lora_b" ([r, out]).
PEFT directories hold adapter_config.json and adapter_model.safetensors
with Hugging Face module names (lora_A [r, in], lora_B [out, r]); for llama,
B's q/k rows are in Hugging Face's order (the inverse of the converter's
permute), so an importer must permute them as it does the base weights.
"""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.environ.get("GGUF_PY", "/work/llama/gguf-py"))
import gguf  # noqa: E402

OUT = os.path.dirname(os.path.abspath(__file__))

# GGUF suffix -> Hugging Face module, per architecture.
HF = {
    "llama": {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
              "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
              "ffn_down": "mlp.down_proj"},
    "phi3": {"attn_qkv": "self_attn.qkv_proj", "attn_output": "self_attn.o_proj",
             "ffn_up": "mlp.gate_up_proj", "ffn_down": "mlp.down_proj"},
}
HF["falcon"] = {"attn_qkv": "self_attention.query_key_value", "attn_output": "self_attention.dense",
                "ffn_up": "mlp.dense_h_to_4h", "ffn_down": "mlp.dense_4h_to_h"}
for _arch in ("qwen2", "gemma", "qwen3", "smollm3"):
    HF[_arch] = HF["llama"]
# Where a Hugging Face model keeps its layers.
LAYERS = {"falcon": "transformer.h"}

# name, base model (under ../shared/models), rank, alpha, seed, write PEFT form
ADAPTERS = [
    ("llama_r4", "arch/llama.gguf", 4, 8.0, 1, True),
    ("llama_r16", "arch/llama.gguf", 16, 32.0, 2, False),
    ("phi2_fusedqkv_r4", "arch/phi2_fusedqkv.gguf", 4, 4.0, 3, False),
    ("phi3_r4", "arch2/phi3.gguf", 4, 8.0, 4, True),
    ("qwen2_r16", "arch2/qwen2.gguf", 16, 16.0, 5, True),
    # Rank 4 over the other architectures (falcon: fused QKV of one KV
    # head, whose Hugging Face layout is the same as GGUF's).
    ("gemma_r4", "arch/gemma.gguf", 4, 8.0, 6, True),
    ("gemma2_r4", "arch/gemma2.gguf", 4, 8.0, 7, False),
    ("falcon_r4", "arch/falcon.gguf", 4, 8.0, 8, True),
    ("stablelm_r4", "arch/stablelm.gguf", 4, 8.0, 9, False),
    ("llama3_r4", "arch2/llama3.gguf", 4, 8.0, 10, False),
    ("qwen3_r4", "arch2/qwen3.gguf", 4, 8.0, 11, False),
    ("gemma3_r4", "arch2/gemma3.gguf", 4, 8.0, 12, False),
    ("smollm3_r4", "arch2/smollm3.gguf", 4, 8.0, 13, True),
]


def hf_rows(b, heads):
    """Inverse of convert_hf_to_gguf's llama permute on the rows of b."""
    rows = b.shape[0]
    return b.reshape(heads, rows // heads // 2, 2, *b.shape[1:]).swapaxes(1, 2).reshape(b.shape)


def gguf_rows(b, heads):
    """convert_hf_to_gguf's llama permute (Hugging Face rows to GGUF's)."""
    rows = b.shape[0]
    return b.reshape(heads, 2, rows // heads // 2, *b.shape[1:]).swapaxes(1, 2).reshape(b.shape)


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, arr in tensors.items():
        data = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for d in blobs:
            f.write(d)


def main(models):
    for name, base, rank, alpha, seed, peft in ADAPTERS:
        r = gguf.GGUFReader(os.path.join(models, base))
        arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
        heads = int(r.fields[f"{arch}.attention.head_count"].parts[-1][0])
        kv_heads = int(r.fields[f"{arch}.attention.head_count_kv"].parts[-1][0])
        rng = np.random.default_rng(seed)
        w = gguf.GGUFWriter(os.path.join(OUT, name + ".gguf"), arch)
        w.add_type(gguf.GGUFType.ADAPTER)
        w.add_string(gguf.Keys.Adapter.TYPE, "lora")
        w.add_float32(gguf.Keys.Adapter.LORA_ALPHA, alpha)
        peft_tensors, modules = {}, set()
        for t in r.tensors:
            parts = t.name.split(".")
            if parts[0] != "blk" or parts[-1] != "weight" or len(t.shape) != 2 or "norm" in parts[2]:
                continue
            n_in, n_out = int(t.shape[0]), int(t.shape[1])
            a = rng.normal(0, 0.1, (rank, n_in)).astype(np.float32)
            b = rng.normal(0, 0.1, (n_out, rank)).astype(np.float32)
            w.add_tensor(t.name + ".lora_a", a)
            w.add_tensor(t.name + ".lora_b", b)
            if peft:
                mod = HF[arch][parts[2]]
                modules.add(mod.split(".")[-1])
                hb = b
                if arch in ("llama", "smollm3") and parts[2] in ("attn_q", "attn_k"):
                    hb = hf_rows(b, heads if parts[2] == "attn_q" else kv_heads)
                    assert np.array_equal(gguf_rows(hb, heads if parts[2] == "attn_q" else kv_heads), b)
                key = f"base_model.model.{LAYERS.get(arch, 'model.layers')}.{parts[1]}.{mod}"
                peft_tensors[key + ".lora_A.weight"] = a
                peft_tensors[key + ".lora_B.weight"] = hb
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        if peft:
            d = os.path.join(OUT, name + ".peft")
            os.makedirs(d, exist_ok=True)
            write_safetensors(os.path.join(d, "adapter_model.safetensors"), peft_tensors)
            cfg = {"peft_type": "LORA", "base_model_name_or_path": base, "r": rank, "lora_alpha": alpha,
                   "target_modules": sorted(modules), "bias": "none", "use_rslora": False,
                   "task_type": "CAUSAL_LM"}
            with open(os.path.join(d, "adapter_config.json"), "w") as f:
                json.dump(cfg, f, indent=1, sort_keys=True)
                f.write("\n")


def bench_adapter(path, rank=16):
    """A random rank-16 adapter on every projection of the llama-110m
    synthetic shape (dim 768, hidden 2048, 12 layers, 12 heads), for
    measuring unmerged adapters' cost (not committed: 11 MB):
    /usr/bin/python3 testdata/lora/gen.py --bench110m /tmp/lora110m.gguf"""
    rng = np.random.default_rng(110)
    w = gguf.GGUFWriter(path, "llama")
    w.add_type(gguf.GGUFType.ADAPTER)
    w.add_string(gguf.Keys.Adapter.TYPE, "lora")
    w.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(rank))
    dims = {"attn_q": (768, 768), "attn_k": (768, 768), "attn_v": (768, 768), "attn_output": (768, 768),
            "ffn_gate": (768, 2048), "ffn_up": (768, 2048), "ffn_down": (2048, 768)}
    for layer in range(12):
        for name, (n_in, n_out) in dims.items():
            t = f"blk.{layer}.{name}.weight"
            w.add_tensor(t + ".lora_a", rng.normal(0, 0.02, (rank, n_in)).astype(np.float32))
            w.add_tensor(t + ".lora_b", rng.normal(0, 0.02, (n_out, rank)).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--bench110m":
        bench_adapter(sys.argv[2])
    else:
        main(sys.argv[1] if len(sys.argv) > 1 else "../shared/models")
