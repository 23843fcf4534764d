// Reads [{pattern, flags, texts}] as JSON on stdin and writes, for each
// case and text, the [start, end) code-point ranges of JavaScript's
// non-empty matches (RegExp with the given flags plus "g").
// Used by TestRegexMatchesJavaScript (internal/bpe).
const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const cases = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const out = cases.map(({ pattern, flags, texts }) => {
  const re = new RegExp(pattern, flags + "g");
  return texts.map((text) => {
    const ranges = [];
    for (const m of text.matchAll(re)) {
      if (m[0].length === 0) continue;
      const start = Array.from(text.slice(0, m.index)).length;
      ranges.push([start, start + Array.from(m[0]).length]);
    }
    return ranges;
  });
});
process.stdout.write(JSON.stringify(out));
