#!/bin/sh
# Regenerates the tokenizer conformance data with the reference SentencePiece
# tools (spm_train, spm_encode, spm_decode; written against 0.1.97).
#
# Inputs: corpus.txt (training text and test input) and edge.txt (test input
# only) from the gencorpus generator. For every model it records
#   <name>.<input>.ids      spm_encode --output_format=id, one line per input line
#   <name>.<input>.decoded  spm_decode --input_format=id of those ids
#   <name>.<input>.normalized  spm_normalize --use_internal_normalization
#   <name>.vocab.tsv        spm_export_vocab: piece <tab> score per id
# The tok512 expectations use ../shared/models/tok512.model from the repo root;
# that model is not copied here.
set -eu
cd "$(dirname "$0")"
REPO=$(cd ../.. && pwd)
TOK512="$REPO/../shared/models/tok512.model"

go run ./gencorpus corpus.txt edge.txt randids.txt random.txt

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
# (f) char model with whitespace as suffix, no whitespace cleanup and a
# user-defined symbol.
spm_train $common --model_prefix=char_suffix --model_type=char --vocab_size=1000 \
  --hard_vocab_limit=false --character_coverage=0.995 \
  --treat_whitespace_as_suffix=true --remove_extra_whitespaces=false \
  --user_defined_symbols='<sep>,ab'
rm -f ./*.vocab
# (e) tok512.bin through FromVocab: spm_encode checks the proto we write.
go run ./tok512vocab "$REPO/../shared/models/tok512.bin" tok512_fromvocab.model

# Hand-picked id sequences for the tok512 vocabulary (0 <unk>, 1 <s>,
# 2 </s>, 3+b the byte b, 261 "▁a", 410 "▁"): control and unknown pieces,
# leading spaces, complete, truncated and invalid byte sequences.
cat >decode_ids.txt <<'IDS'

1 410 1 261
410 410 261
410 1 261
0 0 0
2 2
1 2 410 261 2
230 132 133
230 132
230 132 261
230 261 132 133
243 162 155 131
243 162 155
243 162 155 131 243 162
195 178
240 163 131
258
68 35 261
35 261
261 35 35
247 247 133 133
1 230 132 133 2 410
IDS
for m in tok512 tok512_fromvocab; do
	model="$m.model"
	[ "$m" = tok512 ] && model="$TOK512"
	spm_decode --model="$model" --input_format=id <decode_ids.txt >"$m.decode_ids.decoded"
	spm_decode --model="$model" --input_format=id <randids.txt >"$m.randids.decoded"
done

# Hand-written models (text format, encoded by protoc with our own schema
# subset) for cases training does not produce: UNUSED pieces, ties,
# user-defined symbols inside words.
for m in bpe_quirks unigram_quirks; do
	protoc --encode=crafted.Model --proto_path=crafted crafted/model.proto <"crafted/$m.txtpb" >"crafted/$m.model"
	spm_encode --model="crafted/$m.model" --output_format=id <crafted/input.txt >"crafted/$m.ids"
	spm_decode --model="crafted/$m.model" --input_format=id <"crafted/$m.ids" >"crafted/$m.decoded"
done

for m in unigram bpe_nfkc bpe_raw unigram_bytes char_suffix tok512 tok512_fromvocab; do
	model="$m.model"
	[ "$m" = tok512 ] && model="$TOK512"
	spm_export_vocab --model="$model" --output_format=vocab >"$m.vocab.tsv"
	for in in corpus edge random; do
		spm_encode --model="$model" --output_format=id <"$in.txt" >"$m.$in.ids"
		spm_decode --model="$model" --input_format=id <"$m.$in.ids" >"$m.$in.decoded"
		spm_normalize --model="$model" --use_internal_normalization <"$in.txt" >"$m.$in.normalized"
	done
done
