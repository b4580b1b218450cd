// llama.cpp's type mixtures (llama-quant.cpp, llama_tensor_get_type_impl for a dense llama model: no experts, not
// Falcon, not 70B), read from its source and written out for the five k-quant mixtures gkq offers.
#include "codec/llama_mix.h"

#include "gkq/type_traits.h"

namespace gkq {

namespace {

constexpr LlamaFileType kFileTypes[] = {
    {"q2_k", 10, DType::Q2_K, true},
    {"q3_k_m", 12, DType::Q3_K, true},
    {"q4_k_m", 15, DType::Q4_K, true},
    {"q5_k_m", 17, DType::Q5_K, true},
    {"q6_k", 18, DType::Q6_K, true},
    // every matrix one type (llama-quantize --pure); the file type llama.cpp labels such a file with
    {"q8_0", 7, DType::Q8_0, false},
    {"q4_0", 2, DType::Q4_0, false},
    {"q4_1", 3, DType::Q4_1, false},
    {"q5_0", 8, DType::Q5_0, false},
    {"q5_1", 9, DType::Q5_1, false},
    {"q4_k", 15, DType::Q4_K, false},
    {"q5_k", 17, DType::Q5_K, false},
    {"q3_k", 12, DType::Q3_K, false},
    {"iq4_nl", 25, DType::IQ4_NL, false},
    {"f16", 1, DType::F16, false},
    {"bf16", 32, DType::BF16, false},
    {"f32", 0, DType::F32, false},
};

bool divides(DType t, int64_t row) {
    return row % type_traits(t).block_elements == 0;
}

// use_more_bits in llama-quant.cpp
bool use_more_bits(int i_layer, int n_layers) {
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

}  // namespace

std::span<const LlamaFileType> llama_file_types() {
    return kFileTypes;
}

const LlamaFileType* find_llama_file_type(std::string_view name) {
    for (const LlamaFileType& f : kFileTypes)
        if (f.name == name) return &f;
    return nullptr;
}

DType llama_fallback_type(DType wanted, int64_t row) {
    if (divides(wanted, row)) return wanted;
    DType t = wanted;
    switch (wanted) {
        case DType::Q2_K:
        case DType::Q3_K: t = DType::Q4_0; break;
        case DType::Q4_K: t = DType::Q5_0; break;
        case DType::Q5_K: t = DType::Q5_1; break;
        case DType::Q6_K: t = DType::Q8_0; break;
        default: break;  // a 32-element type: nothing smaller to demote to
    }
    return divides(t, row) ? t : DType::F16;
}

LlamaTypePlanner::LlamaTypePlanner(const LlamaFileType& file_type, const ModelConfig& config,
                                   const std::vector<TensorRole>& roles)
    : m_ft(file_type), m_n_layers(config.n_layers) {
    m_n_gqa = config.n_kv_heads > 0 ? config.n_heads / config.n_kv_heads : 1;
    for (TensorRole r : roles) {
        if (r == TensorRole::AttnV) ++m_n_attention_wv;
        if (r == TensorRole::Output) m_tied = false;
    }
}

DType LlamaTypePlanner::mixture_type(TensorRole role, int64_t row) {
    const DType base = m_ft.base;
    if (!m_ft.mixture) return base;
    const uint32_t ft = m_ft.ftype;
    constexpr uint32_t kQ2K = 10, kQ3KM = 12, kQ4KM = 15, kQ5KM = 17;
    const int n_layer = static_cast<int>(m_n_layers);
    // the classifier, and token_embd when it is the classifier too
    if (role == TensorRole::Output || (m_tied && role == TensorRole::TokenEmbd)) {
        if (!divides(base, row)) return DType::Q8_0;
        return base != DType::Q8_0 ? DType::Q6_K : base;
    }
    switch (role) {
        case TensorRole::AttnV: {
            DType t = base;
            if (ft == kQ2K)
                t = m_n_gqa >= 4 ? DType::Q4_K : DType::Q3_K;
            else if (ft == kQ3KM)
                t = m_i_attention_wv < 2 ? DType::Q5_K : DType::Q4_K;
            else if ((ft == kQ4KM || ft == kQ5KM) && use_more_bits(m_i_attention_wv, m_n_attention_wv))
                t = DType::Q6_K;
            ++m_i_attention_wv;
            return t;
        }
        case TensorRole::FfnDown: {
            // no experts: the layer is the counter of ffn_down tensors seen
            const int i_layer = m_i_ffn_down++;
            if (ft == kQ2K) return DType::Q3_K;
            if (ft == kQ3KM)
                return i_layer < n_layer / 16 ? DType::Q5_K : DType::Q4_K;  // arch != Falcon: always Q4_K after
            if (ft == kQ4KM) return use_more_bits(i_layer, n_layer) ? DType::Q6_K : base;
            if (ft == kQ5KM && use_more_bits(i_layer, n_layer)) return DType::Q6_K;
            return base;
        }
        case TensorRole::AttnO:
            if (ft == kQ2K) return DType::Q3_K;
            if (ft == kQ3KM) return DType::Q4_K;
            return base;
        default: return base;  // token_embd (untied), q, k, gate, up
    }
}

LlamaTypePlanner::Choice LlamaTypePlanner::next(TensorRole role, const std::vector<int64_t>& shape) {
    Choice c;
    if (shape.size() < 2) return c;  // llama-quantize quantizes 2-D and 3-D tensors only; norms stay F32
    const int64_t row = shape.back();
    c.wanted = mixture_type(role, row);
    c.type = llama_fallback_type(c.wanted, row);
    c.fell_back = c.type != c.wanted;
    return c;
}

LlamaTypePlanner::Choice LlamaTypePlanner::next(const ArchSpec& arch, TensorRole role, int32_t layer,
                                                const std::vector<int64_t>& shape) {
    const TensorSpec* fused = find_fused_tensor(arch, role);
    if (fused == nullptr) return next(role, shape);
    auto it = m_fused.find({fused, layer});
    if (it == m_fused.end()) it = m_fused.emplace(std::make_pair(fused, layer), next(fused->quant_as, shape)).first;
    return it->second;
}

}  // namespace gkq
