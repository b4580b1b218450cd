#include "infer/kernels.h"

#include "gkq/sampler.h"
#include "gkq/transformer.h"

#include "gkq/block_layout.h"
#include "gkq/convert.h"
#include "gkq/type_traits.h"

#include "formats/quant_blocks.h"
#include "infer/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// Every float expression rounds as written (run.c's), whatever -march allows: no contraction into fused
// multiply-adds, so logits do not change between builds for different CPUs.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace gkq {

// The vector helpers are static and inlined: their 32-byte arguments never cross an ABI boundary.
#pragma GCC diagnostic ignored "-Wpsabi"

// "no-fma": a fused multiply-add rounds once instead of twice and would break the bit-for-bit agreement
// between the two versions (and with builds for CPUs without FMA).
#define GKQ_KERNEL_NS generic
#if defined(__x86_64__)
#define GKQ_KERNEL_ATTR __attribute__((target("no-fma")))
#else
#define GKQ_KERNEL_ATTR
#endif
#define GKQ_KERNEL_ROW_BLOCK 4
#include "infer/kernels.inc"
#undef GKQ_KERNEL_NS
#undef GKQ_KERNEL_ATTR
#undef GKQ_KERNEL_ROW_BLOCK

#if defined(__x86_64__)
#define GKQ_HAVE_AVX2_KERNELS 1
#define GKQ_KERNEL_NS avx2
#define GKQ_KERNEL_ATTR __attribute__((target("avx2,f16c,no-fma")))
#define GKQ_KERNEL_ROW_BLOCK 8
#define GKQ_KERNEL_AVX2_CONVERTERS 1
#include "infer/kernels.inc"
#undef GKQ_KERNEL_NS
#undef GKQ_KERNEL_ATTR
#undef GKQ_KERNEL_ROW_BLOCK
#undef GKQ_KERNEL_AVX2_CONVERTERS
#endif

