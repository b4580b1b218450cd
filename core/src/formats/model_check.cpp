// The model-consistency check (see gkq/model_check.h).
#include "gkq/model_check.h"

#include "common/byte_reader.h"
#include "gkq/arch.h"
#include "gkq/naming.h"

#include <cmath>
#include <map>
#include <utility>

namespace gkq {

namespace {

// Sizes beyond this many floats in one buffer are refused rather than attempted (the transformer's limit).
constexpr uint64_t kMaxFloats = uint64_t{1} << 36;

struct Problem {
    StatusCode code;
    std::string text;
};

std::vector<Problem> config_issues(const ModelConfig& c) {
    std::vector<Problem> p;
    auto bad = [&](std::string what) { p.push_back({StatusCode::Unsupported, std::move(what)}); };
    if (c.dim <= 0 || c.hidden_dim <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 ||
        c.vocab_size <= 0 || c.context_length <= 0) {
        bad("config has a non-positive size (dim " + std::to_string(c.dim) + ", hidden_dim " +
            std::to_string(c.hidden_dim) + ", n_layers " + std::to_string(c.n_layers) + ", n_heads " +
            std::to_string(c.n_heads) + ", n_kv_heads " + std::to_string(c.n_kv_heads) + ", vocab_size " +
            std::to_string(c.vocab_size) + ", context_length " + std::to_string(c.context_length) + ")");
        return p;  // the ratios below would divide by zero
    }
    if (c.head_dim <= 0 && c.dim % c.n_heads != 0)
        bad("dim " + std::to_string(c.dim) + " is not a multiple of n_heads " + std::to_string(c.n_heads));
    else if (c.head_size() % 2 != 0)
        bad("head size " + std::to_string(c.head_size()) + " is odd; rotary embeddings rotate pairs");
    if (c.n_heads % c.n_kv_heads != 0)
        bad("n_heads " + std::to_string(c.n_heads) + " is not a multiple of n_kv_heads " +
            std::to_string(c.n_kv_heads));
    if (!(c.rope_theta > 0.0) || !std::isfinite(c.rope_theta))
        bad("rope_theta " + std::to_string(c.rope_theta) + " is not a positive number");
    if (!(c.norm_eps >= 0.0) || !std::isfinite(c.norm_eps))
        bad("norm_eps " + std::to_string(c.norm_eps) + " is not a non-negative number");
    if ((c.rope_scaling == RopeScaling::Linear || c.rope_scaling == RopeScaling::Llama3) &&
        (!(c.rope_factor > 0.0) || !std::isfinite(c.rope_factor)))
        bad("rope scaling factor " + std::to_string(c.rope_factor) + " is not a positive number");
    if (c.rope_scaling == RopeScaling::Llama3 &&
        (!(c.rope_high_freq_factor > c.rope_low_freq_factor) || !(c.rope_low_freq_factor > 0.0) ||
         !std::isfinite(c.rope_high_freq_factor)))
        bad("llama3 rope scaling needs 0 < low_freq_factor < high_freq_factor, not " +
            std::to_string(c.rope_low_freq_factor) + " and " + std::to_string(c.rope_high_freq_factor));
    if (c.partial_rotary_factor > 0.0 && c.partial_rotary_factor < 1.0)
        bad("partial rotary embeddings (partial_rotary_factor " + std::to_string(c.partial_rotary_factor) +
            "): gkq rotates whole heads, so it would compute another model");
    if (c.rope_dims > 0 && c.head_size() > 0 && c.rope_dims != c.head_size())
        bad("rotary embeddings over " + std::to_string(c.rope_dims) + " of the " + std::to_string(c.head_size()) +
            " dims of each head (rope.dimension_count): gkq rotates whole heads, so it would compute another model");
    bool too_big = false;
    for (int64_t v : {c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.vocab_size, c.context_length, c.head_dim})
        too_big = too_big || static_cast<uint64_t>(v) > kMaxFloats;
    uint64_t n = 0;
    if (too_big) {
        bad("a size exceeds " + std::to_string(kMaxFloats));
    } else if (!checked_mul(static_cast<uint64_t>(c.vocab_size), static_cast<uint64_t>(c.dim), n) || n > kMaxFloats ||
               !checked_mul(static_cast<uint64_t>(c.hidden_dim), static_cast<uint64_t>(c.dim), n) || n > kMaxFloats) {
        bad("a weight matrix would hold more than " + std::to_string(kMaxFloats) + " floats");
    }
    return p;
}

// The tensors the forward pass reads, in its order: the row of the architecture (llama's for one the table lacks).
std::vector<RequiredRole> required_tensors(const ModelConfig& c, bool shared_classifier) {
    return required_roles(arch_or_default(c.architecture), c, shared_classifier);
}

std::vector<Problem> issues(const ModelConfig& config, const std::vector<TensorInfo>& tensors) {
    std::vector<Problem> p = config_issues(config);
    std::map<std::pair<TensorRole, int32_t>, const TensorInfo*> by_role;
    for (const TensorInfo& t : tensors)
        if (t.role != TensorRole::Other) by_role.emplace(std::make_pair(t.role, t.layer), &t);
    // Without a sane config the expected shapes mean nothing; a lone tensor is still told what is missing.
    if (!p.empty() && (config.n_layers <= 0 || config.n_layers > 100000)) {
        if (by_role.find({TensorRole::TokenEmbd, -1}) == by_role.end())
            p.push_back({StatusCode::NotFound, "no tensor " + gguf_name(TensorRole::TokenEmbd, -1) + " (role " +
                                                   std::string(role_name(TensorRole::TokenEmbd)) + ")"});
        return p;
    }
    const bool shared = by_role.find({TensorRole::Output, -1}) == by_role.end();
    const bool sizes_ok = p.empty();
    for (const RequiredRole& req : required_tensors(config, shared)) {
        auto it = by_role.find({req.role, req.layer});
        if (it == by_role.end() && req.optional) continue;
        if (it == by_role.end()) {
            p.push_back({StatusCode::NotFound, "no tensor " + gguf_name(req.role, req.layer) + " (role " +
                                                   std::string(role_name(req.role)) + ")"});
            continue;
        }
        if (sizes_ok && it->second->shape != req.shape)
            p.push_back({StatusCode::Corrupt, "tensor " + it->second->name + " has shape " +
                                                  shape_to_string(it->second->shape) + ", the config needs " +
                                                  shape_to_string(req.shape)});
    }
    for (const TensorInfo& t : tensors)
        if (t.role != TensorRole::Other && t.layer >= config.n_layers)
            p.push_back({StatusCode::Corrupt, "tensor " + t.name + " is in block " + std::to_string(t.layer) +
                                                  " but the config has " + std::to_string(config.n_layers) +
                                                  " blocks"});
    return p;
}

std::vector<TensorInfo> checked(const std::vector<Tensor>& tensors) {
    return std::vector<TensorInfo>(tensors.begin(), tensors.end());
}

std::vector<TensorInfo> checked(const std::vector<KnotEntry>& entries) {
    return std::vector<TensorInfo>(entries.begin(), entries.end());
}

std::vector<std::string> texts(const std::vector<Problem>& p) {
    std::vector<std::string> out;
    out.reserve(p.size());
    for (const Problem& x : p) out.push_back(x.text);
    return out;
}

}  // namespace

std::string architecture_problem(const ModelConfig& c) {
    const std::string arch = "architecture '" + c.architecture + "'";
    const ArchSpec* a = find_arch(c.architecture);
    if (a == nullptr) {
        if (const UnsupportedArch* u = find_unsupported_arch(c.architecture))
            return arch + " needs " + std::string(u->missing) + ", which gkq does not run (" + arch_names_list() +
                   " run)";
        return arch + " is not supported (" + arch_names_list() + " are)";
    }
    // The block features of every row are computed (gkq/arch.h BlockFlags); these come from a config.
    std::string missing;
    auto lacks = [&](bool has, const std::string& what) {
        if (has && missing.empty()) missing = what;
    };
    lacks(c.n_experts > 0, "a mixture-of-experts feed-forward (" + std::to_string(c.n_experts) + " experts)");
    lacks(c.rope_scaling == RopeScaling::Unsupported, "its rope scaling type (gkq computes linear and llama3)");
    lacks(c.sliding_window > 0 && !a->block.sliding_window, "a sliding attention window");
    if (missing.empty()) return {};
    return arch + " needs " + missing + ", which gkq does not run";
}

std::vector<std::string> config_problems(const ModelConfig& config) {
    return texts(config_issues(config));
}

std::vector<std::string> model_problems(const ModelConfig& config, const std::vector<TensorInfo>& tensors) {
    return texts(issues(config, tensors));
}
std::vector<std::string> model_problems(const ModelConfig& config, const std::vector<Tensor>& tensors) {
    return model_problems(config, checked(tensors));
}
std::vector<std::string> model_problems(const ModelConfig& config, const std::vector<KnotEntry>& entries) {
    return model_problems(config, checked(entries));
}

Status check_model(const std::string& label, const ModelConfig& config, const std::vector<TensorInfo>& tensors) {
    const std::vector<Problem> p = issues(config, tensors);
    if (p.empty()) return Status::ok();
    std::string more = p.size() > 1 ? " (and " + std::to_string(p.size() - 1) + " more)" : "";
    return error(p.front().code, label + ": " + p.front().text + more);
}
Status check_model(const std::string& label, const ModelConfig& config, const std::vector<Tensor>& tensors) {
    return check_model(label, config, checked(tensors));
}
Status check_model(const std::string& label, const ModelConfig& config, const std::vector<KnotEntry>& entries) {
    return check_model(label, config, checked(entries));
}

}  // namespace gkq
