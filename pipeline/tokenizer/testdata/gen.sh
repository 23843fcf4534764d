#!/bin/sh
# Regenerates the tokenizer conformance data with the reference SentencePiece
# tools (spm_train, spm_encode, spm_decode; written against 0.1.97).
#
# Inputs: corpus.txt (training text and test input) and edge.txt (test input
# only) from the gencorpus generator. For every model it records
#   <name>.<input>.ids      spm_encode --output_format=id, one line per input line
#   <name>.<input>.decoded  spm_decode --input_format=id of those ids
# The tok512 expectations use ../shared/models/tok512.model from the repo root;
# that model is not copied here.
set -eu
cd "$(dirname "$0")"
REPO=$(cd ../../.. && pwd)
TOK512="$REPO/../shared/models/tok512.model"

go run ./gencorpus corpus.txt edge.txt

common="--input=corpus.txt --num_threads=1 --random_seed=1 --input_sentence_size=0 \
  --shuffle_input_sentence=false --minloglevel=2"

# (a) unigram, default nmt_nfkc normalization, no byte fallback: exercises
# unknown characters.
spm_train $common --model_prefix=unigram --model_type=unigram --vocab_size=800 \
  --character_coverage=0.98
# (b) BPE with NFKC, digit splitting and byte fallback.
spm_train $common --model_prefix=bpe_nfkc --model_type=bpe --vocab_size=1000 \
  --normalization_rule_name=nmt_nfkc --split_digits=true --byte_fallback=true \
  --character_coverage=0.995
# (c) BPE without dummy prefix or whitespace cleanup, with user-defined
# symbols (one is a prefix of another, one contains the space symbol).
spm_train $common --model_prefix=bpe_raw --model_type=bpe --vocab_size=900 \
  --add_dummy_prefix=false --remove_extra_whitespaces=false \
  --normalization_rule_name=identity --character_coverage=0.985 \
  --user_defined_symbols='<sep>,<sep2>,[MASK],🚀,ab,▁the,ＡＢＣ'
# (d) unigram with byte fallback, user-defined and control symbols.
spm_train $common --model_prefix=unigram_bytes --model_type=unigram --vocab_size=800 \
  --byte_fallback=true --character_coverage=0.98 \
  --user_defined_symbols='<sep>,[MASK],ab' --control_symbols='<cls>,<mask>'
rm -f ./*.vocab

for m in unigram bpe_nfkc bpe_raw unigram_bytes tok512; do
	model="$m.model"
	[ "$m" = tok512 ] && model="$TOK512"
	for in in corpus edge; do
		spm_encode --model="$model" --output_format=id <"$in.txt" >"$m.$in.ids"
		spm_decode --model="$model" --input_format=id <"$m.$in.ids" >"$m.$in.decoded"
	done
done
