// benchmarks/tokenizer/hf_tokenizers_encode.js: the baseline of BM_Encode/.../impl:huggingface_js.
//   node hf_tokenizers_encode.js MODULES DIR TEXT REPS
// Loads DIR/tokenizer.json into @huggingface/tokenizers (installed under MODULES/node_modules),
// encodes the file TEXT once to warm up, then REPS times, and prints
// {"seconds": [one per repetition], "tokens": ids of one encode} as JSON on stdout.
const fs = require('fs');
const path = require('path');
const [modules, dir, textFile, repsArg] = process.argv.slice(2);
if (!repsArg) {
  console.error('usage: node hf_tokenizers_encode.js MODULES DIR TEXT REPS');
  process.exit(2);
}
const { Tokenizer } = require(path.join(modules, 'node_modules', '@huggingface', 'tokenizers'));
const json = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8'));
const config = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'));
const tok = new Tokenizer(json, config);
const text = fs.readFileSync(textFile, 'utf8');
let tokens = tok.encode(text, { add_special_tokens: false }).ids.length;
const seconds = [];
for (let i = 0; i < Number(repsArg); ++i) {
  const t0 = process.hrtime.bigint();
  tokens = tok.encode(text, { add_special_tokens: false }).ids.length;
  seconds.push(Number(process.hrtime.bigint() - t0) / 1e9);
}
process.stdout.write(JSON.stringify({ seconds, tokens }));
