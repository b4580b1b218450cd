// The CPU kernels (gkq/kernels.h): every AVX2 kernel against its scalar *_ref oracle at odd sizes and ranks 1..256,
// the oracles against hand-computed values and the codec's own decoder, whole EncodedTensors of every preset (and
// of the folded, run-length-encoded and quantized-sigma layouts) decoded through the kernels against
// gkq::decode_tensor, payload errors, backend availability and the per-backend measurement. CpuSimd's reconstruction
// is also checked bit for bit against a scalar reference of its summation order (fma_order_reference).
// Tolerances (named below): dequantization is exact; the FMA reconstruction is bounded per element by
// kReconstructTolerancePerTerm * k * sum_r |sigma_r u_ir v_jr| (+ one rounding of the residual add).
#include "gkq/codec.h"
#include "gkq/convert.h"
#include "gkq/kernels.h"
#include "kernel_checks.h"
#include "test_support.h"

#include <QtTest>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <memory>

using namespace gkq;
using namespace gkq::test;
using kernels::Backend;

namespace {

bool simd_here() {
    return kernels::backend_available(Backend::CpuSimd);
}

#define SKIP_WITHOUT_SIMD()                                                                                    \
    do {                                                                                                       \
        if (!simd_here())                                                                                      \
            QSKIP(("cpu-simd unavailable: " + kernels::backend_unavailable_reason(Backend::CpuSimd)).c_str()); \
    } while (0)

// CpuRef is the codec's decoder bit for bit; CpuSimd is within the reconstruction bound of CpuRef.
std::string check_against_codec(const EncodedTensor& e) {
    Result<std::vector<float>> codec = decode_tensor(e);
    if (!codec) return "codec: " + codec.message();
    std::vector<float> ref(codec->size(), -7.0f);
    if (Status s = kernels::decode(Backend::CpuRef, e, ref.data(), ref.size()); !s) return s.message();
    const int64_t bad = first_bit_difference(ref.data(), codec->data(), int64_t(ref.size()));
    if (bad >= 0) return describe("cpu-ref vs codec", bad, ref[bad], (*codec)[bad]);
    return simd_here() ? check_decode(Backend::CpuSimd, e) : "";
}

// The summation order CpuSimd promises (and the CUDA kernels follow): per element, from +0, one fused multiply-add
// per rank r = 0 .. k-1 in ascending order with the rounded product sigma_r * u_ir, then + (q * d) of the residual as
// a rounded product and a rounded sum. Scalar, so that any reordering in a SIMD kernel shows as a bit difference.
std::vector<float> fma_order_reference(const float* ut, const float* sigma, const float* vt, int64_t rows, int64_t cols,
                                       int64_t k, kernels::ResidualBlocks residual) {
    std::vector<float> res(residual.bits ? size_t(rows * cols) : 0);
    if (residual.bits && !kernels::dequantize_blocks(Backend::CpuRef, residual.bits == 4 ? DType::Q4_0 : DType::Q8_0,
                                                     residual.data, uint64_t(rows * cols), res.data()))
        return {};  // the callers compare sizes first
    std::vector<float> w(size_t(rows * cols));
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
            float acc = 0.0f;
            for (int64_t r = 0; r < k; ++r) acc = std::fma(sigma[r] * ut[r * rows + i], vt[r * cols + j], acc);
            w[size_t(i * cols + j)] = residual.bits ? acc + res[size_t(i * cols + j)] : acc;
        }
    return w;
}

std::vector<uint8_t> residual_blocks(int bits, int64_t n, uint64_t seed) {
    const std::vector<float> values = test::random_floats(size_t(n), seed, 0.1f);
    std::vector<uint8_t> res(bits ? size_t(n / 32 * (bits == 4 ? 18 : 34)) : 0);
    if (bits == 4) quantize_q4_0(values.data(), values.size(), res.data());
    if (bits == 8) quantize_q8_0(values.data(), values.size(), res.data());
    return res;
}

}  // namespace

class TestKernelsCpu : public QObject {
    Q_OBJECT
private slots:
    // ---- oracles against hand-computed values ------------------------------------------------------------------

