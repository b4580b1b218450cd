/* The llama.cpp block layouts that kernels decode with their own code: the header-only part of the type table
 * (gkq/type_traits.h; its Q8_0 and Q4_0 rows read their sizes from here). Plain C, so that the C++ core and
 * kernels, the CUDA kernels and the WebAssembly kernels (C, built by emcc) include the same numbers; the
 * TypeScript reconstructor asks the WebAssembly module for them. Nothing else writes these sizes out.
 *
 * As llama.cpp's ggml-common.h: every block is an f16 scale d followed by its codes.
 *   block_q8_0 { ggml_half d; int8_t qs[QK8_0]; }       value j = qs[j] * d
 *   block_q4_0 { ggml_half d; uint8_t qs[QK4_0 / 2]; }  value j = ((qs[j] & 15) - 8) * d for the first half,
 *                                                        ((qs[j - half] >> 4) - 8) * d for the second half
 */
#ifndef GKQ_BLOCK_LAYOUT_H
#define GKQ_BLOCK_LAYOUT_H

#define GKQ_BLOCK_SCALE_BYTES 2 /* the f16 d that starts every block; the codes follow it */

#define GKQ_Q8_0_BLOCK_ELEMENTS 32
#define GKQ_Q8_0_BLOCK_BYTES (GKQ_BLOCK_SCALE_BYTES + GKQ_Q8_0_BLOCK_ELEMENTS)

#define GKQ_Q4_0_BLOCK_ELEMENTS 32
#define GKQ_Q4_0_BLOCK_BYTES (GKQ_BLOCK_SCALE_BYTES + GKQ_Q4_0_BLOCK_ELEMENTS / 2)

/* The other legacy blocks (32 values; core/src/formats/kquant_blocks.h spells out their structs):
 *   block_q4_1   { f16 d, m; u8 qs[16]; }              value = nibble * d + m
 *   block_q5_0   { f16 d; u8 qh[4]; u8 qs[16]; }        value = (nibble | high bit << 4) - 16) * d
 *   block_q5_1   { f16 d, m; u8 qh[4]; u8 qs[16]; }     value = (nibble | high bit << 4) * d + m
 *   block_iq4_nl { f16 d; u8 qs[16]; }                  value = kvalues_iq4nl[nibble] * d */
#define GKQ_LEGACY_BLOCK_ELEMENTS 32
#define GKQ_Q4_1_BLOCK_BYTES (2 * GKQ_BLOCK_SCALE_BYTES + GKQ_LEGACY_BLOCK_ELEMENTS / 2)
#define GKQ_Q5_0_BLOCK_BYTES (GKQ_BLOCK_SCALE_BYTES + GKQ_LEGACY_BLOCK_ELEMENTS / 8 + GKQ_LEGACY_BLOCK_ELEMENTS / 2)
#define GKQ_Q5_1_BLOCK_BYTES (2 * GKQ_BLOCK_SCALE_BYTES + GKQ_LEGACY_BLOCK_ELEMENTS / 8 + GKQ_LEGACY_BLOCK_ELEMENTS / 2)
#define GKQ_IQ4_NL_BLOCK_BYTES (GKQ_BLOCK_SCALE_BYTES + GKQ_LEGACY_BLOCK_ELEMENTS / 2)

/* The k-quant super-blocks (QK_K = 256 values in 16 or 8 sub-blocks; the order of the fields is ggml's):
 *   block_q2_K { u8 scales[16]; u8 qs[64]; f16 d, dmin; }          4-bit scale | 4-bit min per 16 values
 *   block_q3_K { u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d; }  sixteen 6-bit scales packed in 12 bytes
 *   block_q4_K { f16 d, dmin; u8 scales[12]; u8 qs[128]; }         eight 6-bit scales + mins in 12 bytes
 *   block_q5_K { f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]; }
 *   block_q6_K { u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d; }
 *   block_q8_K { f32 d; i8 qs[256]; i16 bsums[16]; }               the activation type of the k-quant dots */
#define GKQ_QK_K 256
#define GKQ_K_SCALE_BYTES 12 /* the packed 6-bit scales (and mins) of Q3_K, Q4_K and Q5_K */
#define GKQ_Q2_K_BLOCK_BYTES (GKQ_QK_K / 16 + GKQ_QK_K / 4 + 2 * GKQ_BLOCK_SCALE_BYTES)
#define GKQ_Q3_K_BLOCK_BYTES (GKQ_QK_K / 8 + GKQ_QK_K / 4 + GKQ_K_SCALE_BYTES + GKQ_BLOCK_SCALE_BYTES)
#define GKQ_Q4_K_BLOCK_BYTES (2 * GKQ_BLOCK_SCALE_BYTES + GKQ_K_SCALE_BYTES + GKQ_QK_K / 2)
#define GKQ_Q5_K_BLOCK_BYTES (2 * GKQ_BLOCK_SCALE_BYTES + GKQ_K_SCALE_BYTES + GKQ_QK_K / 8 + GKQ_QK_K / 2)
#define GKQ_Q6_K_BLOCK_BYTES (GKQ_QK_K / 2 + GKQ_QK_K / 4 + GKQ_QK_K / 16 + GKQ_BLOCK_SCALE_BYTES)
#define GKQ_Q8_K_BLOCK_BYTES (4 + GKQ_QK_K + 2 * (GKQ_QK_K / 16))

#ifdef __cplusplus
namespace gkq {

// One block type's layout, for C++ code that indexes blocks itself.
struct BlockLayout {
    int elements;      // values per block
    int bytes;         // bytes per block: the scale, then the codes
    int codes_offset;  // of the first code byte within a block
};

inline constexpr BlockLayout kQ8_0Block{GKQ_Q8_0_BLOCK_ELEMENTS, GKQ_Q8_0_BLOCK_BYTES, GKQ_BLOCK_SCALE_BYTES};
inline constexpr BlockLayout kQ4_0Block{GKQ_Q4_0_BLOCK_ELEMENTS, GKQ_Q4_0_BLOCK_BYTES, GKQ_BLOCK_SCALE_BYTES};

// The block layout of a residual stored with `bits` per code (4: Q4_0, otherwise Q8_0), as knot records name it.
constexpr const BlockLayout& residual_block(int bits) {
    return bits == 4 ? kQ4_0Block : kQ8_0Block;
}

}  // namespace gkq
#endif

#endif /* GKQ_BLOCK_LAYOUT_H */
