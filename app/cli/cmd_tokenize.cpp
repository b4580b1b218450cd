// gkq tokenize MODEL|VOCAB [--text S | --file F] [--no-bos] [--parse-special] [--json]: the token ids (and pieces)
// of a text, as llama.cpp's llama-tokenize prints them.
#include "cli/args.h"
#include "cli/commands.h"

#include "gkq/tokenizer.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

namespace gkq::cli {

int cmd_tokenize(int argc, char** argv) {
    std::string path;
    std::string text;
    std::string file;
    bool no_bos = false;
    bool parse_special = false;
    bool json = false;
    ArgParser p("gkq tokenize MODEL|VOCAB [--text S | --file F] [--no-bos] [--parse-special] [--json]",
                "Tokenizes a text with a model's tokenizer and prints one line per token: the id and its piece\n"
                "(as llama.cpp's llama-tokenize does). MODEL|VOCAB is a GGUF (any vocabulary, vocab-only files\n"
                "too), a Hugging Face tokenizer.json or sentencepiece tokenizer.model (or a model folder holding\n"
                "one: tokenizer.model first, special tokens from its tokenizer_config.json and config.json), or a\n"
                "llama2.c tokenizer .bin.\n"
                "BOS is added when the vocabulary asks for it (add_bos_token), unless --no-bos; EOS when it asks\n"
                "for that (add_eos_token).");
    p.positional("MODEL|VOCAB", "model or tokenizer file", &path);
    p.option("--text", "S", "the text to tokenize", &text);
    p.option("-f,--file", "F", "read the text from file F (bytes as they are)", &file);
    p.flag("--no-bos", "never add the BOS token", &no_bos);
    p.flag("--parse-special", "turn special-token text (e.g. <|im_start|>) into those tokens", &parse_special);
    p.flag("--json", "print one JSON document (tokenizer, ids, pieces)", &json);
    switch (p.parse(argc, argv)) {
        case ParseOutcome::Help: return kExitOk;
        case ParseOutcome::Error: return kExitBadInput;
        case ParseOutcome::Ok: break;
    }
    if (p.given("--text") == !file.empty()) {
        std::fprintf(stderr, "gkq tokenize: give exactly one of --text and --file (see --help)\n");
        return kExitBadInput;
    }
    if (!file.empty()) {
        std::ifstream in(file, std::ios::binary);
        if (!in) {
            std::fprintf(stderr, "gkq tokenize: %s: cannot open\n", file.c_str());
            return kExitBadInput;
        }
        std::ostringstream ss;
        ss << in.rdbuf();
        if (in.bad()) {
            std::fprintf(stderr, "gkq tokenize: %s: read failed\n", file.c_str());
            return kExitFailure;
        }
        text = ss.str();
    }
    auto tok = Tokenizer::load(path);
    if (!tok) {
        std::fprintf(stderr, "gkq tokenize: %s\n", tok.message().c_str());
        return exit_code(tok.status());
    }
    const bool bos = tok->add_bos() && !no_bos;
    const std::vector<int32_t> ids = tok->encode(text, bos, tok->add_eos(), parse_special);
    if (json) {
        nlohmann::json pieces = nlohmann::json::array();
        for (int32_t id : ids) pieces.push_back(tok->piece(id));
        auto opt_id = [](int32_t id) { return id >= 0 ? nlohmann::json(id) : nlohmann::json(); };
        nlohmann::json j = {{"tokenizer",
                             {{"family", std::string(tokenizer_family_name(tok->family()))},
                              {"pre", tok->pre()},
                              {"size", tok->vocab_size()},
                              {"bos_id", opt_id(tok->bos_id())},
                              {"eos_id", opt_id(tok->eos_id())},
                              {"eot_id", opt_id(tok->eot_id())},
                              {"pad_id", opt_id(tok->pad_id())},
                              {"add_bos", tok->add_bos()}}},
                            {"n_tokens", ids.size()},
                            {"ids", ids},
                            {"pieces", pieces}};
        std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
        for (int32_t id : ids) std::printf("%6d -> '%s'\n", id, tok->piece(id).c_str());
    }
    return kExitOk;
}

}  // namespace gkq::cli
