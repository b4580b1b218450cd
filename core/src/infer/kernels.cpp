#include "infer/kernels.h"

#include "gkq/sampler.h"

#include "infer/thread_pool.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>

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
#define GKQ_KERNEL_ATTR __attribute__((target("avx2,no-fma")))
#define GKQ_KERNEL_ROW_BLOCK 8
#include "infer/kernels.inc"
#undef GKQ_KERNEL_NS
#undef GKQ_KERNEL_ATTR
#undef GKQ_KERNEL_ROW_BLOCK
#endif

namespace {

bool cpu_has_avx2() {
#if defined(GKQ_HAVE_AVX2_KERNELS)
    return __builtin_cpu_supports("avx2");
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

}  // namespace

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
    const bool parallel = pool != nullptr && n * rows * cols >= min_parallel_macs();
    if (!parallel) {
        matmul_rows(out, x, w, n, rows, cols, 0, rows);
        return;
    }
    // chunks of whole 8-row blocks, the widest the kernels take at once
    pool->parallel_for(rows, pool->chunk_for(rows, 8), true,
                       [&](int64_t r0, int64_t r1) { matmul_rows(out, x, w, n, rows, cols, r0, r1); });
}

void attend_head(const float* q, const float* keys, const float* values, int64_t stride, int64_t n_pos,
                 int64_t head_size, bool interleaved, float* att, float* out) {
    const float scale = std::sqrt(static_cast<float>(head_size));  // run.c: score /= sqrtf(head_size)
#if defined(GKQ_HAVE_AVX2_KERNELS)
    if (use_avx2()) {
        avx2::attention_scores(q, keys, stride, n_pos, head_size, interleaved, scale, att);
        softmax_in_place(att, n_pos);
        avx2::attention_values(att, values, stride, n_pos, head_size, out);
        return;
    }
#endif
    generic::attention_scores(q, keys, stride, n_pos, head_size, interleaved, scale, att);
    softmax_in_place(att, n_pos);
    generic::attention_values(att, values, stride, n_pos, head_size, out);
}

float dot_fixed_order(const float* a, const float* b, int64_t n) {
    float out = 0;
    matmul_rows(&out, b, a, 1, 1, n, 0, 1);
    return out;
}

}  // namespace gkq
