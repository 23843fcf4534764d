#!/bin/sh
# Regenerates testdata/lora: the adapters (gen.py) and llama.cpp's outputs
# with them (golden.c against libllama). Run from the repository root:
#   LLAMA=/work/llama sh testdata/lora/gen.sh
# LLAMA is a llama.cpp checkout built with cmake in $LLAMA/build.
set -eu
LLAMA=${LLAMA:-/work/llama}
M=${MODELS:-../shared/models}
D=testdata/lora
GGUF_PY=$LLAMA/gguf-py /usr/bin/python3 $D/gen.py "$M"
bin=$(mktemp -d)/golden
cc -O2 -o "$bin" $D/golden.c -I"$LLAMA/include" -I"$LLAMA/ggml/include" -L"$LLAMA/build/bin" -lllama -Wl,-rpath,"$LLAMA/build/bin"
g() { out=$1; shift; "$bin" "$@" 2>/dev/null >"$D/$out.golden.json"; }
# case           base                             steps adapters and scales
g llama_r4       "$M/arch/llama.gguf"             24 $D/llama_r4.gguf 1
g llama_r16_half "$M/arch/llama.gguf"             24 $D/llama_r16.gguf 0.5
g llama_two      "$M/arch/llama.gguf"             24 $D/llama_r4.gguf 1 $D/llama_r16.gguf 0.5
g llama-q8_0_r4  "$M/arch/llama-q8_0.gguf"        24 $D/llama_r4.gguf 1
g phi2_fusedqkv_r4 "$M/arch/phi2_fusedqkv.gguf"   24 $D/phi2_fusedqkv_r4.gguf 1
g phi3_r4        "$M/arch2/phi3.gguf"             24 $D/phi3_r4.gguf 1
g qwen2_r16      "$M/arch2/qwen2.gguf"            24 $D/qwen2_r16.gguf 1
g gemma_r4       "$M/arch/gemma.gguf"             8 $D/gemma_r4.gguf 1
g gemma2_r4      "$M/arch/gemma2.gguf"            8 $D/gemma2_r4.gguf 1
g falcon_r4      "$M/arch/falcon.gguf"            8 $D/falcon_r4.gguf 1
g stablelm_r4    "$M/arch/stablelm.gguf"          8 $D/stablelm_r4.gguf 1
g llama3_r4      "$M/arch2/llama3.gguf"           8 $D/llama3_r4.gguf 1
g qwen3_r4       "$M/arch2/qwen3.gguf"            8 $D/qwen3_r4.gguf 1
g gemma3_r4      "$M/arch2/gemma3.gguf"           8 $D/gemma3_r4.gguf 1
g smollm3_r4     "$M/arch2/smollm3.gguf"          8 $D/smollm3_r4.gguf 1
