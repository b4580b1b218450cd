// llama.cpp's greedy continuation of a token sequence (tests/peer/llama_cpp_peer.sh; reusable for any architecture
// llama.cpp loads):
//   node greedy.mjs [--f32-kv] MODEL.gguf N ID [ID ...]
// loads MODEL.gguf with node-llama-cpp (its prebuilt llama.cpp, CPU only, no GPU layers; --f32-kv: an f32 KV cache
// and no flash attention, as tests/fixtures-tools/dump_logits.c runs it), evaluates the given ids (the
// caller includes BOS when the model wants it) and decodes greedily (temperature 0, no repeat penalty) until N
// tokens, an end-of-generation token or BOS. Prints two lines: the continuation's ids, and the JSON string of
// llama.cpp's text of the given ids after the first plus the continuation (llama_detokenize, special tokens not
// rendered), which is what `gkq generate -p TEXT` prints when the ids are BOS + TEXT's tokens. Exits 1 with
// llama.cpp's message when it refuses the file.
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const args = process.argv.slice(2);
const f32Kv = args[0] === "--f32-kv";
if (f32Kv) args.shift();
const [modelPath, nText, ...idTexts] = args;
const n = Number(nText);
const ids = idTexts.map(Number);
if (!modelPath || !Number.isInteger(n) || n <= 0 || ids.length === 0 || !ids.every(Number.isInteger)) {
    console.error("usage: node greedy.mjs [--f32-kv] MODEL.gguf N ID [ID ...]");
    process.exit(2);
}

try {
    const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
    const model = await llama.loadModel({modelPath, gpuLayers: 0});
    const exact = f32Kv ? {flashAttention: false, experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32"}
                        : {};
    const context =
        await model.createContext({contextSize: Math.min(model.trainContextSize, 4096), threads: 1, ...exact});
    const sequence = context.getSequence();
    const bos = model.tokens.bos;
    const out = [];
    for await (const token of sequence.evaluate(ids, {temperature: 0, yieldEogToken: true})) {
        if (model.isEogToken(token) || token === bos) break;
        out.push(token);
        if (out.length >= n) break;
    }
    console.log(out.join(" "));
    console.log(JSON.stringify(model.detokenize([...ids.slice(1), ...out])));
    await context.dispose();
    await model.dispose();
    await llama.dispose();
} catch (e) {
    console.error(`llama.cpp: ${modelPath}: ${e && e.message ? e.message : e}`);
    process.exit(1);
}