namespace {

bool cpu_has_avx2() {
#if defined(GKQ_HAVE_AVX2_KERNELS)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
#else
    return false;
#endif
}

KernelIsa default_isa() {
    const char* env = std::getenv("GKQ_KERNEL");
    if (env != nullptr && std::strcmp(env, "generic") == 0) return KernelIsa::Generic;
    return cpu_has_avx2() ? KernelIsa::Avx2 : KernelIsa::Generic;
}

// A product of 64K multiply-adds takes about 8 us on one AVX2 core; handing half of it to a worker costs one to
// a few microseconds on an idle machine (bench_generate prints the measured dispatch time), so below this the
// caller works alone. Models of dim <= 128 then run single-threaded token by token, as they should.
std::atomic<int64_t> g_min_parallel_macs{64 * 1024};

std::atomic<KernelIsa>& isa_slot() {
    static std::atomic<KernelIsa> isa{default_isa()};
    return isa;
}

bool use_avx2() {
#if defined(GKQ_HAVE_AVX2_KERNELS)
    return isa_slot().load(std::memory_order_relaxed) == KernelIsa::Avx2;
#else
    return false;
#endif
}

void matmul_rows(float* out, const float* x, const float* w, int64_t n, int64_t rows, int64_t cols, int64_t r0,
                 int64_t r1) {
#if defined(GKQ_HAVE_AVX2_KERNELS)
    if (use_avx2()) return avx2::matmul_rows(out, x, w, n, rows, cols, r0, r1);
#endif
    generic::matmul_rows(out, x, w, n, rows, cols, r0, r1);
}

// Per-thread scratch of the stored products: converted tiles and the lane sums between them.
struct StoredScratch {
    std::vector<float> buf;
    std::vector<float> acc;
};

StoredScratch& stored_scratch(int64_t n) {
    thread_local StoredScratch s;
    if (s.buf.size() < static_cast<size_t>(8 * generic::kStoredTile))
        s.buf.resize(static_cast<size_t>(8 * generic::kStoredTile));
    if (s.acc.size() < static_cast<size_t>(n * 64)) s.acc.resize(static_cast<size_t>(n * 64));
    return s;
}

ToF32Row row_converter(DType type) {
#if defined(GKQ_HAVE_AVX2_KERNELS)
    if (use_avx2())
        if (ToF32Row f = avx2::stored_converter(type)) return f;
#endif
    return type_traits(type).to_f32;
}

void matmul_stored_rows(float* out, const float* x, DType type, const uint8_t* w, int64_t n, int64_t rows, int64_t cols,
                        int64_t r0, int64_t r1) {
    const TypeTraits& tt = type_traits(type);
    StoredScratch& s = stored_scratch(n);
#if defined(GKQ_HAVE_AVX2_KERNELS)
    if (use_avx2()) {
        const avx2::StoredView m{row_converter(type), w, stored_row_bytes(type, cols), tt.block_elements,
                                 tt.block_bytes};
        return avx2::matmul_stored_rows(out, x, m, n, rows, cols, r0, r1, s.buf.data(), s.acc.data());
    }
#endif
    const generic::StoredView m{tt.to_f32, w, stored_row_bytes(type, cols), tt.block_elements, tt.block_bytes};
    generic::matmul_stored_rows(out, x, m, n, rows, cols, r0, r1, s.buf.data(), s.acc.data());
}

// Rows below grouped_rows lie in groups of kRowGroup (kernels.h), the rest row-major.
int64_t grouped_rows(const StoredRows& w, int64_t rows) {
    return w.grouped ? rows - rows % kRowGroup : 0;
}

// Where code byte o (0 <= o < half a block) of row i lies among a grouped block's codes (kernels.h: kRowGroup).
int64_t grouped_code_offset(int64_t o, int64_t i) {
    return o * kRowGroup + i * kGroupChunkRowBytes;
}

// Row i of the group at g (a grouped Q4_0 matrix): its block b, as row-major bytes, into dst.
void q4_0_group_block(const uint8_t* g, int64_t b, int64_t i, uint8_t* dst) {
    const uint8_t* p = g + static_cast<uint64_t>(b) * kRowGroup * GKQ_Q4_0_BLOCK_BYTES;
    std::memcpy(dst, p + GKQ_BLOCK_SCALE_BYTES * i, GKQ_BLOCK_SCALE_BYTES);
    const uint8_t* codes = p + GKQ_BLOCK_SCALE_BYTES * kRowGroup;
    for (int64_t o = 0; o < GKQ_Q4_0_BLOCK_ELEMENTS / 2; o += kGroupChunkRowBytes)
        std::memcpy(dst + GKQ_BLOCK_SCALE_BYTES + o, codes + grouped_code_offset(o, i), kGroupChunkRowBytes);
}

// Rows [r0, r1) of a product with float32 activations: grouped rows gathered, a group at a time, into row-major
// scratch and run as such.
void matmul_stored_range(float* out, const float* x, const StoredRows& w, int64_t n, int64_t rows, int64_t cols,
                         int64_t r0, int64_t r1) {
    const int64_t grouped = std::min(grouped_rows(w, rows), r1);
    const uint64_t row_bytes = stored_row_bytes(w.type, cols);
    thread_local std::vector<uint8_t> native;
    int64_t r = r0;
    if (r < grouped) native.resize(static_cast<size_t>(kRowGroup * row_bytes));
    for (; r < grouped; r += kRowGroup) {
        for (int64_t i = 0; i < kRowGroup; ++i) stored_row_blocks(w, rows, cols, r + i, native.data() + i * row_bytes);
        matmul_stored_rows(out + r, x, w.type, native.data(), n, rows, cols, 0, kRowGroup);
    }
    if (r < r1) matmul_stored_rows(out, x, w.type, w.data, n, rows, cols, r, r1);
}

// ---- products with Q8_0 activations ----

// x (n, cols) quantized as kernels.h describes: codes (n, cols), f16-rounded scales (n, cols / kQ8).
constexpr int64_t kQ8 = GKQ_Q8_0_BLOCK_ELEMENTS;  // values per activation block (and per weight block)
static_assert(GKQ_Q4_0_BLOCK_ELEMENTS == GKQ_Q8_0_BLOCK_ELEMENTS && GKQ_Q8_0_BLOCK_ELEMENTS == 8 * 4,
              "a block is one 256-bit vector of codes");

struct Q8Activations {
    std::vector<int8_t> q;
    std::vector<float> d;
    std::vector<int32_t> s;  // (n, cols / kQ8): each block's sum of codes
};

void quantize_activations(const float* x, int64_t n, int64_t cols, Q8Activations& a) {
    const int64_t nb = cols / kQ8;
    a.q.resize(static_cast<size_t>(n * cols));
    a.d.resize(static_cast<size_t>(n * nb));
    a.s.resize(static_cast<size_t>(n * nb));
    for (int64_t i = 0; i < n * nb; ++i) {
        const float* v = x + i * kQ8;
        float amax = 0.0f;
        for (int j = 0; j < kQ8; ++j) amax = std::max(amax, std::fabs(v[j]));
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;  // llama.cpp's x86 quantize_row_q8_0
        int8_t* q = a.q.data() + i * kQ8;
        int32_t sum = 0;
        for (int j = 0; j < kQ8; ++j) {
            const float c = v[j] * id;
            q[j] = c == c ? static_cast<int8_t>(std::nearbyint(std::clamp(c, -127.0f, 127.0f))) : 0;
            sum += q[j];
        }
        a.d[static_cast<size_t>(i)] = f16_to_f32(f32_to_f16(d));
        a.s[static_cast<size_t>(i)] = sum;
    }
}

// The exact integer sum of one block's code products with the activation codes q (kQ8 of them).
template <bool kQ4>
int32_t q8_block_sum(const uint8_t* block, const int8_t* q) {
    const uint8_t* c = block + GKQ_BLOCK_SCALE_BYTES;
    int32_t sum = 0;
    for (int j = 0; j < kQ8; ++j) {
        const int code = kQ4 ? ((j < kQ8 / 2 ? c[j] : c[j - kQ8 / 2] >> 4) & 15) - 8 : static_cast<int8_t>(c[j]);
        sum += code * q[j];
    }
    return sum;
}

float block_scale(const uint8_t* block) {
    uint16_t h;
    std::memcpy(&h, block, 2);
    return f16_to_f32(h);
}

// The generic version of avx2::q8_dot_rows: the same exact block sums, the same float operations.
template <bool kQ4>
void q8_dot_rows_generic(float* out, const int8_t* xq, const float* xd, const uint8_t* w, int64_t n, int64_t rows,
                         int64_t cols, int64_t r0, int64_t r1) {
    constexpr uint64_t bb = kQ4 ? GKQ_Q4_0_BLOCK_BYTES : GKQ_Q8_0_BLOCK_BYTES;
    const int64_t nb = cols / kQ8;
    const uint64_t row_bytes = static_cast<uint64_t>(nb) * bb;
    for (int64_t r = r0; r < r1; ++r)
        for (int64_t t = 0; t < n; ++t) {
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; ++b) {
                const uint8_t* block = w + static_cast<uint64_t>(r) * row_bytes + static_cast<uint64_t>(b) * bb;
                const int32_t sum = q8_block_sum<kQ4>(block, xq + t * cols + kQ8 * b);
                acc = acc + static_cast<float>(sum) * (block_scale(block) * xd[t * nb + b]);
            }
            out[t * rows + r] = acc;
        }
}

