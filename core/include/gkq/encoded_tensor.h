// EncodedTensor: one tensor as the codec produced it and as a knot record stores it — the record header
// fields plus an opaque, method-specific payload (layouts in docs/knot-format.md). The codec (codec.h)
// makes and decodes these; the knot file (knot.h) stores and retrieves them without interpreting payloads.
#pragma once

#include "gkq/tensor.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gkq {

enum class Method : uint8_t {
    F32 = 0,              // raw little-endian float32 (norms, or anything kept exact)
    F16 = 1,              // IEEE half
    Q8_0 = 2,             // llama.cpp Q8_0 blocks, bit-compatible
    Q4_0 = 3,             // llama.cpp Q4_0 blocks, bit-compatible
    LowRank = 4,          // truncated SVD: quantized U_k, sigma_k, V_k (optionally folded / delta-coded)
    LowRankResidual = 5,  // LowRank plus a residual in the blocks of a block method's type (residual_code names it)
    // llama.cpp's other block types: the payload is exactly that type's blocks, row after row (gkq/type_traits.h)
    Q4_1 = 6,
    Q5_0 = 7,
    Q5_1 = 8,
    IQ4_NL = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
};
inline constexpr unsigned kMethodCount = 15;  // method codes are 0 .. kMethodCount - 1

// "f32", "f16", "q8_0", "q4_0", "lowrank", "lowrank+residual", then the block types' names ("q4_k", "iq4_nl")
std::string_view method_name(Method m);
// Every method, in code order.
const std::array<Method, kMethodCount>& all_methods();
// The width in bits of one stored value or block code (f32's, or q4_k's 4-bit codes); 0 for the low-rank methods
// (their factor_bits say it).
int method_code_bits(Method m);
// True for the methods whose payload is the blocks of one type of the type table (q8_0, q4_0, q4_1 ... q6_k).
bool is_block_method(Method m);
// The block method that stores `t`'s blocks; nullopt for types no method stores.
std::optional<Method> block_method_for(DType t);

// A LowRankResidual record's residual code (EncodedTensor::residual_code, the knot descriptor's residual byte) names
// the block type of its residual: 4 for Q4_0 (the bits per code, as the field was first defined when Q4_0 and Q8_0
// were the only residuals), otherwise the type's ggml id from the type table (Q8_0's is 8, its bits; q4_k 12). Every
// block method's type has a code, and no other type.
std::optional<DType> residual_code_type(uint8_t code);  // nullopt: no type has that code
uint8_t residual_code_of(DType t);                      // 0: `t` is not a block method's type
// "unknown residual code 99 (4 q4_0, 8 q8_0, ...)": what every reader says before decoding such a record.
std::string unknown_residual_code(uint8_t code);

// Flags recorded per tensor (bit set).
enum EncodedFlags : uint32_t {
    kFlagDelta = 1u << 0,            // factor codes are delta-encoded along each vector
    kFlagFoldedHeads = 1u << 1,      // attention: shared basis + per-head scales (hierarchical folding)
    kFlagRleCoefficients = 1u << 2,  // FFN: run-length-encoded quantized coefficient magnitudes
    kFlagSigmaQuantized = 1u << 3,   // sigma stored quantized instead of f32
};

// The stored type of a method's payload: F32, F16 and the block methods' payloads are exactly those types' values
// or blocks; the low-rank methods' payloads are their own layout (Other).
DType method_dtype(Method m);

// TensorInfo's shape is the original shape; its dtype is method_dtype(method) (the codec and the knot reader set it).
struct EncodedTensor : TensorInfo {
    Method method = Method::F32;
    int32_t rank = 0;              // low-rank methods: k; 0 otherwise
    uint8_t factor_bits = 0;       // 2, 4 or 8 for low-rank factors; 0 otherwise
    uint8_t residual_code = 0;     // LowRankResidual: its residual's block type (residual_code_type); 0 otherwise
    uint32_t flags = 0;            // EncodedFlags
    std::vector<uint8_t> payload;  // method-specific bytes, uncompressed
};

}  // namespace gkq
