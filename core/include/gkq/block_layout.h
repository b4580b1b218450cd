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
