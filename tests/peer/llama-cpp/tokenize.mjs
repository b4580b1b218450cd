// llama.cpp's tokens of a text (tests/peer/llama_cpp_peer.sh): node tokenize.mjs MODEL.gguf TEXT prints the ids
// llama_tokenize gives TEXT (no BOS added, special-token text not parsed), space-separated.
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const [modelPath, text] = process.argv.slice(2);
if (!modelPath || text === undefined) {
    console.error("usage: node tokenize.mjs MODEL.gguf TEXT");
    process.exit(2);
}
try {
    const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
    const model = await llama.loadModel({modelPath, gpuLayers: 0});
    console.log(model.tokenize(text, false).join(" "));
    await model.dispose();
    await llama.dispose();
} catch (e) {
    console.error(`llama.cpp: ${modelPath}: ${e && e.message ? e.message : e}`);
    process.exit(1);
}
