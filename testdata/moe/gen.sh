#!/bin/sh
# Regenerates testdata/moe: ../shared/models/arch2/qwen3moe.gguf quantized by
# llama.cpp's llama-quantize, and llama.cpp's logits on each file (the
# prompt and greedy steps of ../shared/models/arch2's goldens, by
# ../lora/golden.c against libllama, no adapters). Run from the repository
# root:
#   LLAMA=/work/llama sh testdata/moe/gen.sh
# LLAMA is a llama.cpp checkout built with cmake in $LLAMA/build.
#
#   qwen3moe-q8_0    every matrix Q8_0: the experts stay Q8_0 blocks
#                    (tensors.Q8_0), the dense matrices become int8
#   qwen3moe-q4_k_m  llama.cpp's Q4_K_M mix on rows of 64 values (too
#                    short for K-quants): Q5_0 and Q8_0 experts, one layer
#                    mixing them (gate and up Q5_0, down Q8_0)
set -eu
LLAMA=${LLAMA:-/work/llama}
M=${MODELS:-../shared/models}
D=testdata/moe
bin=$(mktemp -d)/golden
cc -O2 -o "$bin" testdata/lora/golden.c -I"$LLAMA/include" -I"$LLAMA/ggml/include" -L"$LLAMA/build/bin" -lllama -Wl,-rpath,"$LLAMA/build/bin"
for q in q8_0 q4_k_m; do
	"$LLAMA/build/bin/llama-quantize" "$M/arch2/qwen3moe.gguf" "$D/qwen3moe-$q.gguf" "$(echo $q | tr a-z A-Z)" >/dev/null 2>&1
	"$bin" "$D/qwen3moe-$q.gguf" 24 2>/dev/null >"$D/qwen3moe-$q.golden.json"
done