    void factorOracleHandComputed() {
        // 2-bit codes LSB-first: byte 0b11'10'01'00 holds codes 0, 1, 2, 3 -> -m, -m/3, m/3, m with d = m / 3
        const uint8_t packed[1] = {0xE4};
        const float scale[1] = {3.0f};
        float out[4];
        QVERIFY(kernels::dequantize_factors(Backend::CpuRef, {packed, 2, true}, 0, 1, 4, false, scale, out).is_ok());
        QCOMPARE(std::vector<float>(out, out + 4), (std::vector<float>{-3.0f, -1.0f, 1.0f, 3.0f}));
        // delta: symbols 1, 3, 2, 3 -> codes 1, 0, 2, 1 (prefix sums mod 4)
        const uint8_t symbols[4] = {1, 3, 2, 3};
        QVERIFY(kernels::dequantize_factors(Backend::CpuRef, {symbols, 2, false}, 0, 1, 4, true, scale, out).is_ok());
        QCOMPARE(std::vector<float>(out, out + 4), (std::vector<float>{-1.0f, -3.0f, 1.0f, -1.0f}));
        // 4-bit, starting at code 1 of the stream: codes 0xF (high nibble of byte 0) and 0x0 -> m, -m (d = m / 15)
        const uint8_t nibbles[2] = {0xF0, 0x30};
        const float m15[1] = {15.0f};
        QVERIFY(kernels::dequantize_factors(Backend::CpuRef, {nibbles, 4, true}, 1, 1, 3, false, m15, out).is_ok());
        QCOMPARE(std::vector<float>(out, out + 3), (std::vector<float>{15.0f, -15.0f, -9.0f}));
    }

    void blockOraclesMatchConvert() {
        const std::vector<float> x = test::random_floats(32 * 37, 5, 3.0f);
        for (DType t : {DType::Q8_0, DType::Q4_0, DType::F16}) {
            std::vector<uint8_t> blocks(*dtype_storage_bytes(t, x.size()));
            if (t == DType::Q8_0)
                quantize_q8_0(x.data(), x.size(), blocks.data());
            else if (t == DType::Q4_0)
                quantize_q4_0(x.data(), x.size(), blocks.data());
            else
                encode_f16(x.data(), x.size(), reinterpret_cast<uint16_t*>(blocks.data()));
            std::vector<float> want(x.size()), got(x.size());
            QVERIFY(convert_to_f32(t, blocks.data(), x.size(), want.data()).is_ok());
            QVERIFY(kernels::dequantize_blocks(Backend::CpuRef, t, blocks.data(), x.size(), got.data()).is_ok());
            QCOMPARE(first_bit_difference(got.data(), want.data(), int64_t(x.size())), int64_t(-1));
        }
    }

    // ---- SIMD against the oracles --------------------------------------------------------------------------------

