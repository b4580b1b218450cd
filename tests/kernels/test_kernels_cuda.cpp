// The CUDA kernels against the scalar oracles (CpuRef): factor and block dequantization bit for bit, reconstruction
// within the named tolerance, whole EncodedTensors of every preset and layout, payload errors, run_backend.
// Exits 77 (CTest: skipped) with the reason when this build has no CUDA kernels or the machine has no device.
#include "gkq/codec.h"
#include "gkq/convert.h"
#include "gkq/kernels.h"
#include "kernel_checks.h"
#include "test_support.h"

#include <QtTest>

#include <cstdio>

using namespace gkq;
using namespace gkq::test;
using kernels::Backend;

class TestKernelsCuda : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { qInfo("device: %s", kernels::backend_device(Backend::Cuda).c_str()); }

    void factorsMatchRef() {
        const std::vector<float> scales = {0.5f, 1.25f, 3.0f, 0.0f, 2.0f};
        for (int bits : {2, 4, 8})
            for (bool packed : {true, false})
                for (bool delta : {false, true}) {
                    std::vector<uint8_t> codes = random_bytes(1 << 16, uint64_t(bits) + 10 * packed + 100 * delta);
                    if (!packed)
                        for (auto& c : codes) c &= static_cast<uint8_t>((1 << bits) - 1);
                    // one block-wide step is 2048 codes: lengths around and across it
                    for (int64_t len : {1, 7, 33, 255, 2047, 2048, 2049, 4097, 9000})
                        for (uint64_t first : {0, 1, 3}) {
                            const int64_t n_vectors = 5;
                            if ((first + uint64_t(n_vectors * len)) * uint64_t(bits) / 8 + 1 >= codes.size()) continue;
                            const auto n = size_t(n_vectors * len);
                            std::vector<float> want(n), got(n, -7.0f);
                            const kernels::FactorCodes fc{codes.data(), bits, packed};
                            QVERIFY(kernels::dequantize_factors(Backend::CpuRef, fc, first, n_vectors, len, delta,
                                                                scales.data(), want.data())
                                        .is_ok());
                            const Status s = kernels::dequantize_factors(Backend::Cuda, fc, first, n_vectors, len,
                                                                         delta, scales.data(), got.data());
                            QVERIFY2(s.is_ok(), s.message().c_str());
                            const int64_t bad = first_bit_difference(got.data(), want.data(), int64_t(n));
                            QVERIFY2(bad < 0, (std::to_string(bits) + "-bit len " + std::to_string(len) + " first " +
                                               std::to_string(first) + (delta ? " delta " : " ") +
                                               describe("factor", bad, got[size_t(bad)], want[size_t(bad)]))
                                                  .c_str());
                        }
                }
        QCOMPARE(kDequantizeTolerance, 0.0f);
    }

    void blocksMatchRef() {
        for (DType t : {DType::F16, DType::Q8_0, DType::Q4_0})
            for (uint64_t n : {32ull, 32ull * 33, 32ull * 100003}) {
                const std::vector<float> x = random_floats(n, n, 4.0f);
                std::vector<uint8_t> blocks(*dtype_storage_bytes(t, n));
                if (t == DType::Q8_0)
                    quantize_q8_0(x.data(), n, blocks.data());
                else if (t == DType::Q4_0)
                    quantize_q4_0(x.data(), n, blocks.data());
                else
                    encode_f16(x.data(), n, reinterpret_cast<uint16_t*>(blocks.data()));
                std::vector<float> want(n), got(n, -7.0f);
                QVERIFY(kernels::dequantize_blocks(Backend::CpuRef, t, blocks.data(), n, want.data()).is_ok());
                const Status s = kernels::dequantize_blocks(Backend::Cuda, t, blocks.data(), n, got.data());
                QVERIFY2(s.is_ok(), s.message().c_str());
                const int64_t bad = first_bit_difference(got.data(), want.data(), int64_t(n));
                QVERIFY2(bad < 0,
                         describe(std::string(dtype_name(t)), bad, got[size_t(bad)], want[size_t(bad)]).c_str());
            }
    }

    void reconstructMatchesRef() {
        int64_t same_as_simd = 0, compared_with_simd = 0;
        for (int64_t k : {0, 1, 3, 16, 17, 64, 100, 256})
            for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
                     {1, 1}, {7, 17}, {64, 64}, {65, 96}, {130, 320}, {300, 257}}) {
                const std::vector<float> ut = random_floats(size_t(k * rows), uint64_t(rows * 31 + k));
                const std::vector<float> vt = random_floats(size_t(k * cols), uint64_t(cols * 17 + k));
                std::vector<float> sigma = random_floats(size_t(k), uint64_t(k) + 9, 10.0f);
                for (auto& s : sigma) s = std::fabs(s);
                for (int residual_bits : {0, 4, 8}) {
                    if (residual_bits && cols % 32 != 0) continue;
                    const std::vector<float> rv = random_floats(size_t(rows * cols), 99, 0.1f);
                    std::vector<uint8_t> res(residual_bits ? size_t(rows * cols / 32 * (residual_bits == 4 ? 18 : 34))
                                                           : 0);
                    if (residual_bits == 4) quantize_q4_0(rv.data(), rv.size(), res.data());
                    if (residual_bits == 8) quantize_q8_0(rv.data(), rv.size(), res.data());
                    const kernels::ResidualBlocks rb{res.data(), residual_bits};
                    std::vector<float> want(size_t(rows * cols)), got(size_t(rows * cols), -7.0f);
                    QVERIFY(kernels::reconstruct(Backend::CpuRef, ut.data(), sigma.data(), vt.data(), rows, cols, k, rb,
                                                 want.data())
                                .is_ok());
                    const Status s = kernels::reconstruct(Backend::Cuda, ut.data(), sigma.data(), vt.data(), rows, cols,
                                                          k, rb, got.data());
                    QVERIFY2(s.is_ok(), s.message().c_str());
                    const std::string bad = check_reconstruction(ut.data(), sigma.data(), vt.data(), rows, cols, k,
                                                                 residual_bits != 0, got.data(), want.data());
                    QVERIFY2(bad.empty(), bad.c_str());
                    if (kernels::backend_available(Backend::CpuSimd)) {
                        std::vector<float> simd(got.size());
                        QVERIFY(kernels::reconstruct(Backend::CpuSimd, ut.data(), sigma.data(), vt.data(), rows, cols,
                                                     k, rb, simd.data())
                                    .is_ok());
                        ++compared_with_simd;
                        same_as_simd += first_bit_difference(got.data(), simd.data(), rows * cols) < 0;
                    }
                }
            }
        // Both sum with fused multiply-adds in the same order, so they are expected to agree bit for bit; reported,
        // not required (the contract is the tolerance against the oracle).
        qInfo("cuda equal to cpu-simd bit for bit in %lld of %lld cases", static_cast<long long>(same_as_simd),
              static_cast<long long>(compared_with_simd));
    }

    void decodeMatchesRef() {
        std::string error;
        std::vector<Case> cases = preset_cases(error);
        QVERIFY2(error.empty(), error.c_str());
        std::vector<Case> layouts = layout_cases(error);
        QVERIFY2(error.empty(), error.c_str());
        cases.insert(cases.end(), layouts.begin(), layouts.end());
        for (const Case& c : cases) {
            const std::string bad = check_decode(Backend::Cuda, c.tensor);
            QVERIFY2(bad.empty(), (c.label + ": " + bad).c_str());
        }
    }

    void corruptPayloadRejectedAsOnCpu() {
        CodecParams p;
        p.method = Method::LowRankResidual;
        p.rank = 3;
        p.residual = ResidualKind::Q8_0;
        const std::vector<float> w = random_floats(16 * 64, 4);
        EncodedTensor t = *encode_tensor(input("blk.1.ffn_up.weight", TensorRole::FfnUp, {16, 64}, w), p);
        t.payload.pop_back();
        std::vector<float> out(size_t(t.n_elements()));
        const Status s = kernels::decode(Backend::Cuda, t, out.data(), out.size());
        QCOMPARE(s.code(), StatusCode::Corrupt);
        QCOMPARE(s.message(), decode_tensor(t).message());
    }

    // The CUDA kernels add Q4_0 and Q8_0 residual blocks; a residual in another block type is refused by name (the
    // CPU backends decode it), and an unknown residual code as the codec refuses it.
    void otherResidualTypesRefusedByName() {
        for (ResidualKind r : all_residual_kinds()) {
            if (r == ResidualKind::None || r == ResidualKind::Q4_0 || r == ResidualKind::Q8_0) continue;
            CodecParams p;
            p.method = Method::LowRankResidual;
            p.rank = 3;
            p.residual = r;
            const std::vector<float> w = random_floats(4 * 256, 5);
            const EncodedTensor t = *encode_tensor(input("blk.1.ffn_up.weight", TensorRole::FfnUp, {4, 256}, w), p);
            std::vector<float> out(size_t(t.n_elements()));
            const Status s = kernels::decode(Backend::Cuda, t, out.data(), out.size());
            QCOMPARE(s.code(), StatusCode::Unsupported);
            QCOMPARE(s.message(), "tensor 'blk.1.ffn_up.weight' (lowrank+residual): a residual of type " +
                                      std::string(residual_name(r)) +
                                      " has no CUDA kernel (q4_0 and q8_0 do; the CPU backends decode it)");
            EncodedTensor unknown = t;
            unknown.residual_code = 99;
            QCOMPARE(kernels::decode(Backend::Cuda, unknown, out.data(), out.size()).message(),
                     decode_tensor(unknown).message());
        }
    }

    void runBackendOnDevice() {
        const Preset p = *find_preset("lowrank-q4");
        const std::vector<float> w = random_floats(256 * 512, 21);
        const EncodedTensor e = *encode_tensor(input("blk.0.ffn_gate.weight", TensorRole::FfnGate, {256, 512}, w),
                                               p.params_for(TensorRole::FfnGate, 2));
        Result<kernels::BackendRun> run = kernels::run_backend(Backend::Cuda, e, {3, {}});
        QVERIFY2(run.is_ok(), run.message().c_str());
        QVERIFY(run->unavailable.empty());
        QVERIFY(run->seconds > 0.0);
        Result<kernels::BackendRun> ref = kernels::run_backend(Backend::CpuRef, e, {1, {}});
        QVERIFY(ref.is_ok());
        // both are within float rounding of the float64 reference; neither is the reference itself
        QVERIFY2(run->rel_error < 1e-5, std::to_string(run->rel_error).c_str());
        QVERIFY2(ref->rel_error < 1e-5, std::to_string(ref->rel_error).c_str());
        qInfo("cuda: %.3f ms (%.2f GB/s with copies), rel error %.3g; cpu-ref rel error %.3g", run->seconds * 1e3,
              run->gb_per_s, run->rel_error, ref->rel_error);
    }
};

int main(int argc, char** argv) {
    const std::string why = gkq::kernels::backend_unavailable_reason(Backend::Cuda);
    if (!why.empty()) {
        std::printf("SKIP test_kernels_cuda: %s\n", why.c_str());
        return 77;
    }
    TestKernelsCuda t;
    return QTest::qExec(&t, argc, argv);
}

#include "test_kernels_cuda.moc"
