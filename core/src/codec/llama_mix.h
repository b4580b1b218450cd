// llama.cpp's per-tensor type choice (llama-quant.cpp: llama_tensor_get_type, tensor_type_fallback) for the llama
// architecture, so that gkq writes the same types llama-quantize does for a file type (Q4_K_M ...) or for one type
// given for every matrix (llama-quantize --pure). One row per file type: its name, llama.cpp's llama_ftype value and
// the base type every matrix starts from before the mixture's per-role rules.
#pragma once

#include "gkq/arch.h"
#include "gkq/dtype.h"
#include "gkq/model_config.h"
#include "gkq/tensor.h"

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace gkq {

struct LlamaFileType {
    std::string_view name;  // gkq's name: "q4_k_m", as llama-quantize's "Q4_K_M" in lower case
    uint32_t ftype;         // llama.h enum llama_ftype (general.file_type)
    DType base;             // llama_ftype_get_default_type
    bool mixture;           // false: every matrix `base` (then the fallback), as llama-quantize --pure
};

// Q2_K, Q3_K_M, Q4_K_M, Q5_K_M, Q6_K (the k-quant mixtures), then the plain types every matrix is stored as:
// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K .. Q6_K, IQ4_NL (names as the type table's: "q4_k").
std::span<const LlamaFileType> llama_file_types();
const LlamaFileType* find_llama_file_type(std::string_view name);

// tensor_type_fallback: the type a matrix of `row` elements per row is stored as when `wanted`'s blocks do not divide
// it (Q2_K/Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, a legacy-block type stays), F16 when that does
// not divide it either; `wanted` itself when its blocks divide the row.
DType llama_fallback_type(DType wanted, int64_t row);

// Walks a model's tensors in file order, as llama-quantize does (its attn_v and ffn_* counters), and gives each the
// type llama-quantize writes for `file_type`: F32 for 1-D tensors (norms), the mixture's type for matrices, after the
// fallback. `roles` lists every tensor's role in file order (it decides the counters and whether the classifier is
// tied to token_embd).
class LlamaTypePlanner {
public:
    LlamaTypePlanner(const LlamaFileType& file_type, const ModelConfig& config, const std::vector<TensorRole>& roles);

    struct Choice {
        DType type = DType::F32;
        DType wanted = DType::F32;  // before the fallback (== type when none was needed)
        bool fell_back = false;
    };
    // The next tensor in file order: its role and (rows, cols) shape (1-D: {n}).
    Choice next(TensorRole role, const std::vector<int64_t>& shape);
    // The same for a tensor of `arch` in block `layer`: the parts of a fused tensor (Phi-3's attn_qkv, ffn_up) are one
    // tensor to llama-quantize, so all take the type chosen when the first comes, by the rules of the role the fused
    // tensor is typed as (TensorSpec::quant_as).
    Choice next(const ArchSpec& arch, TensorRole role, int32_t layer, const std::vector<int64_t>& shape);

private:
    DType mixture_type(TensorRole role, int64_t row);
    const LlamaFileType& m_ft;
    int64_t m_n_layers = 0;
    int64_t m_n_gqa = 1;
    bool m_tied = true;
    int m_n_attention_wv = 0;
    int m_i_attention_wv = 0;
    int m_i_ffn_down = 0;
    std::map<std::pair<const TensorSpec*, int32_t>, Choice> m_fused;
};

}  // namespace gkq