// The generic version of avx2::q8_dot_groups: rows [r0, r1) of a grouped Q4_0 matrix (r0 and r1 multiples of
// kRowGroup), each block gathered back into its row-major bytes, then as q8_dot_rows_generic<true>.
void q8_dot_groups_generic(float* out, const int8_t* xq, const float* xd, const uint8_t* w, int64_t n, int64_t rows,
                           int64_t cols, int64_t r0, int64_t r1) {
    const int64_t nb = cols / kQ8;
    const uint64_t row_bytes = static_cast<uint64_t>(nb) * GKQ_Q4_0_BLOCK_BYTES;
    uint8_t block[GKQ_Q4_0_BLOCK_BYTES];
    for (int64_t r = r0; r < r1; r += kRowGroup) {
        const uint8_t* g = w + static_cast<uint64_t>(r) * row_bytes;
        for (int64_t i = 0; i < kRowGroup; ++i)
            for (int64_t t = 0; t < n; ++t) {
                float acc = 0.0f;
                for (int64_t b = 0; b < nb; ++b) {
                    q4_0_group_block(g, b, i, block);
                    const int32_t sum = q8_block_sum<true>(block, xq + t * cols + kQ8 * b);
                    acc = acc + static_cast<float>(sum) * (block_scale(block) * xd[t * nb + b]);
                }
                out[t * rows + r + i] = acc;
            }
    }
}