    void factorsSimdMatchesRef_data() {
        QTest::addColumn<int>("bits");
        QTest::addColumn<bool>("packed");
        QTest::addColumn<bool>("delta");
        for (int bits : {2, 4, 8})
            for (bool packed : {true, false})
                for (bool delta : {false, true})
                    QTest::addRow("%d-bit %s%s", bits, packed ? "packed" : "bytes", delta ? " delta" : "")
                        << bits << packed << delta;
    }
    void factorsSimdMatchesRef() {
        SKIP_WITHOUT_SIMD();
        QFETCH(int, bits);
        QFETCH(bool, packed);
        QFETCH(bool, delta);
        const std::vector<uint8_t> stream = random_bytes(1 << 16, uint64_t(bits) * 7 + packed + 2 * delta);
        std::vector<uint8_t> codes(stream);
        if (!packed)
            for (auto& c : codes) c &= static_cast<uint8_t>((1 << bits) - 1);
        const std::vector<float> scales = test::random_floats(16, 3, 2.0f);
        std::vector<float> abs_scales(scales.size());
        for (size_t i = 0; i < scales.size(); ++i) abs_scales[i] = std::fabs(scales[i]);
        for (int64_t len : {1, 3, 7, 15, 16, 17, 31, 33, 63, 64, 65, 100, 4095, 4097, 5000})
            for (int64_t n_vectors : {1, 3, 5})
                for (uint64_t first : {0, 1, 3, 5})
                    for (int threads : {1, 2, 3}) {
                        if ((first + uint64_t(n_vectors * len)) * uint64_t(bits) / 8 + 1 >= stream.size()) continue;
                        const auto n = static_cast<size_t>(n_vectors * len);
                        std::vector<float> want(n), got(n, -7.0f);
                        const kernels::FactorCodes fc{codes.data(), bits, packed};
                        QVERIFY(kernels::dequantize_factors(Backend::CpuRef, fc, first, n_vectors, len, delta,
                                                            abs_scales.data(), want.data())
                                    .is_ok());
                        QVERIFY(kernels::dequantize_factors(Backend::CpuSimd, fc, first, n_vectors, len, delta,
                                                            abs_scales.data(), got.data(), {threads})
                                    .is_ok());
                        const int64_t bad = first_bit_difference(got.data(), want.data(), int64_t(n));
                        if (bad >= 0)
                            QFAIL(qPrintable(QString("len %1 vectors %2 first %3 threads %4: ")
                                                 .arg(len)
                                                 .arg(n_vectors)
                                                 .arg(first)
                                                 .arg(threads) +
                                             QString::fromStdString(describe("factor", bad, got[bad], want[bad]))));
                    }
        QCOMPARE(kDequantizeTolerance, 0.0f);
    }

    void blocksSimdMatchesRef_data() {
        QTest::addColumn<int>("type");
        QTest::newRow("f16") << int(DType::F16);
        QTest::newRow("q8_0") << int(DType::Q8_0);
        QTest::newRow("q4_0") << int(DType::Q4_0);
    }
    void blocksSimdMatchesRef() {
        SKIP_WITHOUT_SIMD();
        QFETCH(int, type);
        const auto t = static_cast<DType>(type);
        for (uint64_t n : {32ull, 96ull, 224ull, 32ull * 33, 32ull * 1001, 32ull * 100003}) {
            for (uint64_t extra : {0ull, 1ull, 7ull}) {
                if (t != DType::F16 && extra) continue;  // blocks are whole
                const uint64_t count = n + extra;
                const std::vector<float> x = test::random_floats(count, count, 4.0f);
                std::vector<uint8_t> blocks(*dtype_storage_bytes(t, count));
                if (t == DType::Q8_0)
                    quantize_q8_0(x.data(), count, blocks.data());
                else if (t == DType::Q4_0)
                    quantize_q4_0(x.data(), count, blocks.data());
                else
                    encode_f16(x.data(), count, reinterpret_cast<uint16_t*>(blocks.data()));
                for (int threads : {1, 2}) {
                    std::vector<float> want(count), got(count, -7.0f);
                    QVERIFY(kernels::dequantize_blocks(Backend::CpuRef, t, blocks.data(), count, want.data()).is_ok());
                    QVERIFY(kernels::dequantize_blocks(Backend::CpuSimd, t, blocks.data(), count, got.data(), {threads})
                                .is_ok());
                    const int64_t bad = first_bit_difference(got.data(), want.data(), int64_t(count));
                    if (bad >= 0) QFAIL(describe("blocks", bad, got[bad], want[bad]).c_str());
                }
            }
        }
    }

