// Whole-corpus check of the C++ GPT-2 BPE against the reference JavaScript encoder.
// Usage (after `prepare-data --tokenizer byte --out B` and `--tokenizer gpt2 --out G` on the
// same corpus):  node lib/data/tools/check_gpt2_corpus.js B G [node_modules]
// The byte files hold the exact text; the JavaScript encoder runs on chunks cut after a single
// '\n' between two non-space characters (always a pre-token boundary), because its output
// concatenation is quadratic on one long input.
const fs = require('fs');
const [prefixByte, prefixGpt2, modules = __dirname + '/../../../third_party/npm/node_modules'] = process.argv.slice(2);
const enc = require(modules + '/gpt-3-encoder');
function u16(p) {
  const b = fs.readFileSync(p);
  const a = new Array(b.length / 2);
  for (let i = 0; i < a.length; i++) a[i] = b[2 * i] | (b[2 * i + 1] << 8);
  return a;
}
const text = Buffer.from(u16(prefixByte + '.train.bin').concat(u16(prefixByte + '.val.bin'))).toString('utf-8');
const mine = u16(prefixGpt2 + '.train.bin').concat(u16(prefixGpt2 + '.val.bin'));
const t0 = Date.now();
const ids = [];
let start = 0;
while (start < text.length) {
  let end = Math.min(text.length, start + 20000);
  while (end < text.length && !(text[end - 1] === '\n' && !/\s/u.test(text[end - 2]) && !/\s/u.test(text[end]))) end++;
  for (const x of enc.encode(text.slice(start, end))) ids.push(x);
  start = end;
}
let first = -1;
for (let i = 0; i < Math.max(ids.length, mine.length); i++)
  if (ids[i] !== mine[i]) { first = i; break; }
console.log(`javascript ${ids.length} tokens in ${(Date.now() - t0) / 1000} s; c++ ${mine.length} tokens; ` +
            (first < 0 ? 'identical' : `first difference at token ${first}`));
process.exit(first < 0 ? 0 : 1);
