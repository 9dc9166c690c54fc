// hf_tokenizer.js - encodes a text with the tokenizer of a HuggingFace model
// directory as transformers.js loads it (its port @lenml/tokenizers, which
// t_tokenize installs from npm): DIR/tokenizer.json and tokenizer_config.json,
// no special tokens added. Prints the ids separated by spaces.
//
//   node hf_tokenizer.js MODULES DIR INPUT
'use strict';
const fs = require('fs');
const path = require('path');

const [modules, dir, input] = process.argv.slice(2);
const { TokenizerLoader } = require(path.join(modules, 'node_modules', '@lenml/tokenizers'));
const read = (name) => JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8'));
const tok = TokenizerLoader.fromPreTrained({
    tokenizerJSON: read('tokenizer.json'),
    tokenizerConfig: read('tokenizer_config.json'),
});
const ids = tok.encode(fs.readFileSync(input, 'utf8'), { add_special_tokens: false });
process.stdout.write(ids.join(' ') + '\n');
