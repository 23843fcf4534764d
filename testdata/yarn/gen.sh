#!/bin/sh
# Regenerates testdata/yarn: ../shared/models/arch2/qwen3.gguf with YaRN
# RoPE scaling (factor 4 over an original context of 32, as Qwen3 is run
# past its trained context), and llama.cpp's logits on it (the prompt and
# greedy steps of ../shared/models/arch2's goldens, by ../lora/golden.c
# against libllama). Run from the repository root:
#   LLAMA=/work/llama sh testdata/yarn/gen.sh
# LLAMA is a llama.cpp checkout built with cmake in $LLAMA/build.
set -eu
LLAMA=${LLAMA:-/work/llama}
M=${MODELS:-../shared/models}
D=testdata/yarn
GGUF_PY=$LLAMA/gguf-py /usr/bin/python3 $D/addkv.py "$M/arch2/qwen3.gguf" $D/qwen3-yarn.gguf \
	qwen3.rope.scaling.type=str:yarn qwen3.rope.scaling.factor=f32:4 qwen3.rope.scaling.original_context_length=u32:32
bin=$(mktemp -d)/golden
cc -O2 -o "$bin" testdata/lora/golden.c -I"$LLAMA/include" -I"$LLAMA/ggml/include" -L"$LLAMA/build/bin" -lllama -Wl,-rpath,"$LLAMA/build/bin"
"$bin" $D/qwen3-yarn.gguf 24 2>/dev/null >$D/qwen3-yarn.golden.json
# The same prompt on the unscaled model, to show the scaling matters.
"$bin" "$M/arch2/qwen3.gguf" 24 2>/dev/null >$D/qwen3-plain.golden.json
