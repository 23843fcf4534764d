#!/bin/sh
# Regenerates the I-quant test GGUFs of this directory and llama.cpp's
# reference outputs for them (README.md says what each file is). It runs an
# existing llama.cpp build's tools and a small program linked against its
# libllama (LOGITS, see README.md); it does not build llama.cpp.
#
#   LLAMA_BIN=/path/to/llama.cpp/build/bin GENCKPT=/path/to/genckpt LOGITS=/path/to/logits sh gen.sh
#
# GENCKPT is ../shared/tools/genckpt.c built with `cc -O2 -o genckpt genckpt.c -lm`.
set -eu
: "${LLAMA_BIN:?set LLAMA_BIN to the bin directory of a llama.cpp CPU build (upstream commit 81ff7abe5)}"
: "${GENCKPT:?set GENCKPT to ../shared/tools/genckpt, built}"
: "${LOGITS:?set LOGITS to the logits program of README.md, built against that llama.cpp}"
here=$(cd "$(dirname "$0")" && pwd)
shared=${SHARED:-$here/../../../shared}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# k256: testdata/gguf's one-layer llama whose rows are 256 long (dim 256,
# ffn 256, 4 heads, vocabulary 512, context 64), so every 256-value type
# applies.
"$GENCKPT" "$tmp/k256.bin" 256 256 1 4 4 512 64 1
"$LLAMA_BIN/llama-convert-llama2c-to-ggml" --copy-vocab-from-model "$shared/models/tok512.bin" \
	--llama2c-model "$tmp/k256.bin" --llama2c-output-model "$tmp/k256.gguf" >"$tmp/log" 2>&1

# The importance matrix IQ1_*, IQ2_XXS/XS/S and IQ3_XXS need (ggml's
# quantizers assert one), from llama-imatrix on text.txt, with the output
# matrix (which mix A stores as IQ2_XXS).
"$LLAMA_BIN/llama-imatrix" -m "$tmp/k256.gguf" -f "$here/text.txt" -c 32 -b 32 --chunks 2 -t 1 \
	--process-output -o "$tmp/k256.imatrix.gguf" >"$tmp/log" 2>&1

# Two mixes, every type once or more: A the I-quants (token embedding
# IQ3_S, which needs no importance matrix, output IQ2_XXS, the layer's
# matrices IQ2_XS, IQ2_S, IQ3_XXS, IQ1_S, IQ1_M, IQ4_XS, IQ4_NL), B NVFP4
# and the ternary types.
mix_a="--token-embedding-type iq3_s --output-tensor-type iq2_xxs
	--tensor-type attn_q=iq2_xs --tensor-type attn_k=iq2_s --tensor-type attn_v=iq3_xxs
	--tensor-type attn_output=iq1_s --tensor-type ffn_gate=iq1_m --tensor-type ffn_up=iq4_xs
	--tensor-type ffn_down=iq4_nl"
mix_b="--token-embedding-type tq1_0 --output-tensor-type tq2_0
	--tensor-type attn_q=nvfp4 --tensor-type attn_k=tq1_0 --tensor-type attn_v=tq2_0
	--tensor-type attn_output=nvfp4 --tensor-type ffn_gate=tq1_0 --tensor-type ffn_up=tq2_0
	--tensor-type ffn_down=nvfp4"

rm -f "$here"/*.gguf "$here"/*.logits.json
for job in A B; do
	out=k256-IQ-$job
	if [ "$job" = A ]; then mix=$mix_a; else mix=$mix_b; fi
	# The quantized file (every tensor's type given: Q4_K_M only names a
	# base mix the overrides replace; --pure would ignore them), llama.cpp's
	# F32 dequantization of it, and llama.cpp's logits and greedy ids on it.
	# shellcheck disable=SC2086
	"$LLAMA_BIN/llama-quantize" --imatrix "$tmp/k256.imatrix.gguf" $mix "$tmp/k256.gguf" "$here/$out.gguf" Q4_K_M >"$tmp/log" 2>&1
	"$LLAMA_BIN/llama-quantize" --allow-requantize "$here/$out.gguf" "$tmp/$out-f32.gguf" F32 >"$tmp/log" 2>&1
	"$LOGITS" "$here/$out.gguf" "Once upon a time, there was a little girl named Lily." 8 >"$here/$out.logits.json" 2>"$tmp/log"
	echo "$out $tmp/$out-f32.gguf"
done >"$tmp/list"

# golden.json: per quantized file, the SHA-256 of every tensor's data in
# llama.cpp's F32 dequantization (f32 little-endian, ggml row order) and the
# ggml type of every tensor of the quantized file.
/usr/bin/python3 - "$tmp/list" "$here" >"$here/golden.json" <<'PY'
import hashlib, json, struct, sys

def read_gguf(path):
    data = open(path, 'rb').read()
    pos = 4
    def take(fmt):
        nonlocal pos
        v = struct.unpack_from('<' + fmt, data, pos)[0]
        pos += struct.calcsize('<' + fmt)
        return v
    def string():
        nonlocal pos
        n = take('Q')
        pos += n
        return data[pos - n:pos].decode()
    sizes = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: '?', 10: 'Q', 11: 'q', 12: 'd'}
    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take('I'), take('Q')
            return [value(et) for _ in range(n)]
        return take(sizes[t])
    assert data[:4] == b'GGUF'
    take('I')
    nt, nkv = take('Q'), take('Q')
    kv = {}
    for _ in range(nkv):
        k = string()
        kv[k] = value(take('I'))
    infos = []
    for _ in range(nt):
        name = string()
        dims = [take('Q') for _ in range(take('I'))]
        infos.append((name, dims, take('I'), take('Q')))
    align = kv.get('general.alignment', 32)
    return data, (pos + align - 1) // align * align, infos

names = {0: 'F32', 1: 'F16', 16: 'IQ2_XXS', 17: 'IQ2_XS', 18: 'IQ3_XXS', 19: 'IQ1_S', 20: 'IQ4_NL',
         21: 'IQ3_S', 22: 'IQ2_S', 23: 'IQ4_XS', 29: 'IQ1_M', 34: 'TQ1_0', 35: 'TQ2_0', 40: 'NVFP4'}
out = {}
for line in open(sys.argv[1]):
    name, f32 = line.split()
    data, base, infos = read_gguf(f32)
    sums = {}
    for tname, dims, typ, off in infos:
        assert typ == 0, (f32, tname, typ)
        n = 1
        for d in dims:
            n *= d
        sums[tname] = hashlib.sha256(data[base + off:base + off + 4 * n]).hexdigest()
    _, _, qinfos = read_gguf(sys.argv[2] + '/' + name + '.gguf')
    out[name] = {'f32_sha256': sums, 'types': {t: names.get(typ, str(typ)) for t, _, typ, _ in qinfos}}
json.dump(out, sys.stdout, indent=1, sort_keys=True)
print()
PY
