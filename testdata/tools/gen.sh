#!/bin/sh
# Regenerates testdata/tools/tiny-tools.tflite: a tiny Llama of random
# weights (../shared/tools/genckpt.c: dim 64, FFN 128, 2 layers, 4 heads,
# the 512-piece vocabulary of ../shared/models/tok512.model, a 2048-token
# context, seed 7) in int8, carrying that tokenizer and chat.jinja, a
# template with tools: a context long enough for a tool-call prompt, which
# the 128-token test models lack. Run from the repository root:
#   sh testdata/tools/gen.sh
set -eu
M=${MODELS:-../shared/models}
D=testdata/tools
tmp=$(mktemp -d)
cc -O2 -o "$tmp/genckpt" ../shared/tools/genckpt.c -lm
"$tmp/genckpt" "$tmp/tiny.bin" 64 128 2 4 4 512 2048 7
go run ./cmd/gpurun convert "$tmp/tiny.bin" --tokenizer "$M/tok512.model" --chat-template $D/chat.jinja --quant int8 -o $D/tiny-tools.tflite -q
rm -r "$tmp"
