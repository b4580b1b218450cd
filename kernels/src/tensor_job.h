// TensorJob: one EncodedTensor checked and laid out for the kernels — where its values, factor codes, scales and
// residual blocks are, with the codec's own payload checks (the same Corrupt messages as gkq::decode_tensor).
// Shared by the CPU path (dispatch.cpp) and the CUDA path (cuda/), so both decode exactly the same inputs.
// Plain C++ (no core-private types): nvcc compiles the files that include it.
#pragma once

#include "gkq/encoded_tensor.h"
#include "gkq/kernels.h"
#include "gkq/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gkq::kernels {

struct TensorJob {
    std::string label;  // "tensor 'blk.0.attn_q.weight' (lowrank)"
    Method method = Method::F32;
    int64_t rows = 0, cols = 0, n = 0;  // the (rows, cols) matrix view; n = rows * cols
    const uint8_t* values = nullptr;    // F32 / F16 / Q8_0 / Q4_0: the payload

    // LowRank / LowRankResidual
    int64_t k = 0;
    int bits = 8;
    bool delta = false;
    std::vector<float> sigma;               // (k), decoded from f32 or 8-bit codes
    FactorCodes codes;                      // every stored vector's codes: k U vectors, then k V vectors
    std::vector<uint8_t> rle_codes;         // owns the expanded codes of a run-length stream (codes.data points here)
    int64_t u_len = 0, v_len = 0;           // codes per stored vector (a head's length on a folded axis)
    int64_t u_heads = 1, v_heads = 1;       // > 1 on the folded factor: stored vectors are one head's base block
    std::vector<float> head_scales;         // (n_heads of the folded factor)
    std::vector<float> u_scales, v_scales;  // (k) each
    const uint8_t* residual = nullptr;      // LowRankResidual: n values in blocks of residual_type
    DType residual_type = DType::Other;     // Other: no residual

    // The residual as the fused reconstruct kernels take it (ResidualBlocks: Q4_0 or Q8_0); bits 0 for none or for
    // another block type, whose blocks the CPU path adds after the product (the CUDA path refuses them).
    ResidualBlocks fused_residual() const;
    bool residual_is_fused() const { return residual_type == DType::Other || fused_residual().bits != 0; }

    uint64_t v_first() const { return static_cast<uint64_t>(k * u_len); }  // code index of V's first code
};

// Checks t as gkq::decode_tensor does and fills job (which points into t.payload: keep t alive).
Status plan_tensor(const EncodedTensor& t, TensorJob& job);

}  // namespace gkq::kernels
