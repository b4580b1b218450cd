// The forward pass's hot loops: matrix products and the attention of one head, each in a fixed summation order
// whatever the thread count, the batch size or the CPU.
// Matrix products, out (n, rows) = x (n, cols) . W^T for a row-major W (rows, cols): every out[t][r] is summed
// by one thread as 8 lane sums (lane k takes the j = k (mod 8) terms below cols - cols % 8, in ascending j),
// combined as ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), then the remaining terms added in order.
// The AVX2 and generic (SSE2 on x86-64) versions execute the same IEEE operations without FMA, so they agree
// bit for bit.
// Products with stored rows (F16, BF16, Q8_0, Q4_0, the k-quants, ...) convert each row, one tile of columns at a
// time, to exactly the float32 values of its type's to_f32 (type_traits.h; the AVX2 converters give the same bits)
// and sum those in the order above, so they equal matmul over the converted matrix bit for bit.
#pragma once

#include "gkq/dtype.h"

#include <cstdint>

namespace gkq {

class ThreadPool;
struct LoadedTensor;

enum class KernelIsa { Generic, Avx2 };

// The kernels in use: Avx2 where the CPU has it, unless GKQ_KERNEL=generic is set in the environment.
KernelIsa active_kernel_isa();
// For tests: force a kernel set (Avx2 only takes effect when the CPU supports it). Returns the one in effect.
KernelIsa set_kernel_isa(KernelIsa isa);
const char* kernel_isa_name(KernelIsa isa);

// Multiply-adds below which a product runs on the calling thread alone (waking workers costs more than the
// product). Tests set it to 0 to split every product across the pool.
int64_t min_parallel_macs();
void set_min_parallel_macs(int64_t macs);

// out (n, rows) = x (n, cols) . W^T; `pool` may be null (single thread).
void matmul(float* out, const float* x, const float* w, int64_t n, int64_t rows, int64_t cols, ThreadPool* pool);

// True when matmul_stored runs rows of `type`: a fixed-size type with a to_f32 row conversion.
bool stored_type_runs(DType type);
// True when the AVX2 kernels convert `type` themselves (the others use the type table's to_f32 under every ISA).
bool stored_type_has_avx2(DType type);
// Bytes of one row of `cols` values of `type` (cols a whole number of its blocks).
uint64_t stored_row_bytes(DType type, int64_t cols);

// Stored rows (rows, cols) as the products read them: row-major rows of whole blocks, or (grouped) Q4_0 rows
// regrouped by group_rows so that one vector load serves eight rows. Either way the matrix takes rows x row bytes
// and the values, and every product's result, are the same bit for bit.
struct StoredRows {
    DType type = DType::Other;
    const uint8_t* data = nullptr;
    bool grouped = false;
};
// The stored rows of a loaded weight (transformer.h: LoadedTensor::stored, stored_type, grouped).
StoredRows stored_rows_of(const LoadedTensor& t);

// Rows per group of a grouped matrix. Rows r < rows - rows % kRowGroup lie in groups: group g takes the bytes of rows
// 8g .. 8g + 7, and for each block b in ascending order holds the 8 rows' f16 scales, then the rows' code bytes in
// chunks of kGroupChunkRowBytes per row: chunk k holds the bytes 4k .. 4k + 3 of each of the 8 rows in row order
// (their low nibbles the values 4k .. 4k + 3, the high ones those half a block further on), one 256-bit vector.
// The last rows % kRowGroup rows stay row-major, where they were.
constexpr int64_t kRowGroup = 8;
constexpr int64_t kGroupChunkRowBytes = 4;
constexpr int64_t kGroupChunkBytes = kRowGroup * kGroupChunkRowBytes;
// True when group_rows regroups `type` (Q4_0: the grouped products read it with one load per 8 rows).
bool stored_type_groups(DType type);
// dst (rows x row bytes) = src's row-major rows of `type` regrouped; src and dst do not overlap.
void group_rows(DType type, const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols);
// Row r of w (rows, cols) as row-major blocks (row bytes) into dst.
void stored_row_blocks(const StoredRows& w, int64_t rows, int64_t cols, int64_t r, uint8_t* dst);

// out (n, rows) = x (n, cols) . W^T for W (rows, cols) stored in `w` (rows of stored_row_bytes).
void matmul_stored(float* out, const float* x, const StoredRows& w, int64_t n, int64_t rows, int64_t cols,
                   ThreadPool* pool);
// Products with activations quantized first, as llama.cpp runs Q4_0 and Q8_0 weights (their vec_dot_type is
// Q8_0): each row of x becomes Q8_0 blocks of int8 codes q = nearbyint(x * (127 / max |x|)) (0 for a zero block)
// and the scale d = max |x| / 127 rounded to f16, as llama.cpp's x86 quantize_row_q8_0 makes them. Then out[t][r]
// = acc after acc = acc + float(p_b) * (dw_b * dx_b) for the blocks b in ascending order, p_b the exact integer
// sum of the block's code products. Integer sums are exact, so the AVX2 and generic versions, and both layouts,
// agree bit for bit; the result differs from matmul_stored's float32 activations by the activations' rounding (at
// most half a code in 127 per block).
bool stored_type_has_q8_dot(DType type);
// out (n, rows) = Q8_0(x) (n, cols) . W^T for W stored in a type stored_type_has_q8_dot accepts; cols a whole
// number of Q8_0 blocks.
void matmul_stored_q8(float* out, const float* x, const StoredRows& w, int64_t n, int64_t rows, int64_t cols,
                      ThreadPool* pool);
// Row r of W (rows, cols) stored in `w`, converted to cols floats (the same values to_f32 gives).
void stored_row_to_f32(const StoredRows& w, int64_t rows, int64_t cols, int64_t r, float* out);

// Attention of one query head over positions 0..n_pos-1: scores q.k / divisor (run.c's sqrt(head_size); 1 when q
// was scaled beforehand; terms in interleaved pair order for both rope layouts, so both give the same bits), each
// soft-capped to cap * tanh(score / cap) when cap > 0, run.c's softmax into att (n_pos), then out (head_size) = sum
// over positions of att * v in ascending position order. keys and values point at the head's slice of position 0;
// consecutive positions lie `stride` floats apart.
void attend_head(const float* q, const float* keys, const float* values, int64_t stride, int64_t n_pos,
                 int64_t head_size, bool interleaved, float divisor, float cap, float* att, float* out);

// The single dot product with the same summation order as matmul (for tests and small helpers).
float dot_fixed_order(const float* a, const float* b, int64_t n);

}  // namespace gkq
