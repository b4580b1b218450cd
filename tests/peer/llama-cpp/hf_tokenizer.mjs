// Writes a Hugging Face tokenizer.json and tokenizer_config.json of 259 tokens (the forward-pass fixture models'
// vocabulary size) into a model folder, for the peer test's HF-export cases (tests/peer/llama_cpp_peer.sh):
//   node hf_tokenizer.mjs DIR bpe|spm
// bpe: byte-level BPE (GPT-2's pre-tokenizer): the 256 byte characters of GPT-2's bytes_to_unicode as ids 0..255,
// one merge ("Ġ t", id 256), <|begin_of_text|> 257 and <|end_of_text|> 258 (special; BOS and EOS, add_bos_token).
// spm: byte-fallback BPE, as Hugging Face writes a sentencepiece model: <unk> 0, <s> 1, </s> 2, <0x00>..<0xFF>,
// no merges and no "▁" piece (a space falls back to the bytes of U+2581), a "▁" Prepend normalizer.
import {writeFileSync} from "node:fs";

const [dir, family] = process.argv.slice(2);
if (!dir || (family !== "bpe" && family !== "spm")) {
    console.error("usage: node hf_tokenizer.mjs DIR bpe|spm");
    process.exit(2);
}
let tok, config;
if (family === "bpe") {
    // GPT-2's bytes_to_unicode(): printable bytes stand for themselves, the others for 256 + n
    const printable = [];
    for (let b = 33; b <= 126; ++b) printable.push(b);
    for (let b = 161; b <= 172; ++b) printable.push(b);
    for (let b = 174; b <= 255; ++b) printable.push(b);
    const vocab = {};
    let extra = 0;
    for (let b = 0; b < 256; ++b)
        vocab[String.fromCodePoint(printable.includes(b) ? b : 256 + extra++)] = b;
    vocab["\u0120t"] = 256;
    tok = {
        version: "1.0",
        added_tokens: [
            {id: 257, content: "<|begin_of_text|>", special: true},
            {id: 258, content: "<|end_of_text|>", special: true},
        ],
        pre_tokenizer: {type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true},
        model: {type: "BPE", vocab, merges: ["\u0120 t"]},
    };
    config = {bos_token: "<|begin_of_text|>", eos_token: "<|end_of_text|>", add_bos_token: true};
} else {
    const vocab = {"<unk>": 0, "<s>": 1, "</s>": 2};
    for (let b = 0; b < 256; ++b) vocab[`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`] = 3 + b;
    tok = {
        version: "1.0",
        added_tokens: [
            {id: 0, content: "<unk>", special: true},
            {id: 1, content: "<s>", special: true},
            {id: 2, content: "</s>", special: true},
        ],
        normalizer: {
            type: "Sequence",
            normalizers: [{type: "Prepend", prepend: "\u2581"}, {type: "Replace", pattern: {String: " "}, content: "\u2581"}],
        },
        pre_tokenizer: null,
        model: {type: "BPE", byte_fallback: true, fuse_unk: true, unk_token: "<unk>", vocab, merges: []},
    };
    config = {bos_token: "<s>", eos_token: "</s>", add_bos_token: true, add_eos_token: false};
}
writeFileSync(`${dir}/tokenizer.json`, JSON.stringify(tok));
writeFileSync(`${dir}/tokenizer_config.json`, JSON.stringify(config));
