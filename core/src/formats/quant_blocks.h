// The structs of llama.cpp's legacy and k-quant blocks (sizes: gkq/block_layout.h, checked here), and the small
// arithmetic the quantizers share. The row functions (convert_rows.h) copy each block in and out with memcpy, so
// tensor data needs no alignment. Every quantizer here reproduces ggml's reference arithmetic operation for
// operation in float: the same expression order, no fused multiply-adds (these files build with
// -ffp-contract=off), so its blocks are byte-identical to ggml's.
#pragma once

#include "gkq/block_layout.h"
#include "gkq/convert.h"

#include <cstdint>
#include <cstring>

namespace gkq::quant {

constexpr int kLegacy = GKQ_LEGACY_BLOCK_ELEMENTS;  // values per legacy block
constexpr int kSuper = GKQ_QK_K;                    // values per k-quant super-block

struct BlockQ4_1 {
    uint16_t d, m;            // f16 scale and minimum
    uint8_t qs[kLegacy / 2];  // value j in the low nibble of qs[j], value j + 16 in the high nibble
};
struct BlockQ5_0 {
    uint16_t d;
    uint8_t qh[kLegacy / 8];  // bit j: the fifth bit of value j (a little-endian u32)
    uint8_t qs[kLegacy / 2];
};
struct BlockQ5_1 {
    uint16_t d, m;
    uint8_t qh[kLegacy / 8];
    uint8_t qs[kLegacy / 2];
};
struct BlockIQ4_NL {
    uint16_t d;
    uint8_t qs[kLegacy / 2];  // indices into kIQ4NLValues
};

struct BlockQ2_K {
    uint8_t scales[kSuper / 16];  // per 16 values: scale in the low nibble, min in the high nibble
    uint8_t qs[kSuper / 4];       // 2-bit codes, four 32-value runs per 128 values
    uint16_t d, dmin;
};
struct BlockQ3_K {
    uint8_t hmask[kSuper / 8];          // the third bit: bit b of hmask[l] belongs to value 32 b + l
    uint8_t qs[kSuper / 4];             // the low two bits, packed as Q2_K
    uint8_t scales[GKQ_K_SCALE_BYTES];  // sixteen 6-bit scales, offset by 32
    uint16_t d;
};
struct BlockQ4_K {
    uint16_t d, dmin;
    uint8_t scales[GKQ_K_SCALE_BYTES];  // eight 6-bit scales and eight 6-bit mins
    uint8_t qs[kSuper / 2];             // per 64 values: 32 low nibbles, then the 32 high nibbles
};
struct BlockQ5_K {
    uint16_t d, dmin;
    uint8_t scales[GKQ_K_SCALE_BYTES];
    uint8_t qh[kSuper / 8];  // the fifth bits: bits 2c, 2c + 1 of qh[l] for the two sub-blocks of chunk c
    uint8_t qs[kSuper / 2];
};
struct BlockQ6_K {
    uint8_t ql[kSuper / 2];      // low four bits
    uint8_t qh[kSuper / 4];      // high two bits
    int8_t scales[kSuper / 16];  // one signed 8-bit scale per 16 values
    uint16_t d;
};
struct BlockQ8_K {
    float d;
    int8_t qs[kSuper];
    int16_t bsums[kSuper / 16];  // the sum of each 16 codes
};

static_assert(sizeof(BlockQ4_1) == GKQ_Q4_1_BLOCK_BYTES);
static_assert(sizeof(BlockQ5_0) == GKQ_Q5_0_BLOCK_BYTES);
static_assert(sizeof(BlockQ5_1) == GKQ_Q5_1_BLOCK_BYTES);
static_assert(sizeof(BlockIQ4_NL) == GKQ_IQ4_NL_BLOCK_BYTES);
static_assert(sizeof(BlockQ2_K) == GKQ_Q2_K_BLOCK_BYTES);
static_assert(sizeof(BlockQ3_K) == GKQ_Q3_K_BLOCK_BYTES);
static_assert(sizeof(BlockQ4_K) == GKQ_Q4_K_BLOCK_BYTES);
static_assert(sizeof(BlockQ5_K) == GKQ_Q5_K_BLOCK_BYTES);
static_assert(sizeof(BlockQ6_K) == GKQ_Q6_K_BLOCK_BYTES);
static_assert(sizeof(BlockQ8_K) == GKQ_Q8_K_BLOCK_BYTES);

// Block b of a byte buffer, copied out / in (tensor data may be unaligned).
template <class Block>
Block load_block(const void* src, int64_t b) {
    Block blk;
    std::memcpy(&blk, static_cast<const uint8_t*>(src) + b * static_cast<int64_t>(sizeof(Block)), sizeof(Block));
    return blk;
}
template <class Block>
void store_block(void* dst, int64_t b, const Block& blk) {
    std::memcpy(static_cast<uint8_t*>(dst) + b * static_cast<int64_t>(sizeof(Block)), &blk, sizeof(Block));
}

inline float half(uint16_t h) {
    return f16_to_f32(h);
}
inline uint16_t to_half(float f) {
    return f32_to_f16(f);
}

// Round to nearest, ties to even, for |v| < 2^22, as ggml does it: adding 1.5 * 2^23 leaves the integer in the
// low mantissa bits.
inline int nearest_int(float v) {
    const float shifted = v + 12582912.f;
    int32_t bits;
    std::memcpy(&bits, &shifted, sizeof(bits));
    return (bits & 0x007fffff) - 0x00400000;
}

inline int clamp_int(int v, int lo, int hi) {
    return v < lo ? lo : (v > hi ? hi : v);
}

// A group's maximum |x| below this counts as all zeros (ggml's GROUP_MAX_EPS).
constexpr float kGroupMaxEps = 1e-15f;

// ---- the shared fits and packings (quant_fit.cpp) ----

extern const int8_t kNonLinearCodes[16];  // the IQ4_NL code book, ascending
int nearest_code(float v);                // index of the code nearest v (the lower one on a tie)

float fit_symmetric(int n, int nmax, const float* x, int8_t* codes, const float* qw);
float fit_symmetric_refined(int n, int nmax, const float* x, int8_t* codes);
float fit_affine(int n, int nmax, const float* x, const float* weights, uint8_t* codes, float* the_min, uint8_t* trial,
                 float rmin, float rdelta, int nstep, bool use_mad);
float fit_positive(int n, int nmax, const float* x, uint8_t* codes, const float* qw);

void unpack_scale_min(int j, const uint8_t* packed, uint8_t& sc, uint8_t& m);
void pack_scale_min(int j, uint8_t sc, uint8_t m, uint8_t* packed);
int unpack_q3_scale(int j, const uint8_t* packed);
void pack_2bit(const uint8_t* codes, uint8_t* qs);
int two_bit(const uint8_t* qs, int e);

// One Q6_K super-block of x (kquants.cpp); the sub-block fits weigh value i by qw[i], x^2 without qw.
BlockQ6_K quantize_q6_k_block(const float* x, const float* qw);

}  // namespace gkq::quant
