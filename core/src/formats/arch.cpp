// Lookups over the architecture table and the name patterns' grammar: "%d" in a tensor name pattern stands for
// a block index (decimal, non-negative), "%s" in a GGUF key pattern for the GGUF architecture name. The rows
// themselves are in arch_table.cpp.
#include "gkq/arch.h"

#include <charconv>
#include <cmath>
#include <set>

namespace gkq {

namespace {

constexpr std::string_view kLayerMark = "%d";

// The block index of `name` under `pattern` ("<pre>%d<post>"): the digits after <pre> up to where <post>
// begins. With `whole`, the rest of the name must equal <post>; otherwise it must start with it. -1: no match.
int32_t match_layer(std::string_view pattern, std::string_view name, bool whole) {
    const size_t mark = pattern.find(kLayerMark);
    if (mark == std::string_view::npos) return -1;
    const std::string_view pre = pattern.substr(0, mark);
    const std::string_view post = pattern.substr(mark + kLayerMark.size());
    if (name.substr(0, pre.size()) != pre) return -1;
    name.remove_prefix(pre.size());
    const size_t end = post.empty() ? name.size() : name.find(post.front());
    if (end == 0 || end == std::string_view::npos) return -1;
    int32_t layer = -1;
    auto [p, ec] = std::from_chars(name.data(), name.data() + end, layer);
    if (ec != std::errc() || p != name.data() + end || layer < 0) return -1;
    const std::string_view rest = name.substr(end);
    if (whole ? rest != post : rest.substr(0, post.size()) != post) return -1;
    return layer;
}

std::string_view pattern_of(const TensorSpec& t, NameFormat f) {
    return f == NameFormat::Hf ? t.hf : t.gguf;
}

}  // namespace

int64_t size_value(Size s, const ModelConfig& c) {
    switch (s) {
        case Size::None: return 0;
        case Size::Embd: return c.dim;
        case Size::Ffn: return c.hidden_dim;
        case Size::Vocab: return c.vocab_size;
        case Size::QOut: return c.n_heads * c.head_size();
        case Size::KvOut: return c.n_kv_heads * c.head_size();
        case Size::Head: return c.head_size();
        case Size::HalfHead: return c.head_size() / 2;
    }
    return 0;
}

HParamKind hparam_kind(HParam p) {
    switch (p) {
        case HParam::RopeTheta:
        case HParam::NormEps:
        case HParam::RopeFactor:
        case HParam::RopeLowFreqFactor:
        case HParam::RopeHighFreqFactor:
        case HParam::RopeLocalTheta:
        case HParam::AttnSoftcap:
        case HParam::FinalSoftcap:
        case HParam::PartialRotary: return HParamKind::Real;
        case HParam::Tied: return HParamKind::Flag;
        case HParam::RopeScalingType: return HParamKind::RopeType;
        default: return HParamKind::Count;
    }
}

HParamField hparam_field(HParam p, ModelConfig& c) {
    HParamField f;
    switch (p) {
        case HParam::Embd: f.count = &c.dim; break;
        case HParam::Ffn: f.count = &c.hidden_dim; break;
        case HParam::Layers: f.count = &c.n_layers; break;
        case HParam::Heads: f.count = &c.n_heads; break;
        case HParam::KvHeads: f.count = &c.n_kv_heads; break;
        case HParam::Vocab: f.count = &c.vocab_size; break;
        case HParam::Context: f.count = &c.context_length; break;
        case HParam::RopeTheta: f.real = &c.rope_theta; break;
        case HParam::NormEps: f.real = &c.norm_eps; break;
        case HParam::Tied: f.flag = &c.shared_classifier; break;
        case HParam::HeadDim: f.count = &c.head_dim; break;
        case HParam::SlidingWindow: f.count = &c.sliding_window; break;
        case HParam::RopeScalingType: f.rope = &c.rope_scaling; break;
        case HParam::RopeFactor: f.real = &c.rope_factor; break;
        case HParam::RopeLowFreqFactor: f.real = &c.rope_low_freq_factor; break;
        case HParam::RopeHighFreqFactor: f.real = &c.rope_high_freq_factor; break;
        case HParam::RopeOriginalContext: f.count = &c.rope_original_context; break;
        case HParam::SlidingWindowPattern: f.count = &c.sliding_window_pattern; break;
        case HParam::RopeLocalTheta: f.real = &c.rope_local_theta; break;
        case HParam::AttnSoftcap: f.real = &c.attn_softcap; break;
        case HParam::FinalSoftcap: f.real = &c.final_softcap; break;
        case HParam::QueryPreAttnScalar: f.count = &c.query_pre_attn_scalar; break;
        case HParam::PartialRotary: f.real = &c.partial_rotary_factor; break;
        case HParam::RopeDims: f.count = &c.rope_dims; break;
        case HParam::Experts: f.count = &c.n_experts; break;
    }
    return f;
}

bool hparam_written(HParam p, const ModelConfig& c) {
    switch (p) {
        case HParam::HeadDim: return c.head_dim > 0;
        case HParam::SlidingWindow: return c.sliding_window > 0;
        case HParam::SlidingWindowPattern: return c.sliding_window_pattern > 0;
        case HParam::RopeLocalTheta: return c.rope_local_theta > 0.0;
        case HParam::AttnSoftcap: return c.attn_softcap > 0.0;
        case HParam::FinalSoftcap: return c.final_softcap > 0.0;
        case HParam::QueryPreAttnScalar: return c.query_pre_attn_scalar > 0;
        case HParam::RopeScalingType:
        case HParam::RopeFactor: return c.rope_scaling != RopeScaling::None;
        case HParam::RopeLowFreqFactor:
        case HParam::RopeHighFreqFactor:
        case HParam::RopeOriginalContext: return c.rope_scaling == RopeScaling::Llama3;
        case HParam::PartialRotary:
        case HParam::RopeDims:
        case HParam::Experts: return false;  // read to refuse partial rotary and experts, which gkq does not compute
        default: return true;
    }
}

void apply_defaults(const std::vector<HParamDefault>& defaults, ModelConfig& c) {
    for (const HParamDefault& d : defaults) {
        const HParamField f = hparam_field(d.param, c);
        if (f.count != nullptr) *f.count = static_cast<int64_t>(d.value);
        if (f.real != nullptr) *f.real = d.value;
        if (f.flag != nullptr) *f.flag = d.value != 0.0;
    }
}

// convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors, in float32 as torch computes it there.
std::vector<float> llama3_rope_divisors(const ModelConfig& c) {
    if (c.rope_scaling != RopeScaling::Llama3) return {};
    const int64_t dim = c.head_size();
    const float base = static_cast<float>(c.rope_theta);
    const float factor = static_cast<float>(c.rope_factor);
    const float low = static_cast<float>(c.rope_low_freq_factor);
    const float high = static_cast<float>(c.rope_high_freq_factor);
    const float old_context = static_cast<float>(c.rope_original_context > 0 ? c.rope_original_context : 8192);
    const float low_wavelen = old_context / low;
    const float high_wavelen = old_context / high;
    std::vector<float> out;
    for (int64_t i = 0; i < dim; i += 2) {
        const float freq = 1.0f / std::pow(base, static_cast<float>(i) / static_cast<float>(dim));
        const float wavelen = 2.0f * static_cast<float>(M_PI) / freq;
        if (wavelen < high_wavelen) {
            out.push_back(1.0f);
        } else if (wavelen > low_wavelen) {
            out.push_back(factor);
        } else {
            const float smooth = (old_context / wavelen - low) / (high - low);
            out.push_back(1.0f / ((1.0f - smooth) / factor + smooth));
        }
    }
    return out;
}

NormStorage norm_storage(const ArchSpec& arch, NameFormat format) {
    return format == NameFormat::Hf && arch.block.norm == NormKind::RmsOnePlus ? NormStorage::OffsetByOne
                                                                               : NormStorage::Multiplier;
}

std::string gguf_key(std::string_view pattern, std::string_view gguf_arch) {
    std::string key(pattern);
    if (size_t p = key.find("%s"); p != std::string::npos) key.replace(p, 2, gguf_arch);
    return key;
}

bool TensorSpec::per_layer() const {
    return hf.find(kLayerMark) != std::string_view::npos || gguf.find(kLayerMark) != std::string_view::npos;
}

// ---------------------------------------------------------------- lookups

const ArchSpec* find_arch(std::string_view name) {
    for (const ArchSpec& a : arch_table())
        if (a.name == name) return &a;
    return nullptr;
}

const ArchSpec* find_arch_gguf(std::string_view gguf_name) {
    for (const ArchSpec& a : arch_table())
        if (a.gguf_name == gguf_name) return &a;
    return find_arch(gguf_name);
}

const ArchSpec* find_arch_hf_model_type(std::string_view model_type) {
    for (const ArchSpec& a : arch_table())
        if (a.hf_model_type == model_type) return &a;
    return nullptr;
}

const ArchSpec* find_arch_hf_class(std::string_view hf_class) {
    for (const ArchSpec& a : arch_table())
        for (std::string_view c : a.hf_classes)
            if (c == hf_class) return &a;
    return nullptr;
}

const ArchSpec& arch_or_default(std::string_view name) {
    const ArchSpec* a = find_arch(name);
    return a != nullptr ? *a : default_arch();
}

const ArchSpec& arch_for_writing(std::string_view name) {
    const ArchSpec* a = find_arch(name);
    if (a == nullptr) return default_arch();
    return arch_or_default(a->written_as);
}

std::string arch_names_list() {
    const auto& t = arch_table();
    std::string s;
    for (size_t i = 0; i < t.size(); ++i) {
        if (i > 0) s += i + 1 == t.size() ? " and " : ", ";
        s += t[i].name;
    }
    return s;
}

// ---------------------------------------------------------------- tensor names

TensorMatch match_tensor(const ArchSpec& arch, NameFormat format, std::string_view name) {
    for (const TensorSpec& t : arch.tensors)
        if (!t.per_layer() && !pattern_of(t, format).empty() && pattern_of(t, format) == name) return {&t, -1};
    const int32_t layer = match_layer(format == NameFormat::Hf ? arch.hf_block : arch.gguf_block, name, false);
    if (layer < 0) return {};
    for (const TensorSpec& t : arch.tensors)
        if (t.per_layer() && match_layer(pattern_of(t, format), name, true) == layer) return {&t, layer};
    return {nullptr, layer};
}

TensorRole listed_role(const TensorMatch& m) {
    return m.spec != nullptr && m.spec->parts.size() == 1 ? m.spec->parts.front().role : TensorRole::Other;
}

std::string tensor_name(const TensorSpec& spec, NameFormat format, int32_t layer) {
    std::string name(pattern_of(spec, format));
    if (size_t p = name.find(kLayerMark); p != std::string::npos)
        name.replace(p, kLayerMark.size(), std::to_string(layer));
    return name;
}

const TensorSpec* find_fused_tensor(const ArchSpec& arch, TensorRole role) {
    for (const TensorSpec& t : arch.tensors)
        if (t.fused())
            for (const RolePart& p : t.parts)
                if (p.role == role) return &t;
    return nullptr;
}

size_t n_stored_tensors(const ArchSpec& arch, const std::vector<std::pair<TensorRole, int32_t>>& tensors) {
    std::set<std::pair<const TensorSpec*, int32_t>> fused;
    size_t n = 0;
    for (const auto& [role, layer] : tensors) {
        const TensorSpec* f = role == TensorRole::Other ? nullptr : find_fused_tensor(arch, role);
        if (f == nullptr || fused.insert({f, layer}).second) ++n;
    }
    return n;
}

const TensorSpec* find_tensor(const ArchSpec& arch, TensorRole role) {
    for (const TensorSpec& t : arch.tensors)
        if (t.parts.size() == 1 && t.parts.front().role == role && t.need != Need::Separate) return &t;
    return nullptr;
}

std::string tensor_name(const ArchSpec& arch, NameFormat format, TensorRole role, int32_t layer) {
    if (role == TensorRole::Other) return {};
    const TensorSpec* t = find_tensor(arch, role);
    return t != nullptr ? tensor_name(*t, format, layer) : std::string();
}

std::string part_view_name(std::string_view stored, TensorRole role) {
    return std::string(stored) + "[" + std::string(role_name(role)) + "]";
}

bool split_part_view_name(std::string_view name, std::string_view& stored, TensorRole& role) {
    const size_t open = name.rfind('[');
    if (open == std::string_view::npos || open == 0 || name.back() != ']') return false;
    const std::string_view inner = name.substr(open + 1, name.size() - open - 2);
    const TensorRole r = role_from_name(inner);
    if (r == TensorRole::Other || role_name(r) != inner) return false;
    stored = name.substr(0, open);
    role = r;
    return true;
}

RowRange part_rows(const TensorSpec& spec, size_t part, const ModelConfig& c) {
    RowRange r;
    for (size_t i = 0; i < part && i < spec.parts.size(); ++i) r.begin += size_value(spec.parts[i].rows, c);
    if (part < spec.parts.size()) r.count = size_value(spec.parts[part].rows, c);
    return r;
}

std::vector<int64_t> stored_shape(const TensorSpec& spec, const ModelConfig& c) {
    int64_t rows = 0;
    for (const RolePart& p : spec.parts) rows += size_value(p.rows, c);
    if (spec.cols == Size::None) return {rows};
    return {rows, size_value(spec.cols, c)};
}

std::vector<RequiredRole> required_roles(const ArchSpec& arch, const ModelConfig& c, bool shared_classifier) {
    std::vector<RequiredRole> r;
    auto add = [&](const TensorSpec& t, int32_t layer) {
        if ((t.need == Need::Untied && shared_classifier) || t.need == Need::UnsupportedRope ||
            t.need == Need::Separate)
            return;
        for (const RolePart& p : t.parts) {
            RequiredRole q{p.role, layer, {size_value(p.rows, c)}, t.need == Need::Optional};
            if (t.cols != Size::None) q.shape.push_back(size_value(t.cols, c));
            r.push_back(std::move(q));
        }
    };
    bool blocks_added = false;
    for (const TensorSpec& t : arch.tensors) {
        if (!t.per_layer()) {
            add(t, -1);
        } else if (!blocks_added) {
            blocks_added = true;
            for (int32_t l = 0; l < c.n_layers; ++l)
                for (const TensorSpec& b : arch.tensors)
                    if (b.per_layer()) add(b, l);
        }
    }
    return r;
}

}  // namespace gkq