    void reconstructSimdMatchesRef_data() {
        QTest::addColumn<int>("rank");
        for (int k : {0, 1, 2, 3, 5, 16, 17, 64, 100, 256}) QTest::addRow("rank %d", k) << k;
    }
    void reconstructSimdMatchesRef() {
        SKIP_WITHOUT_SIMD();
        QFETCH(int, rank);
        const int64_t k = rank;
        const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 1},   {5, 7},    {6, 16},    {7, 17},  {13, 33},
                                                                 {64, 96}, {97, 130}, {300, 257}, {37, 64}, {130, 320}};
        for (auto [rows, cols] : shapes) {
            const std::vector<float> ut = test::random_floats(size_t(k * rows), uint64_t(rows * 31 + k));
            const std::vector<float> vt = test::random_floats(size_t(k * cols), uint64_t(cols * 17 + k));
            std::vector<float> sigma = test::random_floats(size_t(k), uint64_t(k) + 9, 10.0f);
            for (auto& s : sigma) s = std::fabs(s);
            for (int residual_bits : {0, 4, 8}) {
                if (residual_bits && cols % 32 != 0) continue;
                const std::vector<float> res_values = test::random_floats(size_t(rows * cols), 99, 0.1f);
                std::vector<uint8_t> res(residual_bits ? size_t(rows * cols / 32 * (residual_bits == 4 ? 18 : 34)) : 0);
                if (residual_bits == 4) quantize_q4_0(res_values.data(), res_values.size(), res.data());
                if (residual_bits == 8) quantize_q8_0(res_values.data(), res_values.size(), res.data());
                const kernels::ResidualBlocks rb{res.data(), residual_bits};
                std::vector<float> want(size_t(rows * cols));
                QVERIFY(kernels::reconstruct(Backend::CpuRef, ut.data(), sigma.data(), vt.data(), rows, cols, k, rb,
                                             want.data())
                            .is_ok());
                std::vector<float> first;
                for (int threads : {1, 2, 3}) {
                    std::vector<float> got(size_t(rows * cols), -7.0f);
                    QVERIFY(kernels::reconstruct(Backend::CpuSimd, ut.data(), sigma.data(), vt.data(), rows, cols, k,
                                                 rb, got.data(), {threads})
                                .is_ok());
                    const std::string bad = check_reconstruction(ut.data(), sigma.data(), vt.data(), rows, cols, k,
                                                                 residual_bits != 0, got.data(), want.data());
                    QVERIFY2(bad.empty(), bad.c_str());
                    // each element is computed whole by one thread: the thread count changes nothing
                    if (first.empty())
                        first = got;
                    else
                        QCOMPARE(first_bit_difference(got.data(), first.data(), rows * cols), int64_t(-1));
                }
                if (k == 0) QCOMPARE(first_bit_difference(first.data(), want.data(), rows * cols), int64_t(-1));
            }
        }
    }

    // CpuSimd is the FMA-order reference bit for bit: at the 6 x 16 tile's row and column edges (rows 1, 5-7, 12-13;
    // columns 1, 15-17, 31-33, 48), ranks around the streaming-store limit (10, 11), 1-3 threads.
    void reconstructFollowsFmaOrder_data() {
        QTest::addColumn<int>("rank");
        for (int k : {0, 1, 2, 5, 6, 7, 10, 11, 16, 17, 33, 64}) QTest::addRow("rank %d", k) << k;
    }
    void reconstructFollowsFmaOrder() {
        SKIP_WITHOUT_SIMD();
        QFETCH(int, rank);
        const int64_t k = rank;
        for (int64_t rows : {1, 5, 6, 7, 12, 13})
            for (int64_t cols : {1, 15, 16, 17, 31, 32, 33, 48, 64}) {
                const std::vector<float> ut = test::random_floats(size_t(k * rows), uint64_t(rows * 7 + k + 1));
                const std::vector<float> vt = test::random_floats(size_t(k * cols), uint64_t(cols * 5 + k + 2));
                const std::vector<float> sigma = test::random_floats(size_t(k), uint64_t(k) + 3, 4.0f);
                for (int bits : {0, 4, 8}) {
                    if (bits && cols % 32 != 0) continue;
                    const std::vector<uint8_t> res = residual_blocks(bits, rows * cols, uint64_t(rows + cols));
                    const kernels::ResidualBlocks rb{res.data(), bits};
                    const std::vector<float> want =
                        fma_order_reference(ut.data(), sigma.data(), vt.data(), rows, cols, k, rb);
                    QCOMPARE(want.size(), size_t(rows * cols));
                    for (int threads : {1, 2, 3}) {
                        std::vector<float> got(size_t(rows * cols), -7.0f);
                        QVERIFY(kernels::reconstruct(Backend::CpuSimd, ut.data(), sigma.data(), vt.data(), rows, cols,
                                                     k, rb, got.data(), {threads})
                                    .is_ok());
                        const int64_t bad = first_bit_difference(got.data(), want.data(), rows * cols);
                        if (bad >= 0)
                            QFAIL(describe("reconstruct " + std::to_string(rows) + " x " + std::to_string(cols) +
                                               " residual " + std::to_string(bits) + " threads " +
                                               std::to_string(threads),
                                           bad, got[size_t(bad)], want[size_t(bad)])
                                      .c_str());
                    }
                }
            }
    }

    // The factors at every alignment: 64-byte aligned ones are read in place, others through aligned copies; the
    // result is the FMA-order reference bit for bit either way.
    void reconstructFactorAlignment() {
        SKIP_WITHOUT_SIMD();
        const int64_t rows = 37, cols = 80, k = 16;
        const std::vector<float> ut = test::random_floats(size_t(k * rows), 21);
        const std::vector<float> vt = test::random_floats(size_t(k * cols), 22);
        const std::vector<float> sigma = test::random_floats(size_t(k), 23, 4.0f);
        const std::vector<float> want = fma_order_reference(ut.data(), sigma.data(), vt.data(), rows, cols, k, {});
        std::vector<float> ut_buffer(ut.size() + 32), vt_buffer(vt.size() + 32);
        auto aligned = [](std::vector<float>& b) {
            float* p = b.data();
            while (reinterpret_cast<uintptr_t>(p) % 64 != 0) ++p;
            return p;
        };
        for (int64_t offset : {0, 1, 3, 4}) {
            float* u = aligned(ut_buffer) + offset;
            float* v = aligned(vt_buffer) + offset;
            std::copy(ut.begin(), ut.end(), u);
            std::copy(vt.begin(), vt.end(), v);
            std::vector<float> got(size_t(rows * cols), -7.0f);
            QVERIFY(
                kernels::reconstruct(Backend::CpuSimd, u, sigma.data(), v, rows, cols, k, {}, got.data(), {2}).is_ok());
            const int64_t bad = first_bit_difference(got.data(), want.data(), rows * cols);
            if (bad >= 0)
                QFAIL(describe("factors at offset " + std::to_string(offset), bad, got[size_t(bad)], want[size_t(bad)])
                          .c_str());
        }
    }

    // Outputs of 16 MiB and more: streaming stores up to rank 10 (when 64-byte aligned with whole tile rows), plain
    // stores above it. Both sides of that limit, aligned and not, with and without a residual, are the FMA-order
    // reference bit for bit with 1, 2 and 3 threads.
    void reconstructLargeOutputStorePaths() {
        SKIP_WITHOUT_SIMD();
        const int64_t rows = 1031, cols = 4096 + 64;
        QVERIFY(uint64_t(rows * cols * 4) >= (uint64_t{16} << 20));
        std::vector<float> buffer(size_t(rows * cols) + 64);
        float* base = buffer.data();
        while (reinterpret_cast<uintptr_t>(base) % 64 != 0) ++base;
        for (int64_t k : {10, 11, 16}) {
            const std::vector<float> ut = test::random_floats(size_t(k * rows), uint64_t(k) + 11);
            const std::vector<float> vt = test::random_floats(size_t(k * cols), uint64_t(k) + 12);
            const std::vector<float> sigma = test::random_floats(size_t(k), uint64_t(k) + 13, 4.0f);
            const int bits = k == 11 ? 4 : 0;
            const std::vector<uint8_t> res = residual_blocks(bits, rows * cols, 14);
            const kernels::ResidualBlocks rb{res.data(), bits};
            const std::vector<float> want = fma_order_reference(ut.data(), sigma.data(), vt.data(), rows, cols, k, rb);
            QCOMPARE(want.size(), size_t(rows * cols));
            for (int64_t offset : {0, 1})  // 64-byte aligned, 4-byte aligned
                for (int threads : {1, 2, 3}) {
                    float* out = base + offset;
                    std::fill(out, out + rows * cols, -7.0f);
                    QVERIFY(kernels::reconstruct(Backend::CpuSimd, ut.data(), sigma.data(), vt.data(), rows, cols, k,
                                                 rb, out, {threads})
                                .is_ok());
                    const int64_t bad = first_bit_difference(out, want.data(), rows * cols);
                    if (bad >= 0)
                        QFAIL(describe("reconstruct rank " + std::to_string(k) + " offset " + std::to_string(offset) +
                                           " threads " + std::to_string(threads),
                                       bad, out[bad], want[size_t(bad)])
                                  .c_str());
                }
        }
    }

    // Outputs of 16 MiB and more take the streaming-store path when 64-byte aligned, plain stores otherwise.
    void reconstructStreamingStores() {
        SKIP_WITHOUT_SIMD();
        const int64_t rows = 1030, cols = 4096 + 64, k = 3;
        QVERIFY(uint64_t(rows * cols * 4) >= (uint64_t{16} << 20));
        const std::vector<float> ut = test::random_floats(size_t(k * rows), 1);
        const std::vector<float> vt = test::random_floats(size_t(k * cols), 2);
        const std::vector<float> sigma = {3.0f, 2.0f, 1.0f};
        std::vector<float> res_values = test::random_floats(size_t(rows * cols), 3, 0.01f);
        std::vector<uint8_t> res(size_t(rows * cols / 32 * 34));
        quantize_q8_0(res_values.data(), res_values.size(), res.data());
        std::vector<float> want(size_t(rows * cols));
        QVERIFY(kernels::reconstruct(Backend::CpuRef, ut.data(), sigma.data(), vt.data(), rows, cols, k,
                                     {res.data(), 8}, want.data())
                    .is_ok());
        std::vector<float> buffer(size_t(rows * cols) + 64);
        float* base = buffer.data();
        while (reinterpret_cast<uintptr_t>(base) % 64 != 0) ++base;
        for (int64_t offset : {0, 4, 1}) {  // 64-byte aligned (streaming), 16-byte and 4-byte aligned (plain)
            float* out = base + offset;
            QVERIFY(kernels::reconstruct(Backend::CpuSimd, ut.data(), sigma.data(), vt.data(), rows, cols, k,
                                         {res.data(), 8}, out, {2})
                        .is_ok());
            const std::string bad =
                check_reconstruction(ut.data(), sigma.data(), vt.data(), rows, cols, k, true, out, want.data());
            QVERIFY2(bad.empty(), bad.c_str());
        }
    }

    // ---- whole tensors against the codec's decoder ---------------------------------------------------------------

    void decodeMatchesCodec() {
        std::string error;
        const std::vector<Case> cases = preset_cases(error);
        QVERIFY2(error.empty(), error.c_str());
        size_t runnable = 0;  // kernel_checks.h: preset_on_every_backend
        for (const std::string& name : preset_names()) runnable += preset_on_every_backend(*find_preset(name)) ? 1 : 0;
        QCOMPARE(cases.size(), runnable * 9);
        for (const Case& c : cases) {
            const std::string bad = check_against_codec(c.tensor);
            QVERIFY2(bad.empty(), (c.label + ": " + bad).c_str());
        }
    }

    // The layouts the presets do not reach on random matrices: head folding on U and on V, run-length-encoded
    // codes, quantized sigma, residuals of both kinds, 2-bit factors, a 3-D tensor.
    void decodeSpecialLayouts() {
        std::string error;
        const std::vector<Case> cases = layout_cases(error);
        QVERIFY2(error.empty(), error.c_str());
        QCOMPARE(cases.size(), size_t(13));
        for (const Case& c : cases) {
            QVERIFY2((c.tensor.flags & c.required_flags) == c.required_flags, c.label.c_str());
            const std::string bad = check_against_codec(c.tensor);
            QVERIFY2(bad.empty(), (c.label + ": " + bad).c_str());
        }
    }

    // A residual in each block type a residual can be stored in: the CPU backends decode it as the codec does (the
    // fused kernels add Q4_0 and Q8_0 blocks; the others are added after the product, element by element).
    void decodeEveryResidualType() {
        for (ResidualKind r : all_residual_kinds()) {
            if (r == ResidualKind::None) continue;
            CodecParams p;
            p.method = Method::LowRankResidual;
            p.rank = 3;
            p.residual = r;
            const std::vector<float> w = test::random_floats(6 * 512, 40 + int(r));
            Result<EncodedTensor> e = encode_tensor(input("blk.0.ffn_up.weight", TensorRole::FfnUp, {6, 512}, w), p);
            QVERIFY2(e.is_ok(), e.message().c_str());
            QCOMPARE(e->residual_code, residual_code_of(residual_dtype(r)));
            const std::string bad = check_against_codec(*e);
            QVERIFY2(bad.empty(), (std::string(residual_name(r)) + ": " + bad).c_str());
        }
    }

    void decodeRejectsWhatTheCodecRejects() {
        CodecParams p;
        p.method = Method::LowRankResidual;
        p.rank = 3;
        p.residual = ResidualKind::Q4_0;
        const std::vector<float> w = test::random_floats(16 * 64, 4);
        EncodedTensor good = *encode_tensor(input("blk.1.ffn_up.weight", TensorRole::FfnUp, {16, 64}, w), p);
        std::vector<EncodedTensor> bad(6, good);
        bad[0].payload.pop_back();     // residual blocks one byte short
        bad[1].rank = 99;              // rank beyond min(rows, cols)
        bad[2].factor_bits = 3;        // not 2, 4 or 8
        bad[3].method = Method::Q8_0;  // header fields a block method must not have
        bad[4].payload.resize(20);     // truncated inside the scales
        bad[5].residual_code = 99;     // no type has this residual code
        for (const EncodedTensor& t : bad) {
            Result<std::vector<float>> codec = decode_tensor(t);
            QVERIFY(!codec);
            for (Backend b : {Backend::CpuRef, Backend::CpuSimd}) {
                std::vector<float> out(size_t(t.n_elements()));
                const Status s = kernels::decode(b, t, out.data(), out.size());
                QCOMPARE(s.code(), StatusCode::Corrupt);
                QCOMPARE(s.message(), codec.message());
            }
        }
        std::vector<float> small(10);
        const Status s = kernels::decode(Backend::CpuRef, good, small.data(), small.size());
        QCOMPARE(s.code(), StatusCode::InvalidArgument);
        QCOMPARE(s.message(), std::string("tensor 'blk.1.ffn_up.weight' (lowrank+residual): destination holds 10 "
                                          "floats, the tensor has 1024"));
    }

    void operationArgumentsChecked() {
        float out[4];
        const uint8_t codes[4] = {};
        const float scale[1] = {1.0f};
        Status s = kernels::dequantize_factors(Backend::CpuRef, {codes, 3, true}, 0, 1, 4, false, scale, out);
        QCOMPARE(s.message(), std::string("dequantize_factors: bits is 3, expected 2, 4 or 8"));
        s = kernels::dequantize_blocks(Backend::CpuRef, DType::Q8_0, codes, 33, out);
        QCOMPARE(s.message(),
                 std::string("dequantize_blocks: 33 elements are not a whole number of 32-element blocks"));
        s = kernels::dequantize_blocks(Backend::CpuRef, DType::BF16, codes, 2, out);
        QCOMPARE(s.message(), std::string("dequantize_blocks: type bf16 is not f16 or a block type"));
        s = kernels::reconstruct(Backend::CpuRef, scale, scale, scale, 1, 48, 1, {codes, 8}, out);
        QCOMPARE(s.message(),
                 std::string("reconstruct: a residual needs blocks and a row length that is a multiple of 32, got 48"));
    }

    // ---- backends and measurement ---------------------------------------------------------------------------------

    void backendsNamedAndExplained() {
        for (Backend b : kernels::kAllBackends) QCOMPARE(*kernels::parse_backend(kernels::backend_name(b)), b);
        Result<Backend> bad = kernels::parse_backend("tpu");
        QCOMPARE(bad.message(), std::string("unknown kernel backend 'tpu' (backends: cpu-ref, cpu-simd, cuda)"));
        QVERIFY(kernels::backend_available(Backend::CpuRef));
        QCOMPARE(kernels::backend_device(Backend::CpuRef), std::string("CPU, scalar reference (1 thread)"));
        QCOMPARE(kernels::backend_device(Backend::CpuSimd, 3),
                 simd_here() ? std::string("CPU, AVX2/FMA (3 threads)") : std::string());
        // an unavailable backend says why, and every operation on it fails with that reason
        for (Backend b : {Backend::CpuSimd, Backend::Cuda}) {
            const std::string why = kernels::backend_unavailable_reason(b);
            if (why.empty()) continue;
            QVERIFY(kernels::backend_device(b).empty());
            float out[32];
            const uint8_t blocks[34] = {};
            const Status s = kernels::dequantize_blocks(b, DType::Q8_0, blocks, 32, out);
            QCOMPARE(s.code(), StatusCode::Unsupported);
            QCOMPARE(s.message(), "dequantize_blocks on " + std::string(kernels::backend_name(b)) + ": " + why);
        }
    }

    void runBackendMeasuresAgainstFloat64() {
        const Preset p = *find_preset("lowrank-q4");
        const std::vector<float> w = test::random_floats(64 * 128, 21);
        const EncodedTensor e = *encode_tensor(input("blk.0.ffn_gate.weight", TensorRole::FfnGate, {64, 128}, w),
                                               p.params_for(TensorRole::FfnGate, 2));
        QCOMPARE(e.method, Method::LowRankResidual);

        Result<std::vector<double>> ref = kernels::reference_f64(e);
        QVERIFY2(ref.is_ok(), ref.message().c_str());
        // the reference, recomputed here with plain loops from the codec's decoded factors' product
        const std::vector<float> codec = *decode_tensor(e);
        double max_ref_gap = 0.0;
        for (size_t i = 0; i < codec.size(); ++i) max_ref_gap = std::max(max_ref_gap, std::fabs((*ref)[i] - codec[i]));
        QVERIFY2(max_ref_gap < 1e-4, std::to_string(max_ref_gap).c_str());  // f32 rounding of sums of ~2 magnitude
        QVERIFY(max_ref_gap > 0.0);                                         // and not the f32 result itself

        for (Backend b : kernels::kAllBackends) {
            Result<kernels::BackendRun> run = kernels::run_backend(b, e, {3, {2}}, &*ref);
            QVERIFY2(run.is_ok(), run.message().c_str());
            QCOMPARE(run->backend, b);
            if (!kernels::backend_available(b)) {
                QCOMPARE(run->unavailable, kernels::backend_unavailable_reason(b));
                QCOMPARE(run->seconds, 0.0);
                continue;
            }
            QVERIFY(run->unavailable.empty());
            QVERIFY(run->seconds > 0.0);
            QCOMPARE(run->gb_per_s, 4.0 * 64 * 128 / run->seconds / 1e9);
            // the errors are those of the backend's own output
            std::vector<float> out(codec.size());
            QVERIFY(kernels::decode(b, e, out.data(), out.size(), {2}).is_ok());
            double max_abs = 0.0, d2 = 0.0, r2 = 0.0;
            for (size_t i = 0; i < out.size(); ++i) {
                const double d = out[i] - (*ref)[i];
                max_abs = std::max(max_abs, std::fabs(d));
                d2 += d * d;
                r2 += (*ref)[i] * (*ref)[i];
            }
            QCOMPARE(run->max_abs_error, max_abs);
            QCOMPARE(run->rel_error, std::sqrt(d2 / r2));
            if (b == Backend::CpuRef) QCOMPARE(run->max_abs_error, max_ref_gap);
        }
        Result<kernels::BackendRun> bad = kernels::run_backend(Backend::CpuRef, e, {0, {}});
        QCOMPARE(bad.message(), std::string("run_backend: n_runs is 0"));
    }
};

QTEST_APPLESS_MAIN(TestKernelsCpu)
#include "test_kernels_cpu.moc"