void matmul_q8_rows(float* out, const Q8Activations& a, const StoredRows& w, int64_t n, int64_t rows, int64_t cols,
                    int64_t r0, int64_t r1) {
    const bool q4 = w.type == DType::Q4_0;
    const int64_t grouped = std::min(grouped_rows(w, rows), r1);
#if defined(GKQ_HAVE_AVX2_KERNELS)
    if (use_avx2()) {
        if (r0 < grouped)
            avx2::q8_dot_groups(out, a.q.data(), a.d.data(), a.s.data(), w.data, n, rows, cols, r0, grouped);
        r0 = std::max(r0, grouped);
        if (q4) return avx2::q8_dot_rows<true>(out, a.q.data(), a.d.data(), a.s.data(), w.data, n, rows, cols, r0, r1);
        return avx2::q8_dot_rows<false>(out, a.q.data(), a.d.data(), a.s.data(), w.data, n, rows, cols, r0, r1);
    }
#endif
    if (r0 < grouped) q8_dot_groups_generic(out, a.q.data(), a.d.data(), w.data, n, rows, cols, r0, grouped);
    r0 = std::max(r0, grouped);
    if (q4) return q8_dot_rows_generic<true>(out, a.q.data(), a.d.data(), w.data, n, rows, cols, r0, r1);
    q8_dot_rows_generic<false>(out, a.q.data(), a.d.data(), w.data, n, rows, cols, r0, r1);
}

}  // namespace

bool stored_type_runs(DType type) {
    const TypeTraits& tt = type_traits(type);
    return type != DType::Other && tt.to_f32 != nullptr && tt.block_bytes > 0;
}

bool stored_type_has_avx2(DType type) {
#if defined(GKQ_HAVE_AVX2_KERNELS)
    return avx2::stored_converter(type) != nullptr;
#else
    (void)type;
    return false;
#endif
}

uint64_t stored_row_bytes(DType type, int64_t cols) {
    const TypeTraits& tt = type_traits(type);
    return static_cast<uint64_t>(cols / tt.block_elements) * tt.block_bytes;
}

namespace {

// rows_of(r0, r1) for every row range of a product of n x rows x cols multiply-adds: on the calling thread alone
// below min_parallel_macs, else over the pool in chunks of whole 8-row blocks (the widest the kernels take).
template <class RowsOf>
void over_rows(ThreadPool* pool, int64_t n, int64_t rows, int64_t cols, const RowsOf& rows_of) {
    if (pool == nullptr || n * rows * cols < min_parallel_macs()) {
        rows_of(int64_t{0}, rows);
        return;
    }
    pool->parallel_for(rows, pool->chunk_for(rows, 8), true, [&](int64_t r0, int64_t r1) { rows_of(r0, r1); });
}

}  // namespace

void matmul_stored(float* out, const float* x, const StoredRows& w, int64_t n, int64_t rows, int64_t cols,
                   ThreadPool* pool) {
    over_rows(pool, n, rows, cols,
              [&](int64_t r0, int64_t r1) { matmul_stored_range(out, x, w, n, rows, cols, r0, r1); });
}

bool stored_type_has_q8_dot(DType type) {
    return type == DType::Q4_0 || type == DType::Q8_0;
}

void matmul_stored_q8(float* out, const float* x, const StoredRows& w, int64_t n, int64_t rows, int64_t cols,
                      ThreadPool* pool) {
    // the caller's scratch, named by a reference: a lambda naming the thread_local itself would read each
    // worker's own (empty) one
    thread_local Q8Activations scratch;
    Q8Activations& a = scratch;
    quantize_activations(x, n, cols, a);
    over_rows(pool, n, rows, cols, [&](int64_t r0, int64_t r1) { matmul_q8_rows(out, a, w, n, rows, cols, r0, r1); });
}

StoredRows stored_rows_of(const LoadedTensor& t) {
    return StoredRows{t.stored_type, t.stored.data(), t.grouped};
}

bool stored_type_groups(DType type) {
    return type == DType::Q4_0;
}

void group_rows(DType type, const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols) {
    const uint64_t row_bytes = stored_row_bytes(type, cols);
    const int64_t grouped = stored_type_groups(type) ? rows - rows % kRowGroup : 0;
    const int64_t nb = cols / kQ8;
    for (int64_t r = 0; r < grouped; r += kRowGroup) {
        const uint8_t* s = src + static_cast<uint64_t>(r) * row_bytes;
        uint8_t* g = dst + static_cast<uint64_t>(r) * row_bytes;
        for (int64_t b = 0; b < nb; ++b) {
            uint8_t* p = g + static_cast<uint64_t>(b) * kRowGroup * GKQ_Q4_0_BLOCK_BYTES;
            uint8_t* codes = p + GKQ_BLOCK_SCALE_BYTES * kRowGroup;
            for (int64_t i = 0; i < kRowGroup; ++i) {
                const uint8_t* block =
                    s + static_cast<uint64_t>(i) * row_bytes + static_cast<uint64_t>(b) * GKQ_Q4_0_BLOCK_BYTES;
                std::memcpy(p + GKQ_BLOCK_SCALE_BYTES * i, block, GKQ_BLOCK_SCALE_BYTES);
                for (int64_t o = 0; o < GKQ_Q4_0_BLOCK_ELEMENTS / 2; o += kGroupChunkRowBytes)
                    std::memcpy(codes + grouped_code_offset(o, i), block + GKQ_BLOCK_SCALE_BYTES + o,
                                kGroupChunkRowBytes);
            }
        }
    }
    if (grouped < rows)
        std::memcpy(dst + static_cast<uint64_t>(grouped) * row_bytes, src + static_cast<uint64_t>(grouped) * row_bytes,
                    static_cast<size_t>(rows - grouped) * row_bytes);
}

