// gkq logits MODEL|KNOT (--ids 1,2,3 | --text S) -o FILE [--npy] [--tokenizer F] [--threads N]: the logits of
// every position of one sequence, from a fresh state, for comparing runtimes and debugging a port.
#include "cli/args.h"
#include "cli/commands.h"

#include "gkq/atomic_file.h"
#include "gkq/tokenizer.h"
#include "gkq/transformer.h"
#include "gkq/workflows.h"

#include <cstdio>
#include <string>
#include <vector>

namespace gkq::cli {

namespace {

// NumPy's .npy format 1.0: magic, version, a little-endian u16 header length, the header dict padded with spaces
// to a multiple of 64 bytes (newline last), then the C-order little-endian float32 data.
std::string npy_header(int64_t rows, int64_t cols) {
    std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                       std::to_string(cols) + "), }";
    const size_t prefix = 10;  // magic (6), version (2), header length (2)
    size_t total = prefix + dict.size() + 1;
    total = (total + 63) / 64 * 64;
    dict.append(total - prefix - dict.size() - 1, ' ');
    dict += '\n';
    std::string out("\x93NUMPY\x01\x00", 8);
    const auto n = static_cast<uint16_t>(dict.size());
    out += static_cast<char>(n & 0xFF);
    out += static_cast<char>(n >> 8);
    return out + dict;
}

}  // namespace

int cmd_logits(int argc, char** argv) {
    std::string model_path;
    std::string text;
    std::string output;
    std::string tokenizer_path;
    std::vector<int32_t> ids;
    bool npy = false;
    int64_t threads = 0;
    std::string activations = "f32";
    ArgParser p("gkq logits MODEL|KNOT (--ids LIST | --text S) -o FILE [--npy] [--tokenizer F] [--threads N]",
                "Runs one sequence through the model from a fresh state and writes the logits of every position:\n"
                "n_tokens x n_vocab float32, row by row, little-endian (raw, or a NumPy .npy file with --npy).\n"
                "--ids runs exactly the given token ids (no BOS added); --text is tokenized as generate does\n"
                "(BOS first when the vocabulary has one). The ids run are printed to stderr.");
    p.positional("MODEL|KNOT", "model file or folder (llama2.c .bin, GGUF, safetensors) or a knot", &model_path);
    p.option_ids("--ids", "LIST", "comma-separated token ids, e.g. 1,2,3", &ids);
    p.option("--text", "S", "text to tokenize and run", &text);
    p.option("-o,--output", "FILE", "where to write the logits", &output);
    p.flag("--npy", "write a NumPy .npy file (float32, shape (n_tokens, n_vocab))", &npy);
    p.option("--tokenizer", "FILE", "llama2.c tokenizer.bin for --text instead of the model's own", &tokenizer_path);
    p.option_int("--threads", "N", "threads per matrix product (default 0: all cores; the logits do not depend on it)",
                 &threads, 0, 1024);
    p.option_choice("--activations", "A", kActivationsF32Help, &activations, {"q8", "f32"});
    switch (p.parse(argc, argv)) {
        case ParseOutcome::Help: return kExitOk;
        case ParseOutcome::Error: return kExitBadInput;
        case ParseOutcome::Ok: break;
    }
    if (p.given("--ids") == p.given("--text")) {
        std::fprintf(stderr, "gkq logits: give exactly one of --ids and --text (see --help)\n");
        return kExitBadInput;
    }
    if (output.empty()) {
        std::fprintf(stderr, "gkq logits: missing -o FILE (see --help)\n");
        return kExitBadInput;
    }
    if (Status s = check_output_not_input(output, model_input_files(model_path)); !s) {
        std::fprintf(stderr, "gkq logits: %s\n", s.message().c_str());
        return exit_code(s);
    }
    TransformerOptions options;
    options.n_threads = static_cast<int>(threads);
    options.q8_activations = activations == "q8";
    TokenizerChoice choice;
    choice.given = tokenizer_path;
    choice.hint = "pass --tokenizer FILE, or --ids";
    // With --text, the tokenizer first, then the weights.
    auto model = open_model_to_run(model_path, options, p.given("--text") ? &choice : nullptr);
    if (!model) {
        std::fprintf(stderr, "gkq logits: %s\n", model.message().c_str());
        return exit_code(model.status());
    }
    if (p.given("--text")) {
        const Tokenizer* tokenizer = &*model->tokenizer;
        ids = tokenizer->encode(text, tokenizer->add_bos(), false);
        if (ids.empty()) {
            std::fprintf(stderr, "gkq logits: the text encodes to no tokens\n");
            return kExitBadInput;
        }
    }
    Transformer& t = *model->transformer;
    const auto n = static_cast<int64_t>(ids.size());
    if (n > t.n_context()) {
        std::fprintf(stderr, "gkq logits: %lld tokens do not fit the context of %lld positions\n",
                     static_cast<long long>(n), static_cast<long long>(t.n_context()));
        return kExitBadInput;
    }
    const int64_t vocab = model->config.vocab_size;
    std::vector<float> logits(static_cast<size_t>(n * vocab));
    auto last = t.forward_batch(ids.data(), n, 0, logits.data());
    if (!last) {
        std::fprintf(stderr, "gkq logits: %s\n", last.message().c_str());
        return exit_code(last.status());
    }
    auto file = AtomicFile::create(output);
    Status s = file ? Status::ok() : file.status();
    if (s && npy) s = file->write(npy_header(n, vocab));
    if (s) s = file->write(logits.data(), logits.size() * sizeof(float));
    if (s) s = file->commit();
    if (!s) {
        std::fprintf(stderr, "gkq logits: %s\n", s.message().c_str());
        return exit_code(s);
    }
    std::string list;
    for (int32_t id : ids) list += (list.empty() ? "" : ",") + std::to_string(id);
    std::fprintf(stderr, "ids %s\n%lld positions x %lld logits (float32%s) written to %s\n", list.c_str(),
                 static_cast<long long>(n), static_cast<long long>(vocab), npy ? ", .npy" : ", raw", output.c_str());
    return kExitOk;
}

}  // namespace gkq::cli
