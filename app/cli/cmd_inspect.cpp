// gkq inspect [FILE] [--json]: what a model file or a knot holds, exactly as stored, and whether it can run.
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/demo_model.h"

#include "gkq/arch.h"
#include "gkq/knot.h"
#include "gkq/model_check.h"
#include "gkq/model_file.h"
#include "gkq/tokenizer.h"
#include "gkq/weights.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <set>

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

// The tensors the file holds: a fused tensor (Phi-3's attn_qkv) is listed as one view per role.
size_t stored_count(const ModelFile& m) {
    std::set<std::string_view> names;
    for (const Tensor& t : m.tensors()) {
        std::string_view stored = t.name;
        TensorRole part = TensorRole::Other;
        split_part_view_name(t.name, stored, part);
        names.insert(stored);
    }
    return names.size();
}

nlohmann::json config_json(const ModelConfig& c) {
    nlohmann::json j = {{"architecture", c.architecture},
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
    // what only some architectures set, shown when set
    if (c.head_dim > 0) j["head_dim"] = c.head_dim;
    if (c.sliding_window > 0) j["sliding_window"] = c.sliding_window;
    if (c.sliding_window_pattern > 0) j["sliding_window_pattern"] = c.sliding_window_pattern;
    if (c.rope_local_theta > 0.0) j["rope_local_theta"] = c.rope_local_theta;
    if (c.attn_softcap > 0.0) j["attn_softcap"] = c.attn_softcap;
    if (c.final_softcap > 0.0) j["final_softcap"] = c.final_softcap;
    if (c.query_pre_attn_scalar > 0) j["query_pre_attn_scalar"] = c.query_pre_attn_scalar;
    if (c.rope_scaling != RopeScaling::None) {
        const char* type = c.rope_scaling == RopeScaling::Linear   ? "linear"
                           : c.rope_scaling == RopeScaling::Llama3 ? "llama3"
                                                                   : "unsupported";
        j["rope_scaling"] = {{"type", type}, {"factor", c.rope_factor}};
        if (c.rope_scaling == RopeScaling::Llama3) {
            j["rope_scaling"]["low_freq_factor"] = c.rope_low_freq_factor;
            j["rope_scaling"]["high_freq_factor"] = c.rope_high_freq_factor;
            j["rope_scaling"]["original_context"] = c.rope_original_context;
        }
    }
    return j;
}

// The tokenizer the model's commands use (its own vocabulary, else the tokenizer.bin beside it): family, size and
// special ids (null when absent), the ids generation ends at; {"error": ...} when there is none or it cannot be built.
nlohmann::json tokenizer_json(const std::string& path, const Vocabulary& vocab, int64_t vocab_size) {
    auto t = tokenizer_for_model(path, vocab, vocab_size);
    if (!t) return {{"error", t.message()}};
    auto id = [](int32_t v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(); };
    const SpecialIds& s = t->special_ids();
    return {{"family", std::string(tokenizer_family_name(t->family()))},
            {"pre", t->pre()},
            {"size", t->vocab_size()},
            {"bos_id", id(t->bos_id())},
            {"eos_id", id(t->eos_id())},
            {"eot_id", id(s.eot)},
            {"eom_id", id(s.eom)},
            {"fim_ids",
             {{"pre", id(s.fim_pre)},
              {"suf", id(s.fim_suf)},
              {"mid", id(s.fim_mid)},
              {"pad", id(s.fim_pad)},
              {"rep", id(s.fim_rep)},
              {"sep", id(s.fim_sep)}}},
            {"eog_ids", t->eog_ids()},
            {"pad_id", id(t->pad_id())},
            {"add_bos", t->add_bos()}};
}

// The same as one line of the table: "tokenizer bpe (llama-bpe), 128256 tokens, bos 128000, eos 128001, eot 128009,
// generation ends at 128001 128009"; EOM and the fill-in-the-middle ids where the vocabulary has them ("eom 128008",
// "fim pre 151659 suf 151661 mid 151660 pad 151662 rep 151663 sep 151664").
void print_tokenizer_line(const std::string& path, const Vocabulary& vocab, int64_t vocab_size) {
    auto t = tokenizer_for_model(path, vocab, vocab_size);
    if (!t) {
        std::printf("tokenizer none: %s\n", t.message().c_str());
        return;
    }
    auto id = [](int32_t v) { return v >= 0 ? std::to_string(v) : std::string("none"); };
    std::string ends;
    for (const int32_t e : t->eog_ids()) ends += " " + std::to_string(e);
    const std::string pre = t->pre().empty() ? "" : " (" + t->pre() + ")";
    const SpecialIds& s = t->special_ids();
    std::string more;
    if (s.eom >= 0) more += ", eom " + std::to_string(s.eom);
    std::string fim;
    for (const auto& [name, v] : {std::pair{"pre", s.fim_pre},
                                  {"suf", s.fim_suf},
                                  {"mid", s.fim_mid},
                                  {"pad", s.fim_pad},
                                  {"rep", s.fim_rep},
                                  {"sep", s.fim_sep}})
        if (v >= 0) fim += std::string(" ") + name + " " + std::to_string(v);
    if (!fim.empty()) more += ", fim" + fim;
    std::printf("tokenizer %s%s, %d tokens, bos %s, eos %s, eot %s%s, generation ends at%s\n",
                std::string(tokenizer_family_name(t->family())).c_str(), pre.c_str(), t->vocab_size(),
                id(t->bos_id()).c_str(), id(t->eos_id()).c_str(), id(t->eot_id()).c_str(), more.c_str(),
                ends.empty() ? " BOS only" : ends.c_str());
}

void print_json(const ModelFile& m, const std::vector<std::string>& warnings) {
    nlohmann::json j;
    j["path"] = m.path();
    j["format"] = std::string(model_format_name(m.format()));
    j["format_detail"] = m.format_detail();
    j["architecture"] = m.config().architecture;
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
    if (const size_t stored = stored_count(m); stored != m.tensors().size()) j["n_stored_tensors"] = stored;
    j["n_params"] = m.n_params();
    j["n_bytes"] = m.n_tensor_bytes();
    j["file_bytes"] = m.file_bytes();
    j["bits_per_weight"] = bits_per_weight(m);
    nlohmann::json meta = nlohmann::json::object();
    for (const auto& [k, v] : m.metadata().entries) meta[k] = v.to_display();
    j["metadata"] = std::move(meta);
    j["vocabulary"] = {{"model", m.vocabulary().model}, {"n_tokens", m.vocabulary().tokens.size()}};
    j["tokenizer"] = tokenizer_json(m.path(), m.vocabulary(), m.config().vocab_size);
    j["warnings"] = warnings;
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
    print_tokenizer_line(m.path(), m.vocabulary(), c.vocab_size);

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
    const size_t stored = stored_count(m);
    const std::string in_file =
        stored != m.tensors().size() ? " (" + std::to_string(stored) + " in the file, fused ones listed by part)" : "";
    std::printf(
        "\ntotal    %zu tensors%s, %s parameters, %s bytes of tensor data (%.2f bits per weight); file %s bytes\n",
        m.tensors().size(), in_file.c_str(), with_commas(static_cast<uint64_t>(m.n_params())).c_str(),
        with_commas(m.n_tensor_bytes()).c_str(), bits_per_weight(m), with_commas(m.file_bytes()).c_str());
}

// What keeps the forward pass from computing the architecture (generate, eval and serve refuse it), then the
// model-consistency problems (gkq/model_check.h).
std::vector<std::string> with_architecture(const ModelConfig& c, std::vector<std::string> problems) {
    if (std::string p = architecture_problem(c); !p.empty()) problems.insert(problems.begin(), "cannot run: " + p);
    return problems;
}

// The model-consistency problems (gkq/model_check.h), printed as warnings: the file is still listed.
void print_warnings(const std::string& path, const std::vector<std::string>& warnings) {
    for (const std::string& w : warnings)
        std::fprintf(stderr, "gkq inspect: warning: %s: %s\n", path.c_str(), w.c_str());
    if (!warnings.empty())
        std::fprintf(stderr, "gkq inspect: warning: %s: the model cannot run (%zu problem%s)\n", path.c_str(),
                     warnings.size(), warnings.size() == 1 ? "" : "s");
}

// ---- knots ----------------------------------------------------------------------------------------------------

double record_bpw(const KnotEntry& e) {
    const int64_t n = e.n_elements();
    return n > 0 ? 8.0 * static_cast<double>(e.record_bytes) / static_cast<double>(n) : 0.0;
}

// A low-rank + residual record's residual type (the reader has refused codes that name none); Other otherwise.
DType residual_of(const KnotEntry& e) {
    return e.method == Method::LowRankResidual ? residual_code_type(e.residual_code).value_or(DType::Other)
                                               : DType::Other;
}

// Bits per stored weight as text: the factor bits ("2"), factor bits + the residual's type ("8+q4_0", "8+q4_k"), or
// the dense type's.
std::string bits_text(const KnotEntry& e) {
    switch (e.method) {
        case Method::LowRank: return std::to_string(e.factor_bits);
        case Method::LowRankResidual:
            return std::to_string(e.factor_bits) + "+" + std::string(dtype_name(residual_of(e)));
        default: return std::to_string(method_code_bits(e.method));
    }
}

struct KnotTotals {
    int64_t n_params = 0;
    uint64_t record_bytes = 0;
};

KnotTotals knot_totals(const KnotFile& k) {
    KnotTotals t;
    for (const KnotEntry& e : k.entries()) {
        t.n_params += e.n_elements();
        t.record_bytes += e.record_bytes;
    }
    return t;
}

double file_bpw(const KnotFile& k, const KnotTotals& t) {
    return t.n_params > 0 ? 8.0 * static_cast<double>(k.file_bytes()) / static_cast<double>(t.n_params) : 0.0;
}

void print_knot_json(const KnotFile& k, const std::vector<std::string>& warnings) {
    const KnotHeader& h = k.header();
    const KnotTotals tot = knot_totals(k);
    nlohmann::json j;
    j["path"] = k.path();
    j["format"] = "knot";
    j["format_detail"] = "knot v" + std::to_string(kKnotVersion) + (k.gzipped() ? " (gzipped)" : "");
    j["producer"] = h.producer;
    j["command"] = h.command;
    j["shard"] = {{"index", h.shard_index}, {"count", h.shard_count}};
    j["n_source_tensors"] = h.n_source_tensors;
    j["architecture"] = h.config.architecture;
    j["config"] = config_json(h.config);
    j["vocabulary"] = {{"model", h.vocab.model}, {"n_tokens", h.vocab.tokens.size()}};
    j["tokenizer"] = tokenizer_json(k.path(), h.vocab, h.config.vocab_size);
    nlohmann::json records = nlohmann::json::array();
    for (const KnotEntry& e : k.entries())
        records.push_back(
            {{"name", e.name},
             {"role", std::string(role_name(e.role))},
             {"layer", e.layer},
             {"shape", e.shape},
             {"method", std::string(method_name(e.method))},
             {"rank", e.rank},
             {"factor_bits", e.factor_bits},
             {"residual", residual_of(e) != DType::Other ? nlohmann::json(std::string(dtype_name(residual_of(e))))
                                                         : nlohmann::json()},
             {"residual_bits",
              residual_of(e) != DType::Other ? method_code_bits(*block_method_for(residual_of(e))) : 0},
             {"compression", e.compression == KnotCompression::Zlib ? "zlib" : "none"},
             {"stored_bytes", e.stored_bytes},
             {"raw_bytes", e.raw_bytes},
             {"record_bytes", e.record_bytes},
             {"bits_per_weight", record_bpw(e)}});
    j["records"] = std::move(records);
    j["n_records"] = k.n_records();
    j["n_params"] = tot.n_params;
    j["record_bytes"] = tot.record_bytes;
    j["file_bytes"] = k.file_bytes();
    j["bits_per_weight"] = file_bpw(k, tot);
    nlohmann::json meta = nlohmann::json::object();
    for (const auto& [key, v] : h.metadata.entries) meta[key] = v.to_display();
    j["metadata"] = std::move(meta);
    j["warnings"] = warnings;
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

void print_knot_table(const KnotFile& k) {
    const KnotHeader& h = k.header();
    const ModelConfig& c = h.config;
    const KnotTotals tot = knot_totals(k);
    std::printf("file     %s\n", k.path().c_str());
    std::printf("format   knot v%u%s, written by %s\n", kKnotVersion, k.gzipped() ? " (gzipped)" : "",
                h.producer.c_str());
    std::printf("command  %s\n", h.command.c_str());
    if (h.shard_count > 1) std::printf("shard    %u/%u\n", h.shard_index, h.shard_count);
    std::printf(
        "config   arch %s  dim %lld  hidden %lld  layers %lld  heads %lld  kv_heads %lld  vocab %lld  "
        "context %lld  rope_theta %g  norm_eps %g\n",
        c.architecture.c_str(), static_cast<long long>(c.dim), static_cast<long long>(c.hidden_dim),
        static_cast<long long>(c.n_layers), static_cast<long long>(c.n_heads), static_cast<long long>(c.n_kv_heads),
        static_cast<long long>(c.vocab_size), static_cast<long long>(c.context_length), c.rope_theta, c.norm_eps);
    if (h.vocab.empty())
        std::printf("vocab    none (generate, eval and serve need --tokenizer)\n");
    else
        std::printf("vocab    %zu tokens (%s)\n", h.vocab.tokens.size(), h.vocab.model.c_str());
    print_tokenizer_line(k.path(), h.vocab, c.vocab_size);

    size_t name_w = 4;
    for (const KnotEntry& e : k.entries()) name_w = std::max(name_w, e.name.size());
    const int w = static_cast<int>(name_w);
    std::printf("\n%-*s  %-11s  %5s  %-14s  %-16s  %4s  %5s  %12s  %7s\n", w, "name", "role", "layer", "shape",
                "method", "rank", "bits", "bytes", "bpw");
    for (const KnotEntry& e : k.entries()) {
        const std::string layer = e.layer >= 0 ? std::to_string(e.layer) : "-";
        const std::string rank = e.rank > 0 ? std::to_string(e.rank) : "-";
        std::printf("%-*s  %-11s  %5s  %-14s  %-16s  %4s  %5s  %12s  %7.3f\n", w, e.name.c_str(),
                    std::string(role_name(e.role)).c_str(), layer.c_str(), shape_to_string(e.shape).c_str(),
                    std::string(method_name(e.method)).c_str(), rank.c_str(), bits_text(e).c_str(),
                    with_commas(e.record_bytes).c_str(), record_bpw(e));
    }
    std::printf("\ntotal    %zu records, %s parameters, %s bytes of records; file %s bytes = %.3f bits per weight\n",
                k.n_records(), with_commas(static_cast<uint64_t>(tot.n_params)).c_str(),
                with_commas(tot.record_bytes).c_str(), with_commas(k.file_bytes()).c_str(), file_bpw(k, tot));
    std::printf(
        "         a record's bytes are its descriptor, stored payload and CRC; the file adds the header, "
        "config/tokenizer block, index and trailer\n");
}

}  // namespace

int cmd_inspect(int argc, char** argv) {
    std::string path;
    bool json = false;
    ArgParser p("gkq inspect [FILE] [--json]",
                "Lists the format, architecture and every tensor (name, role, layer, shape, type, bytes) of a model:\n"
                "safetensors (file, folder, or model.safetensors.index.json), GGUF v2/v3, llama2.c checkpoint; or\n"
                "of a knot: its config, tokenizer and every record (method, rank, bits, bytes, bits per weight).\n"
                "What keeps the model from running (a missing tensor, a shape the config contradicts) is printed\n"
                "as warnings on stderr, and the file is still listed.");
    p.positional("FILE", "model file or folder, or a knot " + demo_model_help(), &path, false);
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
    if (is_knot_path(path)) {
        auto knot = KnotFile::open(path);
        if (!knot) {
            std::fprintf(stderr, "gkq inspect: %s\n", knot.message().c_str());
            return exit_code(knot.status());
        }
        const KnotHeader& h = knot->header();
        const std::vector<std::string> warnings = with_architecture(
            h.config, h.shard_count == 1 ? model_problems(h.config, knot->entries()) : config_problems(h.config));
        print_warnings(path, warnings);
        if (json)
            print_knot_json(*knot, warnings);
        else
            print_knot_table(*knot);
        return kExitOk;
    }
    auto model = ModelFile::open(path);
    if (!model) {
        std::fprintf(stderr, "gkq inspect: %s\n", model.message().c_str());
        return exit_code(model.status());
    }
    const std::vector<std::string> warnings =
        with_architecture(model->config(), model_problems(model->config(), model->tensors()));
    print_warnings(model->path(), warnings);
    if (json)
        print_json(*model, warnings);
    else
        print_table(*model);
    return kExitOk;
}

}  // namespace gkq::cli
