// tests/hf/hf_tokenizer_reference.js: the reference for tests/hf/test_hf_tokenizer.cpp.
//   node hf_tokenizer_reference.js MODULES DIR IN.json OUT.json
// Loads DIR/tokenizer.json and DIR/tokenizer_config.json into @huggingface/tokenizers (the
// JavaScript port of Hugging Face tokenizers, installed under MODULES/node_modules) and writes,
// for each input string, {"plain": ids without special tokens, "special": ids with the
// post-processor's special tokens, "nfc": the string in Unicode NFC}.
const fs = require('fs');
const path = require('path');
const [modules, dir, input, output] = process.argv.slice(2);
if (!output) {
  console.error('usage: node hf_tokenizer_reference.js MODULES DIR IN.json OUT.json');
  process.exit(2);
}
const { Tokenizer } = require(path.join(modules, 'node_modules', '@huggingface', 'tokenizers'));
const json = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8'));
const config = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'));
const tok = new Tokenizer(json, config);
const texts = JSON.parse(fs.readFileSync(input, 'utf8'));
const out = texts.map((s) => ({
  plain: tok.encode(s, { add_special_tokens: false }).ids,
  special: tok.encode(s, { add_special_tokens: true }).ids,
  nfc: s.normalize('NFC'),
}));
fs.writeFileSync(output, JSON.stringify(out));