void stored_row_blocks(const StoredRows& w, int64_t rows, int64_t cols, int64_t r, uint8_t* dst) {
    const uint64_t row_bytes = stored_row_bytes(w.type, cols);
    if (r >= grouped_rows(w, rows)) {
        std::memcpy(dst, w.data + static_cast<uint64_t>(r) * row_bytes, row_bytes);
        return;
    }
    const uint8_t* g = w.data + static_cast<uint64_t>(r - r % kRowGroup) * row_bytes;
    for (int64_t b = 0; b < cols / kQ8; ++b) q4_0_group_block(g, b, r % kRowGroup, dst + b * GKQ_Q4_0_BLOCK_BYTES);
}

void stored_row_to_f32(const StoredRows& w, int64_t rows, int64_t cols, int64_t r, float* out) {
    const uint64_t row_bytes = stored_row_bytes(w.type, cols);
    if (r >= grouped_rows(w, rows)) {
        row_converter(w.type)(w.data + static_cast<uint64_t>(r) * row_bytes, out, cols);
        return;
    }
    std::vector<uint8_t> row(static_cast<size_t>(row_bytes));
    stored_row_blocks(w, rows, cols, r, row.data());
    row_converter(w.type)(row.data(), out, cols);
}

int64_t min_parallel_macs() {
    return g_min_parallel_macs.load(std::memory_order_relaxed);
}
void set_min_parallel_macs(int64_t macs) {
    g_min_parallel_macs.store(macs, std::memory_order_relaxed);
}

KernelIsa active_kernel_isa() {
    return isa_slot().load(std::memory_order_relaxed);
}

KernelIsa set_kernel_isa(KernelIsa isa) {
    if (isa == KernelIsa::Avx2 && !cpu_has_avx2()) isa = KernelIsa::Generic;
    isa_slot().store(isa, std::memory_order_relaxed);
    return isa;
}

const char* kernel_isa_name(KernelIsa isa) {
    return isa == KernelIsa::Avx2 ? "avx2" : "generic";
}

void matmul(float* out, const float* x, const float* w, int64_t n, int64_t rows, int64_t cols, ThreadPool* pool) {
    over_rows(pool, n, rows, cols, [&](int64_t r0, int64_t r1) { matmul_rows(out, x, w, n, rows, cols, r0, r1); });
}

// cap * tanh(score / cap), as llama.cpp's graph scales by 1 / cap, takes tanh and scales back.
static void softcap_scores(float* att, int64_t n_pos, float cap) {
    if (cap <= 0.0f) return;
    const float inv = 1.0f / cap;
    for (int64_t s = 0; s < n_pos; ++s) att[s] = std::tanh(att[s] * inv) * cap;
}

void attend_head(const float* q, const float* keys, const float* values, int64_t stride, int64_t n_pos,
                 int64_t head_size, bool interleaved, float divisor, float cap, float* att, float* out) {
#if defined(GKQ_HAVE_AVX2_KERNELS)
    if (use_avx2()) {
        avx2::attention_scores(q, keys, stride, n_pos, head_size, interleaved, divisor, att);
        softcap_scores(att, n_pos, cap);
        softmax_in_place(att, n_pos);
        avx2::attention_values(att, values, stride, n_pos, head_size, out);
        return;
    }
#endif
    generic::attention_scores(q, keys, stride, n_pos, head_size, interleaved, divisor, att);
    softcap_scores(att, n_pos, cap);
    softmax_in_place(att, n_pos);
    generic::attention_values(att, values, stride, n_pos, head_size, out);
}

float dot_fixed_order(const float* a, const float* b, int64_t n) {
    float out = 0;
    matmul_rows(&out, b, a, 1, 1, n, 0, 1);
    return out;
}

}  // namespace gkq
