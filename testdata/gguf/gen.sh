#!/bin/sh
# Regenerates the quantized test GGUFs of this directory and llama.cpp's
# reference outputs for them (README.md says what each file is). It runs an
# existing llama.cpp build's tools; it does not build llama.cpp.
#
#   LLAMA_BIN=/path/to/llama.cpp/build/bin GENCKPT=/path/to/genckpt sh gen.sh
#
# GENCKPT is ../shared/tools/genckpt.c built with `cc -O2 -o genckpt genckpt.c -lm`.
set -eu
: "${LLAMA_BIN:?set LLAMA_BIN to the bin directory of a llama.cpp CPU build (upstream commit 81ff7abe5)}"
: "${GENCKPT:?set GENCKPT to ../shared/tools/genckpt, built}"
here=$(cd "$(dirname "$0")" && pwd)
shared=${SHARED:-$here/../../../shared}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# k256: a one-layer llama with rows of 256, so that every K-quant type
# applies (the ../shared/models/arch models have rows of 32 to 128, which
# take llama-quantize's fallback types instead).
"$GENCKPT" "$tmp/k256.bin" 256 256 1 4 4 512 64 1
"$LLAMA_BIN/llama-convert-llama2c-to-ggml" --copy-vocab-from-model "$shared/models/tok512.bin" \
	--llama2c-model "$tmp/k256.bin" --llama2c-output-model "$tmp/k256.gguf" >"$tmp/log" 2>&1
for a in llama gemma gemma2 phi2 falcon stablelm; do
	cp "$shared/models/arch/$a.gguf" "$tmp/$a.gguf"
done

rm -f "$here"/*.gguf "$here"/*.kld
for job in k256:Q4_K_M k256:Q5_K_M k256:Q6_K k256:Q4_0 k256:Q2_K \
	llama:Q4_K_M llama:Q5_K_M \
	gemma:Q6_K gemma2:Q4_K_M phi2:Q4_K_M falcon:Q5_K_M stablelm:Q4_0; do
	src=${job%%:*}
	mix=${job#*:}
	out=$src-$mix
	# The quantized file (default mix for the type), llama.cpp's F32
	# dequantization of it, and llama.cpp's log-probabilities on it.
	"$LLAMA_BIN/llama-quantize" "$tmp/$src.gguf" "$here/$out.gguf" "$mix" >"$tmp/log" 2>&1
	"$LLAMA_BIN/llama-quantize" --allow-requantize "$here/$out.gguf" "$tmp/$out-f32.gguf" F32 >"$tmp/log" 2>&1
	"$LLAMA_BIN/llama-perplexity" -m "$here/$out.gguf" -f "$here/text.txt" -c 32 -b 32 --chunks 2 -t 1 \
		--kl-divergence-base "$here/$out.kld" >"$tmp/log" 2>&1
	echo "$out $tmp/$out-f32.gguf"
done >"$tmp/list"

# golden.json: per quantized file, the SHA-256 of every tensor's data in
# llama.cpp's F32 dequantization (f32 little-endian, ggml row order) and the
# ggml type of every tensor in the quantized file.
python3 - "$tmp/list" "$here" >"$here/golden.json" <<'EOF'
import hashlib, json, struct, sys

def read_gguf(path):
    data = open(path, 'rb').read()
    pos = 0
    def take(fmt):
        nonlocal pos
        v = struct.unpack_from('<' + fmt, data, pos)
        pos += struct.calcsize('<' + fmt)
        return v[0]
    def string():
        nonlocal pos
        n = take('Q')
        s = data[pos:pos + n].decode()
        pos += n
        return s
    sizes = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: '?', 10: 'Q', 11: 'q', 12: 'd'}
    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take('I'), take('Q')
            return [value(et) for _ in range(n)]
        return take(sizes[t])
    assert data[:4] == b'GGUF'
    pos = 4
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
    base = (pos + align - 1) // align * align
    return data, base, infos

names = {0: 'F32', 1: 'F16', 2: 'Q4_0', 3: 'Q4_1', 6: 'Q5_0', 7: 'Q5_1', 8: 'Q8_0', 10: 'Q2_K', 11: 'Q3_K', 12: 'Q4_K', 13: 'Q5_K', 14: 'Q6_K'}
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
EOF
