// gkq inspect [FILE] [--json]: what a model file holds, exactly as stored.
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/demo_model.h"

#include "gkq/model_file.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>

namespace gkq::cli {

namespace {

std::string dtype_label(const Tensor& t) {
    if (t.dtype != DType::Other && t.dtype != DType::Q8_G) return std::string(dtype_name(t.dtype));
    std::string s = t.type_name;
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

double bits_per_weight(const ModelFile& m) {
    const int64_t n = m.n_params();
    return n > 0 ? 8.0 * static_cast<double>(m.n_tensor_bytes()) / static_cast<double>(n) : 0.0;
}

nlohmann::json config_json(const ModelConfig& c) {
    return {{"architecture", c.architecture},
            {"dim", c.dim},
            {"hidden_dim", c.hidden_dim},
            {"n_layers", c.n_layers},
            {"n_heads", c.n_heads},
            {"n_kv_heads", c.n_kv_heads},
            {"vocab_size", c.vocab_size},
            {"context_length", c.context_length},
            {"rope_theta", c.rope_theta},
            {"norm_eps", c.norm_eps},
            {"shared_classifier", c.shared_classifier}};
}

void print_json(const ModelFile& m) {
    nlohmann::json j;
    j["path"] = m.path();
    j["format"] = std::string(model_format_name(m.format()));
    j["format_detail"] = m.format_detail();
    j["config"] = config_json(m.config());
    nlohmann::json tensors = nlohmann::json::array();
    for (const Tensor& t : m.tensors()) {
        tensors.push_back({{"name", t.name},
                           {"role", std::string(role_name(t.role))},
                           {"layer", t.layer},
                           {"shape", t.shape},
                           {"dtype", dtype_label(t)},
                           {"bytes", t.n_bytes + t.n_scale_bytes},
                           {"offset", t.file_offset}});
    }
    j["tensors"] = std::move(tensors);
    j["n_tensors"] = m.tensors().size();
    j["n_params"] = m.n_params();
    j["n_bytes"] = m.n_tensor_bytes();
    j["file_bytes"] = m.file_bytes();
    j["bits_per_weight"] = bits_per_weight(m);
    nlohmann::json meta = nlohmann::json::object();
    for (const auto& [k, v] : m.metadata().entries) meta[k] = v.to_display();
    j["metadata"] = std::move(meta);
    j["vocabulary"] = {{"model", m.vocabulary().model}, {"n_tokens", m.vocabulary().tokens.size()}};
    // Tensor names and metadata may hold arbitrary bytes: replace invalid UTF-8 rather than fail.
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

void print_table(const ModelFile& m) {
    const ModelConfig& c = m.config();
    std::printf("file     %s\n", m.path().c_str());
    std::printf("format   %s\n", m.format_detail().c_str());
    std::printf(
        "config   arch %s  dim %lld  hidden %lld  layers %lld  heads %lld  kv_heads %lld  vocab %lld  "
        "context %lld  rope_theta %g  norm_eps %g  classifier %s\n",
        c.architecture.c_str(), static_cast<long long>(c.dim), static_cast<long long>(c.hidden_dim),
        static_cast<long long>(c.n_layers), static_cast<long long>(c.n_heads), static_cast<long long>(c.n_kv_heads),
        static_cast<long long>(c.vocab_size), static_cast<long long>(c.context_length), c.rope_theta, c.norm_eps,
        c.shared_classifier ? "shared with token_embd" : "separate");
    if (!m.vocabulary().empty())
        std::printf("vocab    %zu tokens (%s)\n", m.vocabulary().tokens.size(), m.vocabulary().model.c_str());

    size_t name_w = 4;
    for (const Tensor& t : m.tensors()) name_w = std::max(name_w, t.name.size());
    std::printf("\n%-*s  %-11s  %5s  %-14s  %-8s  %12s\n", static_cast<int>(name_w), "name", "role", "layer", "shape",
                "dtype", "bytes");
    for (const Tensor& t : m.tensors()) {
        std::string layer = t.layer >= 0 ? std::to_string(t.layer) : "-";
        std::printf("%-*s  %-11s  %5s  %-14s  %-8s  %12s\n", static_cast<int>(name_w), t.name.c_str(),
                    std::string(role_name(t.role)).c_str(), layer.c_str(), shape_to_string(t.shape).c_str(),
                    dtype_label(t).c_str(), with_commas(t.n_bytes + t.n_scale_bytes).c_str());
    }
    std::printf(
        "\ntotal    %zu tensors, %s parameters, %s bytes of tensor data (%.2f bits per weight); file %s bytes\n",
        m.tensors().size(), with_commas(static_cast<uint64_t>(m.n_params())).c_str(),
        with_commas(m.n_tensor_bytes()).c_str(), bits_per_weight(m), with_commas(m.file_bytes()).c_str());
}

}  // namespace

int cmd_inspect(int argc, char** argv) {
    std::string path;
    bool json = false;
    ArgParser p("gkq inspect [FILE] [--json]",
                "Lists the format, architecture and every tensor (name, role, layer, shape, type, bytes) of a model:\n"
                "safetensors (file, folder, or model.safetensors.index.json), GGUF v2/v3, llama2.c checkpoint.");
    p.positional("FILE", "model file or folder " + demo_model_help(), &path, false);
    p.flag("--json", "print one JSON document (format, config, tensors[], n_params, n_bytes, ...) instead of a table",
           &json);
    switch (p.parse(argc, argv)) {
        case ParseOutcome::Help: return kExitOk;
        case ParseOutcome::Error: return kExitBadInput;
        case ParseOutcome::Ok: break;
    }
    if (path.empty()) path = demo_model_dir();
    if (path.empty()) {
        std::fprintf(stderr, "gkq inspect: missing FILE (no bundled demo model was found; see --help)\n");
        return kExitBadInput;
    }
    auto model = ModelFile::open(path);
    if (!model) {
        std::fprintf(stderr, "gkq inspect: %s\n", model.message().c_str());
        return exit_code(model.status());
    }
    if (json)
        print_json(*model);
    else
        print_table(*model);
    return kExitOk;
}

}  // namespace gkq::cli
