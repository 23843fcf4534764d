#!/bin/sh
# Regenerates testdata/gptoss: a tiny random gpt-oss GGUF (gen.py) and
# llama.cpp's logits on it (the prompt and greedy steps of
# ../shared/models/arch2's goldens, by ../lora/golden.c against libllama).
# Run from the repository root:
#   LLAMA=/work/llama sh testdata/gptoss/gen.sh
# LLAMA is a llama.cpp checkout built with cmake in $LLAMA/build.
set -eu
LLAMA=${LLAMA:-/work/llama}
M=${MODELS:-../shared/models}
D=testdata/gptoss
GGUF_PY=$LLAMA/gguf-py /usr/bin/python3 $D/gen.py "$M" $D/gpt-oss.gguf
bin=$(mktemp -d)/golden
cc -O2 -o "$bin" testdata/lora/golden.c -I"$LLAMA/include" -I"$LLAMA/ggml/include" -L"$LLAMA/build/bin" -lllama -Wl,-rpath,"$LLAMA/build/bin"
"$bin" $D/gpt-oss.gguf 24 2>/dev/null >$D/gpt-oss.golden.json
# Its experts in MXFP4 (llama-quantize's MXFP4_MOE: the experts only, as
# gpt-oss is published), the other matrices as they are.
"$LLAMA/build/bin/llama-quantize" $D/gpt-oss.gguf $D/gpt-oss-mxfp4.gguf MXFP4_MOE >/dev/null 2>&1
"$bin" $D/gpt-oss-mxfp4.gguf 24 2>/dev/null >$D/gpt-oss-mxfp4.golden.json
