// The per-tensor codec: presets, overrides, the GKQ low-rank pipeline (SVD, folding, factor quantization, delta,
// run-length encoding, residual blocks), llama.cpp block layouts, payload checks and the accounting.
#include "gkq/codec.h"
#include "gkq/convert.h"
#include "gkq/knot.h"
#include "gkq/type_traits.h"
#include "test_support.h"

#include "codec/factor_quant.h"
#include "codec/lowrank.h"
#include "codec/rle.h"
#include "codec/whiten.h"

#include <QtTest>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

using namespace gkq;

namespace {

// (rows, k) row-major with orthonormal columns: modified Gram-Schmidt over pseudo-random vectors.
std::vector<double> orthonormal(int64_t rows, int64_t k, uint64_t seed) {
    const std::vector<float> r = test::random_floats(static_cast<size_t>(rows * k), seed);
    std::vector<double> q(r.begin(), r.end());
    for (int64_t j = 0; j < k; ++j) {
        for (int64_t p = 0; p < j; ++p) {
            double dot = 0.0;
            for (int64_t i = 0; i < rows; ++i) dot += q[i * k + j] * q[i * k + p];
            for (int64_t i = 0; i < rows; ++i) q[i * k + j] -= dot * q[i * k + p];
        }
        double norm = 0.0;
        for (int64_t i = 0; i < rows; ++i) norm += q[i * k + j] * q[i * k + j];
        norm = std::sqrt(norm);
        for (int64_t i = 0; i < rows; ++i) q[i * k + j] /= norm;
    }
    return q;
}

// (rows, cols) = U diag(spectrum) V^T with random orthonormal U, V.
std::vector<float> with_spectrum(int64_t rows, int64_t cols, const std::vector<double>& spectrum, uint64_t seed) {
    const auto k = static_cast<int64_t>(spectrum.size());
    const std::vector<double> u = orthonormal(rows, k, seed), v = orthonormal(cols, k, seed + 1000);
    std::vector<float> w(static_cast<size_t>(rows * cols));
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
            double acc = 0.0;
            for (int64_t r = 0; r < k; ++r) acc += u[i * k + r] * spectrum[r] * v[j * k + r];
            w[i * cols + j] = static_cast<float>(acc);
        }
    return w;
}

TensorInput input(const std::string& name, TensorRole role, std::vector<int64_t> shape, const std::vector<float>& w,
                  int32_t n_heads = 0) {
    TensorInput in;
    in.name = name;
    in.role = role;
    in.layer = 0;
    in.shape = std::move(shape);
    in.data = w.data();
    in.n_heads = n_heads;
    return in;
}

using test::measure;
using test::Measured;

float read_f32(const std::vector<uint8_t>& p, size_t offset) {
    float x;
    std::memcpy(&x, p.data() + offset, 4);
    return x;
}

CodecParams low_rank(int32_t rank, int bits) {
    CodecParams p;
    p.method = Method::LowRank;
    p.rank = rank;
    p.factor_bits = bits;
    return p;
}

// Heads g = 0..7 of an attention projection are head_scale[g] times one (8, 64) block: rows for q, columns for o.
std::vector<float> scaled_heads(bool along_columns) {
    const std::vector<double> c = {1.0, -0.5, 0.25, 2.0, -1.5, 0.75, 1.25, -0.125};
    const std::vector<float> base = with_spectrum(8, 64, {4, 3, 2, 1, 0.5, 0.4, 0.3, 0.2}, 77);  // (8, 64)
    std::vector<float> w(64 * 64);
    for (int g = 0; g < 8; ++g)
        for (int r = 0; r < 8; ++r)
            for (int j = 0; j < 64; ++j) {
                const float x = static_cast<float>(c[g]) * base[r * 64 + j];
                if (along_columns)
                    w[j * 64 + g * 8 + r] = x;  // column block g = c_g * base^T
                else
                    w[(g * 8 + r) * 64 + j] = x;
            }
    return w;
}

// rank 1, u and v piecewise constant with ratios -1/3 and 1/3, which 4-bit codes hold exactly (levels are odd
// multiples of max/15); after delta coding the codes are long runs of zeros.
std::vector<float> piecewise_ffn() {
    std::vector<float> w(192 * 64);
    for (int i = 0; i < 192; ++i)
        for (int j = 0; j < 64; ++j) w[i * 64 + j] = float((i < 96 ? 0.75 : -0.25) * (j < 32 ? 0.25 : 0.75));
    return w;
}

// Activations X (tokens, cols) with unequal column scales and correlated columns, and G = X^T X.
std::vector<double> activations(int64_t tokens, int64_t cols, uint64_t seed) {
    const std::vector<float> r = test::random_floats(static_cast<size_t>(tokens * cols), seed);
    std::vector<double> x(static_cast<size_t>(tokens * cols));
    for (int64_t t = 0; t < tokens; ++t)
        for (int64_t j = 0; j < cols; ++j)
            x[t * cols + j] =
                r[t * cols + j] * (1.0 + 4.0 * static_cast<double>(j % 5)) + (j > 0 ? 0.5 * r[t * cols + j - 1] : 0.0);
    return x;
}

std::vector<double> gram_of(const std::vector<double>& x, int64_t tokens, int64_t cols) {
    std::vector<double> g(static_cast<size_t>(cols * cols), 0.0);
    for (int64_t t = 0; t < tokens; ++t)
        for (int64_t i = 0; i < cols; ++i)
            for (int64_t j = 0; j < cols; ++j) g[i * cols + j] += x[t * cols + i] * x[t * cols + j];
    return g;
}

// ||(W - W') X^T||_F^2 over the tokens of x.
template <class A, class B>
double output_error(const A& w, const B& w2, const std::vector<double>& x, int64_t rows, int64_t cols) {
    const auto tokens = static_cast<int64_t>(x.size()) / cols;
    double e = 0.0;
    for (int64_t t = 0; t < tokens; ++t)
        for (int64_t i = 0; i < rows; ++i) {
            double d = 0.0;
            for (int64_t j = 0; j < cols; ++j)
                d += (static_cast<double>(w[i * cols + j]) - static_cast<double>(w2[i * cols + j])) * x[t * cols + j];
            e += d * d;
        }
    return e;
}

// Every field of two reports, exactly.
void compare_reports(const TensorReport& a, const TensorReport& b) {
    QCOMPARE(a.name, b.name);
    QCOMPARE(a.role, b.role);
    QCOMPARE(a.layer, b.layer);
    QCOMPARE(a.shape, b.shape);
    QCOMPARE(a.dtype, b.dtype);
    QCOMPARE(a.method, b.method);
    QCOMPARE(a.rank, b.rank);
    QCOMPARE(a.factor_bits, b.factor_bits);
    QCOMPARE(a.residual_type, b.residual_type);
    QCOMPARE(a.flags, b.flags);
    QCOMPARE(a.payload_bytes, b.payload_bytes);
    QCOMPARE(a.bits_per_weight, b.bits_per_weight);
    QCOMPARE(a.bytes_on_disk_estimate, b.bytes_on_disk_estimate);
    QCOMPARE(a.rel_error, b.rel_error);  // exact: both sum in double in element order
    QCOMPARE(a.max_abs_error, b.max_abs_error);
    QCOMPARE(a.energy_kept, b.energy_kept);
    QCOMPARE(a.fold_applied, b.fold_applied);
    QCOMPARE(a.fold_bytes_saved, b.fold_bytes_saved);
    QCOMPARE(a.fold_fit_error, b.fold_fit_error);
    QCOMPARE(a.fold_note, b.fold_note);
    QCOMPARE(a.fallback, b.fallback);
    QCOMPARE(a.whiten_shift, b.whiten_shift);
}

// Rows of the (rows, cols) matrix w, as a RowReader reads them, counting the calls.
RowReader rows_of(const std::vector<float>& w, int64_t cols, int* calls) {
    return [&w, cols, calls](int64_t row0, int64_t n_rows, float* dst) {
        ++*calls;
        std::memcpy(dst, w.data() + row0 * cols, static_cast<size_t>(n_rows * cols) * 4);
        return Status::ok();
    };
}

// ---- low-rank + residual records as gkq wrote them before a residual could be any block type ---------------------

// The records of tests/data/knot/residual-q4_0-q8_0.knot: each a random matrix (test::random_floats(rows * cols, seed))
// encoded as rank `rank` with 8-bit factors plus a Q4_0 (residual code 4) or Q8_0 (code 8) residual, the last one
// LQER-style with an importance vector.
struct OldResidualRecord {
    const char* name;
    TensorRole role;
    int64_t rows, cols;
    int32_t rank;
    ResidualKind residual;
    LowRankTarget target;
    uint64_t seed;
    bool weighted;  // importance 0.5 + random_floats(cols, seed + 1) squared
};
constexpr OldResidualRecord kOldResidualRecords[] = {
    {"blk.0.attn_q.weight", TensorRole::AttnQ, 64, 64, 4, ResidualKind::Q4_0, LowRankTarget::Weights, 101, false},
    {"blk.0.ffn_up.weight", TensorRole::FfnUp, 96, 64, 3, ResidualKind::Q8_0, LowRankTarget::Weights, 102, false},
    {"blk.0.ffn_down.weight", TensorRole::FfnDown, 64, 96, 2, ResidualKind::Q4_0, LowRankTarget::QuantError, 103, true},
};

// FNV-1a (64-bit) of a decoded record's float32 bytes.
uint64_t fnv1a(const std::vector<float>& v) {
    uint64_t h = 14695981039346656037ull;
    const auto* b = reinterpret_cast<const uint8_t*>(v.data());
    for (size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

// What decode_tensor gave for each record of that knot when it was written (gkq at commit ce56457).
constexpr uint64_t kOldResidualDecoded[] = {0x44cb19276b3aafdfull, 0xb2f37d7514f0f0feull, 0xef6254f2be40fb3dull};

Result<EncodedTensor> encode_old_residual_record(const OldResidualRecord& r, std::vector<float>& importance) {
    const std::vector<float> w = test::random_floats(static_cast<size_t>(r.rows * r.cols), r.seed);
    importance.clear();
    if (r.weighted)
        for (float x : test::random_floats(static_cast<size_t>(r.cols), r.seed + 1)) importance.push_back(0.5f + x * x);
    TensorInput in = input(r.name, r.role, {r.rows, r.cols}, w);
    in.importance = r.weighted ? importance.data() : nullptr;
    CodecParams p = low_rank(r.rank, 8);
    p.method = Method::LowRankResidual;
    p.residual = r.residual;
    p.target = r.target;
    return encode_tensor(in, p);
}

}  // namespace

class TestCodec : public QObject {
    Q_OBJECT
private slots:
    // ---- presets ----------------------------------------------------------------------------------------------

    void presetNamesAndLookup() {
        QCOMPARE(preset_names(), (std::vector<std::string>{"paper", "q8_0", "q4_0", "lowrank-q4", "lowrank-q4k",
                                                           "svd-energy", "svd-plain", "svd-llm", "q4_0-lqer",
                                                           "q4_k-lqer", "q2_k", "q3_k_m", "q4_k_m", "q5_k_m", "q6_k"}));
        for (const std::string& name : preset_names()) {
            Result<Preset> p = find_preset(name);
            QVERIFY2(p.is_ok(), p.message().c_str());
            QCOMPARE(p->name, name);
            QVERIFY(!p->description.empty());
            QCOMPARE(p->by_role.size(), kTensorRoleCount);
        }
        Result<Preset> bad = find_preset("gkq-max");
        QCOMPARE(bad.status().code(), StatusCode::NotFound);
        QCOMPARE(
            bad.message(),
            std::string("unknown preset 'gkq-max' (presets: paper, q8_0, q4_0, lowrank-q4, lowrank-q4k, svd-energy, "
                        "svd-plain, svd-llm, q4_0-lqer, q4_k-lqer, q2_k, q3_k_m, q4_k_m, q5_k_m, q6_k)"));
    }

    // The Q4_K versions of lowrank-q4 and q4_0-lqer: the same parameters with the residual in Q4_K blocks.
    void kquantResidualPresets() {
        for (const auto& [q4k, q4] : {std::pair{"lowrank-q4k", "lowrank-q4"}, std::pair{"q4_k-lqer", "q4_0-lqer"}}) {
            const Preset k = *find_preset(q4k), base = *find_preset(q4);
            QCOMPARE(preset_needs_gram(k), preset_needs_gram(base));
            for (size_t i = 0; i < kTensorRoleCount; ++i) {
                CodecParams want = base.by_role[i];
                if (want.residual == ResidualKind::Q4_0) want.residual = ResidualKind::Q4_K;
                const CodecParams& got = k.by_role[i];
                QCOMPARE(got.method, want.method);
                QCOMPARE(got.rank, want.rank);
                QCOMPARE(got.max_rank_fraction, want.max_rank_fraction);
                QCOMPARE(got.factor_bits, want.factor_bits);
                QCOMPARE(got.residual, want.residual);
                QCOMPARE(got.target, want.target);
                QCOMPARE(got.whiten, want.whiten);
            }
            QCOMPARE(k.params_for(TensorRole::AttnQ, 2).residual, ResidualKind::Q4_K);
            // what it stores, in bits per weight: the blocks', the factors' rule, and the fallback
            for (const char* words : {"Q4_K (256-value blocks, 4.5 bits per weight)",
                                      "(8 k (rows + cols) + 96 k) / "
                                      "(rows cols) bits per weight (0.0626 on a 4096 x 4096 matrix)",
                                      "Q5_0 (32-value blocks, 5.5 bits per weight) instead"})
                QVERIFY2(k.description.find(words) != std::string::npos, k.description.c_str());
        }
    }

    void paperPresetHasTheDocumentsParameters() {
        const Preset paper = *find_preset("paper");
        const CodecParams q = paper.params_for(TensorRole::AttnQ, 2);
        QCOMPARE(q.method, Method::LowRank);
        QCOMPARE(q.energy, 0.999);
        QCOMPARE(q.max_components, 3);
        QCOMPARE(q.factor_bits, 2);
        QVERIFY(q.delta && q.fold && q.sigma_quantized);
        QCOMPARE(q.residual, ResidualKind::None);
        QCOMPARE(paper.params_for(TensorRole::FfnDown, 2).factor_bits, 4);
        QCOMPARE(paper.params_for(TensorRole::TokenEmbd, 2).method, Method::Q8_0);
        QCOMPARE(paper.params_for(TensorRole::AttnNorm, 1).method, Method::F32);
        QCOMPARE(paper.params_for(TensorRole::AttnQ, 1).method, Method::F32);  // 1-D: f32 whatever the role
    }

    void everyPresetRoundTrips_data() {
        QTest::addColumn<QString>("preset");
        for (const std::string& name : preset_names()) QTest::newRow(name.c_str()) << QString::fromStdString(name);
    }
    void everyPresetRoundTrips() {
        QFETCH(QString, preset);
        const Preset p = *find_preset(preset.toStdString());
        struct Case {
            std::string name;
            TensorRole role;
            std::vector<int64_t> shape;
            int32_t heads;
        };
        const std::vector<Case> cases = {
            {"blk.0.attn_q.weight", TensorRole::AttnQ, {64, 64}, 8},
            {"blk.0.attn_k.weight", TensorRole::AttnK, {32, 64}, 4},
            {"blk.0.attn_output.weight", TensorRole::AttnO, {64, 64}, 8},
            {"blk.0.ffn_up.weight", TensorRole::FfnUp, {192, 64}, 0},
            {"blk.0.ffn_down.weight", TensorRole::FfnDown, {64, 192}, 0},
            {"token_embd.weight", TensorRole::TokenEmbd, {128, 64}, 0},
            {"blk.0.attn_norm.weight", TensorRole::AttnNorm, {64}, 0},
        };
        uint64_t seed = 1;
        for (const Case& c : cases) {
            const int64_t rows = c.shape.size() == 2 ? c.shape[0] : 1, cols = c.shape.back();
            // a decaying spectrum plus noise: low rank keeps part of it, so every method has a non-zero error
            std::vector<float> w = c.shape.size() == 2 ? with_spectrum(rows, cols, {8, 4, 2, 1}, seed++)
                                                       : test::random_floats(size_t(cols), seed++);
            const std::vector<float> noise = test::random_floats(w.size(), seed++, 0.05f);
            for (size_t i = 0; i < w.size(); ++i) w[i] += noise[i];
            const CodecParams params = resolve_params(p, c.role, 0, int(c.shape.size()), {}, {});
            TensorReport report;
            TensorInput in = input(c.name, c.role, c.shape, w, c.heads);
            const std::vector<double> gram = gram_of(activations(4 * cols, cols, 100 + seed), 4 * cols, cols);
            if (params.whiten) in.gram = gram.data();  // the whitened presets need the input's Gram matrix
            Result<EncodedTensor> e = encode_tensor(in, params, &report);
            QVERIFY2(e.is_ok(), e.message().c_str());
            Result<std::vector<float>> d = decode_tensor(*e);
            QVERIFY2(d.is_ok(), d.message().c_str());
            QCOMPARE(d->size(), w.size());

            Method expected = params.method;
            if (expected == Method::LowRank && params.residual != ResidualKind::None)
                expected = Method::LowRankResidual;
            // a k-quant on rows no 256-value block divides falls back, as llama-quantize does, and says so
            if (is_block_method(expected) && cols % dtype_block_elements(method_dtype(expected)) != 0) {
                QVERIFY2(report.fallback.find("instead of " + std::string(method_name(expected))) != std::string::npos,
                         report.fallback.c_str());
                QVERIFY(is_block_method(e->method));
                QCOMPARE(cols % dtype_block_elements(method_dtype(e->method)), int64_t(0));
                expected = e->method;
            }
            // so does a residual of such a type (lowrank-q4k): the record stays low-rank + residual
            const bool residual_falls_back = expected == Method::LowRankResidual &&
                                             cols % dtype_block_elements(residual_dtype(params.residual)) != 0;
            if (residual_falls_back) {
                QVERIFY2(report.fallback.find("residual stored " + std::string(dtype_name(report.residual_type)) +
                                              " instead of " + std::string(residual_name(params.residual))) !=
                             std::string::npos,
                         report.fallback.c_str());
                QCOMPARE(cols % dtype_block_elements(report.residual_type), int64_t(0));
            }
            QCOMPARE(e->method, expected);
            QCOMPARE(report.method, expected);
            if (c.shape.size() == 1) QCOMPARE(e->method, Method::F32);
            QCOMPARE(report.name, c.name);
            QCOMPARE(report.role, c.role);
            QCOMPARE(report.layer, 0);
            QCOMPARE(report.shape, c.shape);
            QCOMPARE(report.n_elements(), int64_t(w.size()));
            QCOMPARE(report.dtype, e->dtype);  // the payload's layout, as the record says
            QCOMPARE(report.payload_bytes, uint64_t(e->payload.size()));
            QCOMPARE(report.bits_per_weight, 8.0 * double(e->payload.size()) / double(w.size()));
            QCOMPARE(report.bytes_on_disk_estimate, e->payload.size() + kRecordHeaderBytesEstimate);
            const Measured m = measure(w, *d);
            QVERIFY2(std::fabs(report.rel_error - m.rel) <= 1e-12 * m.rel, c.name.c_str());
            QCOMPARE(report.max_abs_error, m.max_abs);
            if (e->method == Method::F32)
                QCOMPARE(report.rel_error, 0.0);
            else
                QVERIFY2(report.rel_error > 0.0, c.name.c_str());
            QCOMPARE(report.energy_kept.has_value(),
                     e->method == Method::LowRank || e->method == Method::LowRankResidual);
            if (!residual_falls_back && (!is_block_method(params.method) || e->method == params.method))
                QVERIFY(report.fallback.empty());
        }
    }

    // The spectrum as the data sees it: the squares of W L's singular values sum to the output energy ||W X^T||_F^2,
    // and differ from W's own when the inputs' columns have unequal scales.
    void whitenedSpectrumIsTheOutputEnergy() {
        const int64_t rows = 24, cols = 32, tokens = 200;
        const std::vector<float> w = with_spectrum(rows, cols, {8, 4, 2, 1}, 91);
        const std::vector<double> x = activations(tokens, cols, 92);
        const std::vector<double> g = gram_of(x, tokens, cols);
        auto ws = whitened_spectrum(w.data(), rows, cols, g.data(), "w");
        QVERIFY2(ws.is_ok(), ws.message().c_str());
        QCOMPARE(ws->singular_values.size(), size_t(24));
        QCOMPARE(ws->shift, 0.0);
        double sum = 0.0;
        for (double v : ws->singular_values) sum += v * v;
        const std::vector<float> zero(w.size(), 0.0f);
        const double energy = output_error(w, zero, x, rows, cols);
        QVERIFY2(std::fabs(sum - energy) <= 1e-9 * energy, qPrintable(QString::number(sum - energy)));
        std::vector<double> plain;
        QVERIFY(singular_values(w.data(), rows, cols, plain).is_ok());
        QVERIFY(std::fabs(ws->singular_values[0] / plain[0] - 1.0) > 0.01);
        QCOMPARE(ws->metrics.n_values, int64_t(24));
        QVERIFY(whitened_spectrum(w.data(), rows, cols, nullptr, "w").status().code() == StatusCode::InvalidArgument);
    }

    void rank3MatrixReconstructedByPaperAtHighBits() {
        const Preset paper = *find_preset("paper");
        const std::vector<float> w = with_spectrum(64, 64, {10, 5, 2}, 11);
        ParamOverride eight;
        eight.factor_bits = 8;
        TensorReport r8;
        Result<EncodedTensor> e8 = encode_tensor(input("blk.0.attn_q.weight", TensorRole::AttnQ, {64, 64}, w, 8),
                                                 resolve_params(paper, TensorRole::AttnQ, 0, 2, eight, {}), &r8);
        QVERIFY2(e8.is_ok(), e8.message().c_str());
        QCOMPARE(e8->rank, 3);
        QCOMPARE(int(e8->factor_bits), 8);
        QVERIFY(std::fabs(*r8.energy_kept - 1.0) < 1e-12);
        QVERIFY2(r8.rel_error < 0.01, std::to_string(r8.rel_error).c_str());
        QCOMPARE(r8.rel_error, measure(w, *decode_tensor(*e8)).rel);

        // the preset's own 2-bit factors: same rank, a larger error, reported as measured
        TensorReport r2;
        Result<EncodedTensor> e2 = encode_tensor(input("blk.0.attn_q.weight", TensorRole::AttnQ, {64, 64}, w, 8),
                                                 paper.params_for(TensorRole::AttnQ, 2), &r2);
        QVERIFY(e2.is_ok());
        QCOMPARE(e2->rank, 3);
        QCOMPARE(r2.rel_error, measure(w, *decode_tensor(*e2)).rel);
        QVERIFY(r2.rel_error > 5 * r8.rel_error);
    }

    // ---- rank selection ---------------------------------------------------------------------------------------

    void rankSelection() {
        const std::vector<double> s = {4, 3, 2, 1};  // energies 16, 9, 4, 1 of 30
        CodecParams p;
        p.energy = 0.5;
        QCOMPARE(codec::select_rank(s, p, 10, 4), int64_t(1));  // 16/30 >= 0.5
        p.energy = 0.9;
        QCOMPARE(codec::select_rank(s, p, 10, 4), int64_t(3));  // 25/30 < 0.9 <= 29/30
        p.energy = 29.0 / 30.0;
        QCOMPARE(codec::select_rank(s, p, 10, 4), int64_t(3));  // reached exactly
        p.energy = 1.0;
        QCOMPARE(codec::select_rank(s, p, 10, 4), int64_t(4));
        p.max_components = 2;
        QCOMPARE(codec::select_rank(s, p, 10, 4), int64_t(2));
        p.max_components = 0;
        p.max_rel_error = 0.2;  // tail allowed 0.04 * 30 = 1.2: tail after 3 is 1, after 2 is 5
        QCOMPARE(codec::select_rank(s, p, 10, 4), int64_t(3));
        p.max_rel_error = std::sqrt(5.0 / 30.0);
        QCOMPARE(codec::select_rank(s, p, 10, 4), int64_t(2));
        p.rank = 7;  // fixed rank wins, capped by min(rows, cols)
        QCOMPARE(codec::select_rank(s, p, 10, 4), int64_t(4));
        p.rank = 16;
        p.max_rank_fraction = 1.0 / 32.0;
        QCOMPARE(codec::select_rank(std::vector<double>(64, 1.0), p, 64, 100), int64_t(2));
        QCOMPARE(codec::select_rank(std::vector<double>(16, 1.0), p, 16, 100), int64_t(1));  // at least 1
        QCOMPARE(codec::select_rank(std::vector<double>(4096, 1.0), p, 4096, 4096), int64_t(16));
        QCOMPARE(codec::select_rank(std::vector<double>(4, 0.0), CodecParams{}, 4, 4), int64_t(0));  // zero matrix

        // through the encoder, on a matrix with that spectrum
        const std::vector<float> w = with_spectrum(40, 32, s, 5);
        CodecParams e;
        e.method = Method::LowRank;
        e.energy = 0.9;
        TensorReport r;
        QVERIFY(encode_tensor(input("m", TensorRole::AttnQ, {40, 32}, w), e, &r).is_ok());
        QCOMPARE(r.rank, 3);
        QVERIFY(std::fabs(*r.energy_kept - 29.0 / 30.0) < 1e-6);
    }

    // ---- factor quantization ----------------------------------------------------------------------------------

    void fullRank8BitRoundTripWithinBound() {
        const int64_t rows = 48, cols = 64, k = 48;
        const std::vector<float> w = test::random_floats(size_t(rows * cols), 21);
        TensorReport report;
        Result<EncodedTensor> e =
            encode_tensor(input("full", TensorRole::AttnQ, {rows, cols}, w), low_rank(k, 8), &report);
        QVERIFY2(e.is_ok(), e.message().c_str());
        QCOMPARE(e->rank, int32_t(k));
        QCOMPARE(e->flags, 0u);
        // layout (docs/codec.md): f32 sigma[k], f32 u_scale[k], f32 v_scale[k], then 8-bit codes
        QCOMPARE(e->payload.size(), size_t(4 * k * 3 + k * (rows + cols)));
        // W - W' = sum_r (s_r - s'_r) u v + s'_r (u' dv + du v' + du dv) with |du| <= d_u = m_u / 255 (half a
        // step), |u'| <= m_u, |s_r - s'_r| <= s'_r 2^-24; plus f32 rounding of the k-term sum (<= k 2^-20 of it)
        double bound = 0.0, magnitude = 0.0;
        for (int64_t r = 0; r < k; ++r) {
            const double s = read_f32(e->payload, size_t(4 * r));
            const double mu = read_f32(e->payload, size_t(4 * (k + r)));
            const double mv = read_f32(e->payload, size_t(4 * (2 * k + r)));
            const double du = mu / 255.0, dv = mv / 255.0;
            bound += s * (mu * dv + du * mv + du * dv) + s * std::ldexp(1.0, -24);
            magnitude += s * mu * mv;
        }
        bound += double(k) * std::ldexp(1.0, -20) * magnitude;
        const Measured m = measure(w, *decode_tensor(*e));
        QVERIFY2(m.max_abs <= bound, (std::to_string(m.max_abs) + " > " + std::to_string(bound)).c_str());
        QVERIFY(m.max_abs > bound / 100);  // the bound is not vacuous
        QCOMPARE(report.max_abs_error, m.max_abs);
        QVERIFY(std::fabs(*report.energy_kept - 1.0) < 1e-12);
    }

    void quantizerUsesEveryLevel() {
        // 2 bits over [-1, 1]: levels -1, -1/3, 1/3, 1
        const double x[] = {-1.0, -0.5, -0.2, 0.0, 0.2, 0.6, 1.0};
        uint8_t codes[7];
        const float m = codec::quantize_vector(x, 7, 1, 2, codes);
        QCOMPARE(m, 1.0f);
        const uint8_t expected[] = {0, 1, 1, 2, 2, 2, 3};  // 0.0 is a tie between -1/3 and 1/3: rounds up
        for (int i = 0; i < 7; ++i) QCOMPARE(int(codes[i]), int(expected[i]));
        const float step = codec::code_step(m, 2);
        QCOMPARE(codec::dequantize_code(0, 2, step), -1.0f);
        QCOMPARE(codec::dequantize_code(1, 2, step), -step);
        QCOMPARE(codec::dequantize_code(3, 2, step), 1.0f);
        const double zeros[] = {0.0, 0.0};
        QCOMPARE(codec::quantize_vector(zeros, 2, 1, 4, codes), 0.0f);
        QCOMPARE(codec::dequantize_code(codes[0], 4, codec::code_step(0.0f, 4)), -0.0f);
    }

    void deltaRoundTrip_data() {
        QTest::addColumn<int>("bits");
        QTest::newRow("2") << 2;
        QTest::newRow("4") << 4;
        QTest::newRow("8") << 8;
    }
    void deltaRoundTrip() {
        QFETCH(int, bits);
        const int levels = 1 << bits;
        std::vector<uint8_t> codes;
        for (int i = 0; i < 300; ++i) codes.push_back(uint8_t((i * 7 + i * i) % levels));
        codes.push_back(uint8_t(levels - 1));
        codes.push_back(0);  // wraps: (0 - (L-1)) mod L = 1
        std::vector<uint8_t> d = codes;
        codec::delta_encode(d.data(), int64_t(d.size()), bits);
        QCOMPARE(int(d[0]), int(codes[0]));
        QCOMPARE(int(d.back()), 1);
        for (uint8_t x : d) QVERIFY(x < levels);
        codec::delta_decode(d.data(), int64_t(d.size()), bits);
        QCOMPARE(d, codes);

        // delta coding is lossless: the same tensor decodes bit for bit the same with and without it
        const std::vector<float> w = with_spectrum(64, 96, {3, 2, 1}, 9);
        CodecParams p = low_rank(3, bits);
        const EncodedTensor plain = *encode_tensor(input("m", TensorRole::AttnQ, {64, 96}, w), p);
        p.delta = true;
        const EncodedTensor delta = *encode_tensor(input("m", TensorRole::AttnQ, {64, 96}, w), p);
        QCOMPARE(delta.flags, uint32_t(kFlagDelta));
        QCOMPARE(delta.payload.size(), plain.payload.size());
        QVERIFY(delta.payload != plain.payload);
        QCOMPARE(*decode_tensor(delta), *decode_tensor(plain));
    }

    void packingIsLsbFirst() {
        const uint8_t codes[] = {1, 2, 3, 0, 3};
        std::vector<uint8_t> out;
        codec::pack_codes(codes, 5, 2, out);
        QCOMPARE(out, (std::vector<uint8_t>{0x39, 0x03}));  // 01 | 10 << 2 | 11 << 4 | 00 << 6, then 11
        uint8_t back[5];
        QVERIFY(codec::unpack_codes(out.data(), 5, 2, back));
        QCOMPARE(std::memcmp(back, codes, 5), 0);
        out[1] |= 0x10;  // a padding bit
        QVERIFY(!codec::unpack_codes(out.data(), 5, 2, back));
    }

    // ---- run-length encoding ----------------------------------------------------------------------------------

    void rleRoundTrip_data() {
        QTest::addColumn<int>("bits");
        QTest::addColumn<QByteArray>("symbols");
        QTest::addColumn<int>("encoded_bytes");
        for (int bits : {2, 4, 8}) {
            const int max_run = codec::rle_max_run(bits);
            const int pair = bits == 8 ? 2 : 1;
            const QByteArray tag = QByteArray::number(bits) + "-bit ";
            QTest::newRow(tag + "empty") << bits << QByteArray() << 0;
            QTest::newRow(tag + "one") << bits << QByteArray(1, 1) << pair;
            QTest::newRow(tag + "all equal") << bits << QByteArray(1000, 2) << pair * ((1000 + max_run - 1) / max_run);
            QByteArray alternating;
            for (int i = 0; i < 101; ++i) alternating.append(char(i % 2 ? 3 : 0));
            QTest::newRow(tag + "alternating") << bits << alternating << pair * 101;
            QTest::newRow(tag + "max run") << bits << QByteArray(max_run, 3) << pair;
            QTest::newRow(tag + "max run + 1") << bits << QByteArray(max_run + 1, 3) << 2 * pair;
        }
    }
    void rleRoundTrip() {
        QFETCH(int, bits);
        QFETCH(QByteArray, symbols);
        QFETCH(int, encoded_bytes);
        const auto* in = reinterpret_cast<const uint8_t*>(symbols.constData());
        const std::vector<uint8_t> enc = codec::rle_encode(in, uint64_t(symbols.size()), bits);
        QCOMPARE(int(enc.size()), encoded_bytes);
        std::vector<uint8_t> out(size_t(symbols.size()) + 1, 0xAA);
        std::string why;
        QVERIFY2(codec::rle_decode(enc.data(), enc.size(), bits, uint64_t(symbols.size()), out.data(), why),
                 why.c_str());
        QCOMPARE(std::memcmp(out.data(), in, size_t(symbols.size())), 0);
        QCOMPARE(out.back(), uint8_t(0xAA));  // nothing written past the end
    }

    void rleMaxRunPairLayout() {
        const std::vector<uint8_t> run(64, 2);
        QCOMPARE(codec::rle_encode(run.data(), 64, 2), (std::vector<uint8_t>{0xFE}));  // 2 | 63 << 2
        const std::vector<uint8_t> run4(17, 9);
        QCOMPARE(codec::rle_encode(run4.data(), 17, 4), (std::vector<uint8_t>{0xF9, 0x09}));  // 16 + 1
        const std::vector<uint8_t> run8(256, 200);
        QCOMPARE(codec::rle_encode(run8.data(), 256, 8), (std::vector<uint8_t>{200, 255}));
    }

    void rleRejectsBadStreams() {
        std::vector<uint8_t> out(8);
        std::string why;
        const uint8_t too_long[] = {0x0D};  // 4 bits: value 13, run 1; then nothing: 1 of 2
        QVERIFY(!codec::rle_decode(too_long, 1, 4, 2, out.data(), why));
        QCOMPARE(why, std::string("run-length stream holds 1 coefficient codes, expected 2"));
        const uint8_t overrun[] = {0x3D};  // run 4 > 2
        QVERIFY(!codec::rle_decode(overrun, 1, 4, 2, out.data(), why));
        QCOMPARE(why, std::string("run-length pair at byte 0 runs past the 2 coefficient codes"));
        const uint8_t odd[] = {1, 0, 1};
        QVERIFY(!codec::rle_decode(odd, 3, 8, 2, out.data(), why));
        QCOMPARE(why, std::string("run-length stream of 3 bytes is not a whole number of 2-byte pairs"));
    }

    // ---- llama.cpp blocks -------------------------------------------------------------------------------------

    void q8_0BlockEqualsHandComputedBytes() {
        std::vector<float> w = {127, -127, 0, 1, -1, 2.5f, -2.5f, 50.4f, 50.6f, 100, -100};
        for (int j = 11; j < 32; ++j) w.push_back(float((j - 21) * 5));
        CodecParams p;
        p.method = Method::Q8_0;
        TensorReport r;
        Result<EncodedTensor> e = encode_tensor(input("blk.0.attn_q.weight", TensorRole::AttnQ, {1, 32}, w), p, &r);
        QVERIFY(e.is_ok());
        // d = amax / 127 = 1.0 (f16 0x3C00), codes round(x / d) half away from zero
        const std::vector<uint8_t> expected = {0x00, 0x3C, 0x7F, 0x81, 0x00, 0x01, 0xFF, 0x03, 0xFD, 0x32, 0x33, 0x64,
                                               0x9C, 0xCE, 0xD3, 0xD8, 0xDD, 0xE2, 0xE7, 0xEC, 0xF1, 0xF6, 0xFB, 0x00,
                                               0x05, 0x0A, 0x0F, 0x14, 0x19, 0x1E, 0x23, 0x28, 0x2D, 0x32};
        QCOMPARE(e->payload, expected);
        QCOMPARE(r.bits_per_weight, 8.5);
        const std::vector<float> d = *decode_tensor(*e);
        QCOMPARE(d[5], 3.0f);
        QCOMPARE(d[7], 50.0f);
        QCOMPARE(r.max_abs_error, 0.5);
    }

    void q4_0BlockEqualsHandComputedBytes() {
        const std::vector<float> w = {-16, 14,  15,  0,   1,   -1,  2,  -2, 3,  -3, 5,  -5, 10, -10, 7,  -7,
                                      -15, -14, -13, -12, -11, -10, -9, -8, -7, -6, -5, -4, -3, -2,  -1, 0};
        CodecParams p;
        p.method = Method::Q4_0;
        Result<EncodedTensor> e = encode_tensor(input("t", TensorRole::FfnUp, {1, 32}, w), p);
        QVERIFY(e.is_ok());
        // max (signed, largest magnitude) = -16 -> d = -16 / -8 = 2.0 (f16 0x4000); q = min(15, trunc(x / d + 8.5));
        // byte j = q_j | q_{j+16} << 4
        const std::vector<uint8_t> expected = {0x00, 0x40, 0x10, 0x1F, 0x2F, 0x28, 0x39, 0x38, 0x49,
                                               0x47, 0x5A, 0x57, 0x6B, 0x66, 0x7D, 0x73, 0x8C, 0x85};
        QCOMPARE(e->payload, expected);
        const std::vector<float> d = *decode_tensor(*e);
        QCOMPARE(d[0], -16.0f);
        QCOMPARE(d[2], 14.0f);  // 15 clips to code 15 = +7 steps
        QCOMPARE(d[17], -14.0f);
    }

    void rowLengthNotMultipleOf32FallsBackToF16() {
        const std::vector<float> w = test::random_floats(4 * 48, 3);
        for (const char* name : {"q4_0", "q8_0", "lowrank-q4"}) {
            const Preset p = *find_preset(name);
            TensorReport r;
            Result<EncodedTensor> e =
                encode_tensor(input("odd", TensorRole::FfnUp, {4, 48}, w), p.params_for(TensorRole::FfnUp, 2), &r);
            QVERIFY(e.is_ok());
            QCOMPARE(e->method, Method::F16);
            QCOMPARE(r.fallback, "row length 48 is not a multiple of 32: stored f16 instead of " +
                                     std::string(method_name(p.params_for(TensorRole::FfnUp, 2).method)));
            QCOMPARE(r.payload_bytes, uint64_t(4 * 48 * 2));
        }
    }

    // f16 holds |x| <= 65504: a larger value would be stored as infinity. The f16 fallback becomes f32 (exact);
    // a method that stores such a value in f16 (f16 itself, the scale of a q8_0 / q4_0 block) is refused.
    void valuesBeyondF16AreNeverStoredAsInfinity() {
        std::vector<float> w = test::random_floats(4 * 48, 5);
        w[7] = 1.0e5f;
        const Preset q4 = *find_preset("q4_0");
        TensorReport r;
        Result<EncodedTensor> e =
            encode_tensor(input("big", TensorRole::FfnDown, {4, 48}, w), q4.params_for(TensorRole::FfnDown, 2), &r);
        QVERIFY2(e.is_ok(), e.message().c_str());
        QCOMPARE(e->method, Method::F32);
        QCOMPARE(r.fallback, std::string("row length 48 is not a multiple of 32 and value 100000 at element 7 is "
                                         "beyond what f16 stores (|x| <= 65504): stored f32 instead of q4_0"));
        QVERIFY(*decode_tensor(*e) == w);

        CodecParams f16;
        f16.method = Method::F16;
        auto refused = encode_tensor(input("big", TensorRole::FfnDown, {4, 48}, w), f16, nullptr);
        QVERIFY(!refused);
        QCOMPARE(refused.message(), std::string("tensor 'big': value 100000 at element 7 is beyond what f16 stores "
                                                "(|x| <= 65504); choose f32 for it"));
        std::vector<float> huge = test::random_floats(2 * 32, 6);
        huge[40] = -1.0e7f;  // a q8_0 block scale of 1e7 / 127 > 65504
        CodecParams q8;
        q8.method = Method::Q8_0;
        auto scale = encode_tensor(input("huge", TensorRole::AttnQ, {2, 32}, huge), q8, nullptr);
        QVERIFY(!scale);
        QVERIFY2(scale.message().starts_with("tensor 'huge': value -1e+07 at element 40 is beyond what q8_0 stores"),
                 scale.message().c_str());
        huge[40] = 1.0e6f;  // scale 7874: fits
        QVERIFY(encode_tensor(input("huge", TensorRole::AttnQ, {2, 32}, huge), q8, nullptr).is_ok());
    }

    // ---- residual -----------------------------------------------------------------------------------------------

    void residualCorrectsBothWays() {
        const std::vector<float> w = test::random_floats(64 * 64, 31);
        CodecParams q4;
        q4.method = Method::Q4_0;
        TensorReport rq;
        QVERIFY(encode_tensor(input("m", TensorRole::AttnQ, {64, 64}, w), q4, &rq).is_ok());

        for (LowRankTarget target : {LowRankTarget::Weights, LowRankTarget::QuantError}) {
            CodecParams p = low_rank(4, 8);
            p.residual = ResidualKind::Q4_0;
            p.target = target;
            TensorReport r;
            Result<EncodedTensor> e = encode_tensor(input("m", TensorRole::AttnQ, {64, 64}, w), p, &r);
            QVERIFY2(e.is_ok(), e.message().c_str());
            QCOMPARE(e->method, Method::LowRankResidual);
            QCOMPARE(int(e->residual_code), 4);
            // sigma f32 + two scale sets + 8-bit codes, then the Q4_0 blocks
            QCOMPARE(e->payload.size(), size_t(4 * 4 * 3 + 4 * 128 + 64 * 64 / 32 * 18));
            QCOMPARE(r.rel_error, measure(w, *decode_tensor(*e)).rel);
            if (target == LowRankTarget::QuantError) QVERIFY(r.rel_error < rq.rel_error);  // the correction helps
        }
        CodecParams bad = low_rank(4, 8);
        bad.target = LowRankTarget::QuantError;
        Result<EncodedTensor> e = encode_tensor(input("m", TensorRole::AttnQ, {64, 64}, w), bad);
        QCOMPARE(e.status().code(), StatusCode::InvalidArgument);
        QCOMPARE(e.message(), std::string("tensor 'm': codec parameter target: the quantization-error target needs a "
                                          "residual (q4_0, q8_0, q4_k ...)"));
    }

    // A knot of Q4_0 / Q8_0 residual records written before other residual types existed: the same inputs encode to
    // the same records, and each record decodes to the values it decoded to then. GKQ_WRITE_FIXTURES=DIR writes the
    // knot into DIR and prints the digests instead (how the fixture was made).
    void oldResidualRecordsReadAndEncodeAsBefore() {
        std::vector<EncodedTensor> now;
        std::vector<float> importance;
        for (const OldResidualRecord& r : kOldResidualRecords) {
            Result<EncodedTensor> e = encode_old_residual_record(r, importance);
            QVERIFY2(e.is_ok(), e.message().c_str());
            now.push_back(std::move(*e));
        }
        const std::string fixture = std::string(GKQ_TEST_DATA_DIR) + "/knot/residual-q4_0-q8_0.knot";
        if (const char* dir = std::getenv("GKQ_WRITE_FIXTURES")) {
            KnotHeader h;
            h.producer = "gkq 0.1.0";
            h.command = "test_codec oldResidualRecordsReadAndEncodeAsBefore";
            h.config.dim = 64;
            h.config.hidden_dim = 96;
            h.config.n_layers = 1;
            h.config.n_heads = 4;
            h.config.n_kv_heads = 4;
            h.config.vocab_size = 1;
            h.config.context_length = 16;
            h.n_source_tensors = now.size();
            const std::string out = std::string(dir) + "/residual-q4_0-q8_0.knot";
            auto w = KnotWriter::create(out, h);
            QVERIFY2(w.is_ok(), w.message().c_str());
            for (size_t i = 0; i < now.size(); ++i) QVERIFY(w->add(now[i], i).is_ok());
            QVERIFY(w->finish().is_ok());
            for (const EncodedTensor& t : now)
                qInfo("%s 0x%016llx", t.name.c_str(), (unsigned long long)fnv1a(*decode_tensor(t)));
            QSKIP("fixture written");
        }
        auto knot = KnotFile::open(fixture);
        QVERIFY2(knot.is_ok(), knot.message().c_str());
        QCOMPARE(knot->n_records(), std::size(kOldResidualRecords));
        for (size_t i = 0; i < now.size(); ++i) {
            Result<EncodedTensor> old = knot->read(i);
            QVERIFY2(old.is_ok(), old.message().c_str());
            QCOMPARE(old->name, now[i].name);
            QCOMPARE(old->method, Method::LowRankResidual);
            QCOMPARE(old->residual_code, now[i].residual_code);
            QCOMPARE(old->flags, now[i].flags);
            QVERIFY2(old->payload == now[i].payload, old->name.c_str());
            Result<std::vector<float>> d = decode_tensor(*old);
            QVERIFY2(d.is_ok(), d.message().c_str());
            QCOMPARE(fnv1a(*d), kOldResidualDecoded[i]);
        }
    }

    // ---- residual types -----------------------------------------------------------------------------------------

    // Every block method's type can be a residual, under one code each: Q4_0 4 and Q8_0 8 (what those codes meant
    // before other types could be), every other its ggml id; no other code names a type.
    void residualCodesAreTheBlockTypes() {
        std::vector<int> codes;
        for (Method m : all_methods()) {
            const DType t = method_dtype(m);
            const uint8_t code = residual_code_of(t);
            QCOMPARE(code != 0, is_block_method(m));
            if (!is_block_method(m)) continue;
            QVERIFY2(std::find(codes.begin(), codes.end(), code) == codes.end(), std::to_string(code).c_str());
            codes.push_back(code);
            QCOMPARE(residual_code_type(code), std::optional<DType>(t));
            QCOMPARE(int(code), t == DType::Q4_0 ? 4 : int(type_traits(t).ggml_id));
            const std::optional<ResidualKind> kind = residual_kind_for(t);
            QVERIFY2(kind.has_value(), std::string(method_name(m)).c_str());
            QCOMPARE(residual_dtype(*kind), t);
            QCOMPARE(residual_name(*kind), type_traits(t).name);
            QCOMPARE(*parse_residual(type_traits(t).name), *kind);
        }
        QCOMPARE(residual_code_of(DType::Q4_0), uint8_t{4});
        QCOMPARE(residual_code_of(DType::Q8_0), uint8_t{8});
        QCOMPARE(all_residual_kinds().size(), codes.size() + 1);  // and None
        QCOMPARE(all_residual_kinds()[0], ResidualKind::None);
        for (int c = 0; c < 256; ++c)
            QCOMPARE(residual_code_type(uint8_t(c)).has_value(),
                     std::find(codes.begin(), codes.end(), c) != codes.end());
    }

    // A residual in each type, with and without importance: the payload is the low-rank section, then exactly the
    // blocks the type table's quantizer makes of W - (decoded low-rank part) (LQER-style: of W itself), and the
    // decoded tensor is the low-rank part plus those blocks' dequantized values, element by element.
    void everyResidualTypeRoundTrips_data() {
        QTest::addColumn<int>("kind");
        QTest::addColumn<bool>("weighted");
        for (ResidualKind r : all_residual_kinds())
            if (r != ResidualKind::None)
                for (bool weighted : {false, true})
                    QTest::newRow((std::string(residual_name(r)) + (weighted ? " weighted" : "")).c_str())
                        << int(r) << weighted;
    }
    void everyResidualTypeRoundTrips() {
        QFETCH(int, kind);
        QFETCH(bool, weighted);
        const auto r = static_cast<ResidualKind>(kind);
        const DType t = residual_dtype(r);
        const TypeTraits& tr = type_traits(t);
        const int64_t rows = 8, cols = 512, n = rows * cols;
        const std::vector<float> w = test::random_floats(static_cast<size_t>(n), 60 + uint64_t(kind));
        std::vector<float> importance;
        for (float x : test::random_floats(static_cast<size_t>(cols), 61)) importance.push_back(0.25f + x * x);
        for (LowRankTarget target : {LowRankTarget::Weights, LowRankTarget::QuantError}) {
            CodecParams p = low_rank(3, 8);
            p.residual = r;
            p.target = target;
            TensorInput in = input("m", TensorRole::FfnUp, {rows, cols}, w);
            in.importance = weighted ? importance.data() : nullptr;
            TensorReport report;
            Result<EncodedTensor> e = encode_tensor(in, p, &report);
            QVERIFY2(e.is_ok(), e.message().c_str());
            QCOMPARE(e->method, Method::LowRankResidual);
            QCOMPARE(e->residual_code, residual_code_of(t));
            QCOMPARE(report.residual_type, t);
            QCOMPARE(report.fallback, std::string());
            Result<LowRankFactors> f = decode_lowrank_factors(*e, false);
            QVERIFY2(f.is_ok(), f.message().c_str());
            QCOMPARE(f->residual_type, t);
            const uint64_t n_bytes = *dtype_storage_bytes(t, uint64_t(n));
            QCOMPARE(uint64_t(e->payload.size()), f->residual_offset + n_bytes);

            // the low-rank part alone: the record without its blocks
            EncodedTensor lr = *e;
            lr.method = Method::LowRank;
            lr.residual_code = 0;
            lr.payload.resize(static_cast<size_t>(f->residual_offset));
            Result<std::vector<float>> low = decode_tensor(lr);
            QVERIFY2(low.is_ok(), low.message().c_str());
            std::vector<float> x = w;
            if (target == LowRankTarget::Weights)
                for (int64_t i = 0; i < n; ++i) x[i] = w[i] - (*low)[i];
            std::vector<uint8_t> blocks(static_cast<size_t>(n_bytes));
            if (tr.quantize_weighted != nullptr)
                tr.quantize_weighted(x.data(), blocks.data(), rows, cols, in.importance);
            else
                tr.from_f32(x.data(), blocks.data(), n);  // Q8_0: no weighted quantizer, in ggml either
            QVERIFY(std::equal(blocks.begin(), blocks.end(), e->payload.begin() + long(f->residual_offset)));

            std::vector<float> deq(static_cast<size_t>(n));
            tr.to_f32(blocks.data(), deq.data(), n);
            Result<std::vector<float>> d = decode_tensor(*e);
            QVERIFY2(d.is_ok(), d.message().c_str());
            for (int64_t i = 0; i < n; ++i) {
                const float want = (*low)[i] + deq[i];
                QVERIFY2(std::memcmp(&(*d)[i], &want, 4) == 0, std::to_string(i).c_str());
            }
            QCOMPARE(report.rel_error, measure(w, *d).rel);
        }
    }

    // Rows a residual's blocks do not divide fall back as the block methods do (llama_fallback_type: a k-quant to a
    // 32-value type), and the report says so; with no block type left the whole tensor is f16, as before.
    void residualFallsBackAsTheBlockMethods_data() {
        QTest::addColumn<int>("kind");
        QTest::addColumn<int>("cols");
        QTest::addColumn<QString>("fallback");
        QTest::newRow("q2_k") << int(ResidualKind::Q2_K) << 96
                              << "row length 96 is not a multiple of 256: residual stored q4_0 instead of q2_k";
        QTest::newRow("q3_k") << int(ResidualKind::Q3_K) << 96
                              << "row length 96 is not a multiple of 256: residual stored q4_0 instead of q3_k";
        QTest::newRow("q4_k") << int(ResidualKind::Q4_K) << 96
                              << "row length 96 is not a multiple of 256: residual stored q5_0 instead of q4_k";
        QTest::newRow("q5_k") << int(ResidualKind::Q5_K) << 96
                              << "row length 96 is not a multiple of 256: residual stored q5_1 instead of q5_k";
        QTest::newRow("q6_k") << int(ResidualKind::Q6_K) << 96
                              << "row length 96 is not a multiple of 256: residual stored q8_0 instead of q6_k";
        QTest::newRow("q4_k, rows of 48") << int(ResidualKind::Q4_K) << 48
                                          << "row length 48 is not a multiple of 256: stored f16 instead of "
                                             "lowrank+residual";
        QTest::newRow("iq4_nl, rows of 48") << int(ResidualKind::IQ4_NL) << 48
                                            << "row length 48 is not a multiple of 32: stored f16 instead of "
                                               "lowrank+residual";
    }
    void residualFallsBackAsTheBlockMethods() {
        QFETCH(int, kind);
        QFETCH(int, cols);
        QFETCH(QString, fallback);
        const auto r = static_cast<ResidualKind>(kind);
        const std::vector<float> w = test::random_floats(size_t(4 * cols), 62);
        CodecParams p = low_rank(2, 8);
        p.residual = r;
        TensorReport report;
        Result<EncodedTensor> e = encode_tensor(input("odd", TensorRole::FfnUp, {4, cols}, w), p, &report);
        QVERIFY2(e.is_ok(), e.message().c_str());
        QCOMPARE(QString::fromStdString(report.fallback), fallback);
        // the block method of the same type falls back to the same type (or f16)
        CodecParams block;
        block.method = *block_method_for(residual_dtype(r));
        Result<EncodedTensor> b = encode_tensor(input("odd", TensorRole::FfnUp, {4, cols}, w), block);
        QVERIFY2(b.is_ok(), b.message().c_str());
        if (b->method == Method::F16) {
            QCOMPARE(e->method, Method::F16);
        } else {
            QCOMPARE(e->method, Method::LowRankResidual);
            QCOMPARE(*residual_code_type(e->residual_code), method_dtype(b->method));
            QCOMPARE(report.residual_type, method_dtype(b->method));
            QCOMPARE(report.rel_error, measure(w, *decode_tensor(*e)).rel);
        }
    }

    // A residual code no type has (a newer writer's, or damage) is refused by name before anything is decoded; a
    // residual code on another method is a header field that must be 0.
    void unknownResidualCodeIsRefusedByName() {
        CodecParams p = low_rank(2, 8);
        p.residual = ResidualKind::Q4_0;
        const std::vector<float> w = test::random_floats(8 * 64, 63);
        const EncodedTensor good = *encode_tensor(input("m", TensorRole::AttnQ, {8, 64}, w), p);
        const std::string known =
            " (8 q8_0, 4 q4_0, 3 q4_1, 6 q5_0, 7 q5_1, 20 iq4_nl, 10 q2_k, 11 q3_k, 12 q4_k, 13 q5_k, 14 q6_k)";
        for (int code : {0, 1, 2, 5, 9, 15, 21, 99, 255}) {
            EncodedTensor t = good;
            t.residual_code = uint8_t(code);
            const std::string want =
                "tensor 'm' (lowrank+residual): unknown residual code " + std::to_string(code) + known;
            Result<std::vector<float>> d = decode_tensor(t);
            QCOMPARE(d.status().code(), StatusCode::Corrupt);
            QCOMPARE(d.message(), want);
            QCOMPARE(decode_lowrank_factors(t).message(), want);
        }
        EncodedTensor lr = good;
        lr.method = Method::LowRank;
        lr.residual_code = residual_code_of(DType::Q4_K);
        QCOMPARE(decode_tensor(lr).message(),
                 std::string("tensor 'm' (lowrank): header field residual_code is 12, expected 0 for this method"));
    }

    // ---- folding ----------------------------------------------------------------------------------------------

    void headFoldingOfScaledCopies_data() {
        QTest::addColumn<bool>("output_projection");
        QTest::newRow("attn_q: heads along rows (U)") << false;
        QTest::newRow("attn_output: heads along columns (V)") << true;
    }
    void headFoldingOfScaledCopies() {
        QFETCH(bool, output_projection);
        const std::vector<float> w = scaled_heads(output_projection);
        const TensorRole role = output_projection ? TensorRole::AttnO : TensorRole::AttnQ;
        CodecParams p = low_rank(8, 8);
        p.fold = true;
        p.fold_tolerance = 1e-6;
        TensorReport folded, plain;
        Result<EncodedTensor> e = encode_tensor(input("heads", role, {64, 64}, w, 8), p, &folded);
        QVERIFY2(e.is_ok(), e.message().c_str());
        p.fold = false;
        Result<EncodedTensor> e0 = encode_tensor(input("heads", role, {64, 64}, w, 8), p, &plain);
        QVERIFY(e0.is_ok());

        QVERIFY(folded.fold_applied);
        QCOMPARE(e->flags, uint32_t(kFlagFoldedHeads));
        QCOMPARE(int(e->payload[4 * 8]), output_projection ? 1 : 0);  // fold axis byte after the 8 f32 sigmas
        QVERIFY2(*folded.fold_fit_error < 1e-6, std::to_string(*folded.fold_fit_error).c_str());  // f32 input rounding
        QCOMPARE(folded.fold_note.substr(0, 34), std::string("applied: 8 heads share one basis, "));
        // measured: the unfolded payload minus the folded one; 7 of 8 heads' codes go, 8 + 8 * 4 bytes come
        QCOMPARE(folded.fold_bytes_saved, int64_t(e0->payload.size()) - int64_t(e->payload.size()));
        QCOMPARE(folded.fold_bytes_saved, int64_t(7 * 8 * 8 - 8 - 8 * 4));
        QVERIFY(!plain.fold_applied);
        QVERIFY(plain.fold_note.empty());
        // exact up to quantization: the folded error is of the order of the unfolded one
        QVERIFY2(folded.rel_error < 0.02, std::to_string(folded.rel_error).c_str());
        QVERIFY(folded.rel_error < 3 * plain.rel_error);
        QCOMPARE(folded.rel_error, measure(w, *decode_tensor(*e)).rel);
    }

    void headFoldingFallsBackOnRandomHeads() {
        const std::vector<float> w = with_spectrum(64, 64, {5, 4, 3}, 41);
        CodecParams p = low_rank(3, 2);
        p.fold = true;
        TensorReport r;
        Result<EncodedTensor> e = encode_tensor(input("rand", TensorRole::AttnQ, {64, 64}, w, 8), p, &r);
        QVERIFY(e.is_ok());
        QVERIFY(!r.fold_applied);
        QCOMPARE(r.fold_bytes_saved, int64_t(0));
        QCOMPARE(e->flags & kFlagFoldedHeads, 0u);
        QVERIFY(*r.fold_fit_error > 0.01);
        QVERIFY2(r.fold_note.find("not applied: head fit error ") == 0 &&
                     r.fold_note.find(" exceeds tolerance 0.01") != std::string::npos,
                 r.fold_note.c_str());

        TensorReport unknown;
        QVERIFY(encode_tensor(input("rand", TensorRole::AttnQ, {64, 64}, w, 0), p, &unknown).is_ok());
        QCOMPARE(unknown.fold_note, std::string("not applied: head folding needs two or more heads (n_heads 0)"));
        TensorReport uneven;
        QVERIFY(encode_tensor(input("rand", TensorRole::AttnQ, {64, 64}, w, 6), p, &uneven).is_ok());
        QCOMPARE(uneven.fold_note, std::string("not applied: 64 rows do not split into 6 heads"));
    }

    void ffnRunLengthFolding() {
        const std::vector<float> w = piecewise_ffn();
        CodecParams p = low_rank(1, 4);
        p.delta = true;
        p.fold = true;
        TensorReport folded, plain;
        Result<EncodedTensor> e = encode_tensor(input("ffn", TensorRole::FfnUp, {192, 64}, w), p, &folded);
        QVERIFY2(e.is_ok(), e.message().c_str());
        p.fold = false;
        Result<EncodedTensor> e0 = encode_tensor(input("ffn", TensorRole::FfnUp, {192, 64}, w), p, &plain);
        QVERIFY(folded.fold_applied);
        QCOMPARE(e->flags, uint32_t(kFlagDelta | kFlagRleCoefficients));
        QCOMPARE(folded.fold_note, std::string("applied: run-length-encoded coefficient codes"));
        QCOMPARE(folded.fold_bytes_saved, int64_t(e0->payload.size()) - int64_t(e->payload.size()));
        QVERIFY(folded.fold_bytes_saved > 0);
        QCOMPARE(*decode_tensor(*e), *decode_tensor(*e0));  // run-length encoding is lossless
        QVERIFY(folded.rel_error < 1e-6);                   // two levels per vector: exact at 4 bits

        const std::vector<float> r = with_spectrum(192, 64, {3, 2, 1}, 51);
        p = low_rank(3, 4);
        p.fold = true;
        TensorReport rr;
        Result<EncodedTensor> er = encode_tensor(input("ffn", TensorRole::FfnDown, {192, 64}, r), p, &rr);
        QVERIFY(er.is_ok());
        QVERIFY(!rr.fold_applied);
        QCOMPARE(er->flags & kFlagRleCoefficients, 0u);
        QVERIFY2(rr.fold_note.find("not applied: run-length encoding takes ") == 0, rr.fold_note.c_str());
    }

    // ---- payload checks ---------------------------------------------------------------------------------------

    void truncatedPayloadIsCorrupt_data() {
        QTest::addColumn<QString>("kind");
        for (const char* k : {"f32", "f16", "q8_0", "q4_0", "lowrank", "lowrank quantized sigma", "lowrank folded",
                              "lowrank rle", "lowrank+residual"})
            QTest::newRow(k) << QString(k);
    }
    void truncatedPayloadIsCorrupt() {
        QFETCH(QString, kind);
        const std::string k = kind.toStdString();
        std::vector<float> w = with_spectrum(64, 64, {3, 2, 1}, 61);
        TensorRole role = TensorRole::AttnQ;
        CodecParams p = low_rank(3, 4);
        if (k == "f32") p.method = Method::F32;
        if (k == "f16") p.method = Method::F16;
        if (k == "q8_0") p.method = Method::Q8_0;
        if (k == "q4_0") p.method = Method::Q4_0;
        if (k == "lowrank quantized sigma") p.sigma_quantized = true;
        if (k == "lowrank+residual") p.residual = ResidualKind::Q8_0;
        if (k == "lowrank folded") {
            w = scaled_heads(false);
            p = low_rank(8, 8);
            p.fold = true;
        }
        if (k == "lowrank rle") {
            w = piecewise_ffn();
            role = TensorRole::FfnGate;
            p = low_rank(1, 4);
            p.fold = true;
            p.delta = true;
        }
        const std::vector<int64_t> shape =
            role == TensorRole::FfnGate ? std::vector<int64_t>{192, 64} : std::vector<int64_t>{64, 64};
        Result<EncodedTensor> e = encode_tensor(input("blk.3.attn_q.weight", role, shape, w, 8), p);
        QVERIFY(e.is_ok());
        if (k == "lowrank folded") QCOMPARE(e->flags, uint32_t(kFlagFoldedHeads));
        if (k == "lowrank rle") QVERIFY(e->flags & kFlagRleCoefficients);
        QVERIFY(decode_tensor(*e).is_ok());

        EncodedTensor cut = *e;
        cut.payload.pop_back();
        Result<std::vector<float>> d = decode_tensor(cut);
        QCOMPARE(d.status().code(), StatusCode::Corrupt);
        QVERIFY2(d.message().find("tensor 'blk.3.attn_q.weight'") == 0, d.message().c_str());

        EncodedTensor longer = *e;
        longer.payload.push_back(0);
        d = decode_tensor(longer);
        QCOMPARE(d.status().code(), StatusCode::Corrupt);
        QVERIFY2(d.message().find("tensor 'blk.3.attn_q.weight'") == 0, d.message().c_str());
    }

    void payloadMessagesNameTheField() {
        const std::vector<float> w = with_spectrum(64, 64, {3, 2, 1}, 61);
        CodecParams q8;
        q8.method = Method::Q8_0;
        EncodedTensor e = *encode_tensor(input("blk.0.attn_k.weight", TensorRole::AttnK, {64, 64}, w), q8);
        e.payload.pop_back();
        QCOMPARE(decode_tensor(e).message(), std::string("tensor 'blk.0.attn_k.weight' (q8_0): payload is 4351 bytes, "
                                                         "expected 4352 for shape 64 x 64"));
        e = *encode_tensor(input("blk.0.attn_k.weight", TensorRole::AttnK, {64, 64}, w), low_rank(3, 4));
        e.payload.pop_back();  // f32 sigma[3], scales[6], then 3 * 128 4-bit codes = 192 bytes from offset 36
        QCOMPARE(decode_tensor(e).message(),
                 std::string("tensor 'blk.0.attn_k.weight' (lowrank) payload: factor codes at offset 36: needs 192 "
                             "bytes but the file ends after 191 (truncated?)"));

        EncodedTensor bad = *encode_tensor(input("x", TensorRole::AttnK, {64, 64}, w), low_rank(3, 4));
        bad.rank = 65;
        QCOMPARE(decode_tensor(bad).message(),
                 std::string("tensor 'x' (lowrank) payload: rank 65 is outside [0, 64] for a (64, 64) matrix"));
        bad.rank = 3;
        bad.factor_bits = 3;
        QCOMPARE(decode_tensor(bad).message(),
                 std::string("tensor 'x' (lowrank) payload: factor_bits is 3, expected 2, 4 or 8"));
        bad.factor_bits = 4;
        bad.flags = 0x40;
        QCOMPARE(decode_tensor(bad).message(), std::string("tensor 'x' (lowrank) payload: unknown flag bits 0x40"));
        bad.flags = kFlagSigmaQuantized;  // now the sigma bytes are read differently and the sizes disagree
        QCOMPARE(decode_tensor(bad).status().code(), StatusCode::Corrupt);
        bad.flags = 0;
        bad.shape = {64, -1};
        QCOMPARE(
            decode_tensor(bad).message(),
            std::string("tensor 'x' (lowrank): shape 64 x -1 has a negative dimension or more than 2^36 elements"));
        bad.shape = {4096};
        QCOMPARE(decode_tensor(bad).message(),
                 std::string("tensor 'x' (lowrank): a low-rank tensor needs two or more dimensions, shape 4096"));
        EncodedTensor f32 = *encode_tensor(input("n", TensorRole::AttnNorm, {64}, w), CodecParams{});
        f32.rank = 2;
        QCOMPARE(decode_tensor(f32).message(),
                 std::string("tensor 'n' (f32): header field rank is 2, expected 0 for this method"));
        std::vector<float> dst(63);
        f32.rank = 0;
        QCOMPARE(decode_tensor_into(f32, dst.data(), 63).message(),
                 std::string("tensor 'n' (f32): destination holds 63 floats, the tensor has 64"));
    }

    void damagedPayloadsDecodeOrFailCleanly() {
        // every truncation and a bit flip in every byte of small payloads of each layout: decode either succeeds or
        // returns Corrupt, never reads out of bounds (run under the sanitizers in CI)
        std::vector<EncodedTensor> samples;
        CodecParams p = low_rank(2, 2);
        p.delta = true;
        p.sigma_quantized = true;
        samples.push_back(*encode_tensor(input("a", TensorRole::AttnQ, {32, 32}, with_spectrum(32, 32, {2, 1}, 3)), p));
        p = low_rank(8, 8);
        p.fold = true;
        samples.push_back(*encode_tensor(input("b", TensorRole::AttnQ, {64, 64}, scaled_heads(false), 8), p));
        p = low_rank(1, 4);
        p.fold = true;
        p.delta = true;
        p.residual = ResidualKind::Q4_0;
        samples.push_back(*encode_tensor(input("c", TensorRole::FfnUp, {192, 64}, piecewise_ffn()), p));
        QCOMPARE(samples[1].flags, uint32_t(kFlagFoldedHeads));
        QVERIFY(samples[2].flags & kFlagRleCoefficients);
        int n_ok = 0, n_corrupt = 0;
        for (const EncodedTensor& e : samples) {
            for (size_t len = 0; len < e.payload.size(); ++len) {
                EncodedTensor cut = e;
                cut.payload.resize(len);
                Result<std::vector<float>> d = decode_tensor(cut);
                QCOMPARE(d.status().code(), StatusCode::Corrupt);
                ++n_corrupt;
            }
            const size_t limit = std::min<size_t>(e.payload.size(), 600);  // the headers and the first codes
            for (size_t i = 0; i < limit; ++i) {
                EncodedTensor bad = e;
                bad.payload[i] ^= 0x5A;
                Result<std::vector<float>> d = decode_tensor(bad);
                if (d.is_ok())
                    ++n_ok;
                else {
                    QCOMPARE(d.status().code(), StatusCode::Corrupt);
                    ++n_corrupt;
                }
            }
        }
        QVERIFY(n_ok > 0 && n_corrupt > 0);
    }

    // ---- accounting -------------------------------------------------------------------------------------------

    void accountingCountsEveryByte() {
        const std::vector<float> w = with_spectrum(64, 128, {3, 2, 1}, 71);
        CodecParams p = low_rank(3, 2);
        p.sigma_quantized = true;
        TensorReport r;
        const EncodedTensor e = *encode_tensor(input("m", TensorRole::AttnQ, {64, 128}, w), p, &r);
        // sigma_max + 3 codes, 6 f32 scales, 3 * (64 + 128) 2-bit codes
        const uint64_t expected = 4 + 3 + 6 * 4 + (3 * 192 * 2) / 8;
        QCOMPARE(r.payload_bytes, expected);
        QCOMPARE(uint64_t(e.payload.size()), expected);
        QCOMPARE(r.bits_per_weight, 8.0 * double(expected) / (64.0 * 128.0));
        QCOMPARE(bytes_on_disk(r, 40), expected + 40);
        QCOMPARE(bits_per_weight_on_disk(r, 40), 8.0 * double(expected + 40) / (64.0 * 128.0));
        QCOMPARE(r.bytes_on_disk_estimate, expected + kRecordHeaderBytesEstimate);

        Result<TensorReport> again = measure_encoded(w.data(), e);
        QVERIFY(again.is_ok());
        QCOMPARE(again->rel_error, r.rel_error);
        QCOMPARE(again->payload_bytes, r.payload_bytes);
    }

    // ---- overrides --------------------------------------------------------------------------------------------

    void overridePrecedence() {
        const Preset paper = *find_preset("paper");
        ParamOverride global;
        global.factor_bits = 8;
        global.rank = 5;
        std::vector<LayerOverride> layers(5);
        layers[0].layer = 2;
        layers[0].role = TensorRole::AttnQ;  // listed first, still applied after the role-less ones
        layers[0].params.rank = 11;
        layers[1].layer = 2;
        layers[1].params.rank = 7;
        layers[1].params.fold = false;
        layers[2].layer = 3;
        layers[2].params.energy = 0.9;
        layers[3].layer = -1;
        layers[3].role = TensorRole::AttnQ;
        layers[3].params.delta = false;
        layers[4].layer = 2;
        layers[4].role = TensorRole::AttnQ;
        layers[4].params.factor_bits = 4;

        const CodecParams q2 = resolve_params(paper, TensorRole::AttnQ, 2, 2, global, layers);
        QCOMPARE(q2.rank, 11);           // (layer 2, attn_q) beats (layer 2, any role) beats global
        QCOMPARE(q2.factor_bits, 4);     // (layer 2, attn_q) beats global
        QVERIFY(!q2.fold);               // (layer 2, any role)
        QVERIFY(!q2.delta);              // (every layer, attn_q)
        QCOMPARE(q2.max_components, 3);  // preset
        QVERIFY(q2.sigma_quantized);

        const CodecParams k2 = resolve_params(paper, TensorRole::AttnK, 2, 2, global, layers);
        QCOMPARE(k2.rank, 7);
        QCOMPARE(k2.factor_bits, 8);
        QVERIFY(k2.delta);

        const CodecParams q3 = resolve_params(paper, TensorRole::AttnQ, 3, 2, global, layers);
        QCOMPARE(q3.rank, 0);  // energy set at layer 3 clears the global rank
        QCOMPARE(q3.energy, 0.9);
        QCOMPARE(q3.factor_bits, 8);
        QVERIFY(!q3.delta);

        ParamOverride to_q8;
        to_q8.method = Method::Q8_0;
        QCOMPARE(resolve_params(paper, TensorRole::AttnNorm, 2, 1, to_q8, layers).method, Method::F32);
        QCOMPARE(resolve_params(paper, TensorRole::FfnUp, 2, 2, to_q8, layers).method, Method::Q8_0);
        QCOMPARE(resolve_params(paper, TensorRole::AttnQ, 2, 2, {}, {}).factor_bits, 2);  // nothing: the preset

        const Preset lq = *find_preset("lowrank-q4");
        ParamOverride rank32;
        rank32.rank = 32;
        const CodecParams l = resolve_params(lq, TensorRole::FfnUp, 0, 2, rank32, {});
        QCOMPARE(l.rank, 32);
        QCOMPARE(l.max_rank_fraction, 0.0);  // an explicit rank is taken as given
        QCOMPARE(lq.params_for(TensorRole::FfnUp, 2).target, LowRankTarget::Weights);
        LayerOverride lqer;  // every layer: the LQER order
        lqer.params.target = LowRankTarget::QuantError;
        LayerOverride no_residual;
        no_residual.layer = 0;
        no_residual.role = TensorRole::FfnUp;
        no_residual.params.residual = ResidualKind::None;
        QCOMPARE(resolve_params(lq, TensorRole::FfnUp, 0, 2, {}, {lqer}).target, LowRankTarget::QuantError);
        const CodecParams n = resolve_params(lq, TensorRole::FfnUp, 0, 2, {}, {lqer, no_residual});
        QCOMPARE(n.residual, ResidualKind::None);
        QCOMPARE(n.target, LowRankTarget::Weights);  // no residual: nothing else to decompose
        QCOMPARE(
            validate_params(n).message(),
            std::string("codec parameter residual: method lowrank+residual needs a residual (q4_0, q8_0, q4_k ...)"));
    }

    void paramValidationAndNames() {
        CodecParams p;
        p.factor_bits = 3;
        QCOMPARE(validate_params(p).message(), std::string("codec parameter factor_bits: 3 is not 2, 4 or 8"));
        p.factor_bits = 8;
        p.energy = 1.5;
        QCOMPARE(validate_params(p).code(), StatusCode::InvalidArgument);
        p.energy = 0.9;
        QVERIFY(validate_params(p).is_ok());
        for (Method m :
             {Method::F32, Method::F16, Method::Q8_0, Method::Q4_0, Method::LowRank, Method::LowRankResidual})
            QCOMPARE(*parse_method(method_name(m)), m);
        for (Method m : all_methods()) QCOMPARE(*parse_method(method_name(m)), m);
        QCOMPARE(parse_method("q7_k").status().code(), StatusCode::InvalidArgument);
        QCOMPARE(*parse_residual("q4_0"), ResidualKind::Q4_0);
        QCOMPARE(parse_residual("q2").status().code(), StatusCode::InvalidArgument);
        ModelConfig c;
        c.n_heads = 8;
        c.n_kv_heads = 4;
        QCOMPARE(fold_head_count(TensorRole::AttnQ, c), 8);
        QCOMPARE(fold_head_count(TensorRole::AttnO, c), 8);
        QCOMPARE(fold_head_count(TensorRole::AttnV, c), 4);
        QCOMPARE(fold_head_count(TensorRole::FfnUp, c), 0);
    }

    // ---- whitened SVD (SVD-LLM) and the whitened quantization-error correction ---------------------------------

    void whitenedTruncationCostsExactlyTheDroppedSquares() {
        const int64_t rows = 24, cols = 16, tokens = 200, k = 5;
        const std::vector<float> w32 = test::random_floats(static_cast<size_t>(rows * cols), 7);
        const std::vector<double> x = activations(tokens, cols, 8), g = gram_of(x, tokens, cols);
        Result<codec::Whitener> wh = codec::cholesky_whitener(g.data(), cols, "t");
        QVERIFY2(wh.is_ok(), wh.message().c_str());
        QCOMPARE(wh->shift, 0.0);
        std::vector<double> m(w32.begin(), w32.end());
        codec::whiten_rows(*wh, m.data(), rows);
        Result<codec::Svd> svd = codec::svd_thin([&](double* a) { std::copy(m.begin(), m.end(), a); }, rows, cols, "t");
        QVERIFY(svd.is_ok());
        std::vector<double> u, v;
        codec::top_factors(*svd, k, u, v);
        codec::unwhiten_factor(*wh, v.data(), k);
        std::vector<double> approx(static_cast<size_t>(rows * cols), 0.0);
        for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < cols; ++j)
                for (int64_t r = 0; r < k; ++r) approx[i * cols + j] += u[i * k + r] * svd->s[r] * v[j * k + r];
        double tail = 0.0;
        for (size_t i = k; i < svd->s.size(); ++i) tail += svd->s[i] * svd->s[i];
        const double e = output_error(w32, approx, x, rows, cols);
        QVERIFY2(std::fabs(e - tail) <= 1e-9 * tail, (std::to_string(e) + " vs " + std::to_string(tail)).c_str());

        // The plain truncated SVD of W at the same rank costs more on these activations.
        Result<codec::Svd> plain =
            codec::svd_thin([&](double* a) { std::copy(w32.begin(), w32.end(), a); }, rows, cols, "p");
        QVERIFY(plain.is_ok());
        std::vector<double> pu, pv;
        codec::top_factors(*plain, k, pu, pv);
        std::vector<double> papprox(static_cast<size_t>(rows * cols), 0.0);
        for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < cols; ++j)
                for (int64_t r = 0; r < k; ++r) papprox[i * cols + j] += pu[i * k + r] * plain->s[r] * pv[j * k + r];
        QVERIFY(output_error(w32, papprox, x, rows, cols) > 1.05 * e);
    }

    void choleskyShiftsASingularGram() {
        // 4 tokens in 16 columns, one column never active: rank 4, not positive definite.
        const int64_t cols = 16, tokens = 4;
        std::vector<double> x = activations(tokens, cols, 3);
        for (int64_t t = 0; t < tokens; ++t) x[t * cols + 5] = 0.0;
        const std::vector<double> g = gram_of(x, tokens, cols);
        Result<codec::Whitener> wh = codec::cholesky_whitener(g.data(), cols, "blk.0.attn_q.weight");
        QVERIFY2(wh.is_ok(), wh.message().c_str());
        QVERIFY(wh->shift > 0.0);
        double mean = 0.0;
        for (int64_t i = 0; i < cols; ++i) mean += g[i * cols + i] / cols;
        QVERIFY(wh->shift <= 1e5 * mean);
        for (int64_t i = 0; i < cols; ++i)
            for (int64_t j = 0; j < cols; ++j) {
                double llt = 0.0;
                for (int64_t r = 0; r < cols; ++r) llt += wh->l[i * cols + r] * wh->l[j * cols + r];
                const double want = g[i * cols + j] + (i == j ? wh->shift : 0.0);
                QVERIFY2(std::fabs(llt - want) <= 1e-9 * mean, (std::to_string(i) + "," + std::to_string(j)).c_str());
                if (j > i) QCOMPARE(wh->l[i * cols + j], 0.0);
            }
        std::vector<double> bad = g;
        bad[3] = NAN;
        Result<codec::Whitener> nan = codec::cholesky_whitener(bad.data(), cols, "blk.0.attn_q.weight");
        QCOMPARE(nan.status().code(), StatusCode::InvalidArgument);
        QCOMPARE(nan.message(), std::string("blk.0.attn_q.weight: Gram matrix element 3 is not finite"));
    }

    void whitenedCodecRoundTrip() {
        const int64_t rows = 48, cols = 64, tokens = 400;
        const std::vector<float> w = test::random_floats(static_cast<size_t>(rows * cols), 11);
        const std::vector<double> x = activations(tokens, cols, 12), g = gram_of(x, tokens, cols);
        TensorInput in = input("blk.0.attn_q.weight", TensorRole::AttnQ, {rows, cols}, w);
        CodecParams p;
        p.method = Method::LowRank;
        p.param_fraction = 0.5;
        p.factor_bits = 8;
        p.whiten = true;
        Result<EncodedTensor> refused = encode_tensor(in, p);
        QCOMPARE(refused.status().code(), StatusCode::InvalidArgument);
        QVERIFY(refused.message().find("needs the Gram matrix") != std::string::npos);

        in.gram = g.data();
        TensorReport r;
        Result<EncodedTensor> e = encode_tensor(in, p, &r);
        QVERIFY2(e.is_ok(), e.message().c_str());
        QCOMPARE(e->rank, static_cast<int32_t>(0.5 * rows * cols / (rows + cols)));  // 13
        QVERIFY(r.whiten_shift.has_value());
        QCOMPARE(*r.whiten_shift, 0.0);
        Result<std::vector<float>> d = decode_tensor(*e);
        QVERIFY(d.is_ok());
        Result<LowRankFactors> f = decode_lowrank_factors(*e);
        QVERIFY(f.is_ok());
        QCOMPARE(f->rank, static_cast<int64_t>(e->rank));
        // the factors multiply out to the decoded tensor
        for (int64_t i = 0; i < rows; i += 7)
            for (int64_t j = 0; j < cols; j += 5) {
                double a = 0.0;
                for (int64_t q = 0; q < f->rank; ++q) a += f->u[i * f->rank + q] * f->s[q] * f->v[j * f->rank + q];
                QVERIFY(std::fabs(a - (*d)[i * cols + j]) <= 1e-4 * (1.0 + std::fabs(a)));
            }
        CodecParams plain = p;
        plain.whiten = false;
        Result<EncodedTensor> ep = encode_tensor(in, plain);
        QVERIFY(ep.is_ok());
        QCOMPARE(ep->rank, e->rank);
        const double white_err = output_error(w, *d, x, rows, cols);
        const double plain_err = output_error(w, *decode_tensor(*ep), x, rows, cols);
        QVERIFY2(white_err < 0.95 * plain_err,
                 (std::to_string(white_err) + " vs " + std::to_string(plain_err)).c_str());

        // LQER in the whitened metric: Q4_0 of W plus a rank-4 correction of its error beats Q4_0 alone on X.
        CodecParams lq;
        lq.method = Method::LowRankResidual;
        lq.rank = 4;
        lq.factor_bits = 8;
        lq.residual = ResidualKind::Q4_0;
        lq.target = LowRankTarget::QuantError;
        lq.whiten = true;
        Result<EncodedTensor> el = encode_tensor(in, lq);
        QVERIFY2(el.is_ok(), el.message().c_str());
        QCOMPARE(el->method, Method::LowRankResidual);
        CodecParams q4;
        q4.method = Method::Q4_0;
        const double q4_err = output_error(w, *decode_tensor(*encode_tensor(in, q4)), x, rows, cols);
        const double lq_err = output_error(w, *decode_tensor(*el), x, rows, cols);
        lq.whiten = false;
        const double lq_plain_err = output_error(w, *decode_tensor(*encode_tensor(in, lq)), x, rows, cols);
        QVERIFY2(lq_err < lq_plain_err && lq_plain_err < q4_err,
                 (std::to_string(lq_err) + " " + std::to_string(lq_plain_err) + " " + std::to_string(q4_err)).c_str());

        CodecParams bad;
        bad.method = Method::Q4_0;
        bad.whiten = true;
        QCOMPARE(validate_params(bad).code(), StatusCode::InvalidArgument);
    }

    void badInputsAreRefused() {
        std::vector<float> w = test::random_floats(64 * 64, 1);
        w[100] = NAN;
        Result<EncodedTensor> e = encode_tensor(input("nan", TensorRole::AttnQ, {64, 64}, w), low_rank(2, 8));
        QCOMPARE(e.status().code(), StatusCode::InvalidArgument);
        QCOMPARE(e.message(), std::string("tensor 'nan': element 100 is not finite; the SVD needs finite values"));
        TensorReport r;
        e = encode_tensor(input("norm", TensorRole::AttnNorm, {64}, w), low_rank(2, 8), &r);
        QVERIFY(e.is_ok());
        QCOMPARE(e->method, Method::F32);
        QCOMPARE(r.fallback, std::string("fewer than 2 dimensions: stored f32 instead of lowrank"));
        const std::vector<float> zeros(32 * 64, 0.0f);
        e = encode_tensor(input("zero", TensorRole::AttnQ, {32, 64}, zeros), CodecParams{.method = Method::LowRank},
                          &r);
        QVERIFY(e.is_ok());
        QCOMPARE(e->rank, 0);
        QCOMPARE(r.rel_error, 0.0);
        QCOMPARE(*decode_tensor(*e), zeros);
    }

    // The row-by-row encoder (quantize reads large matrices a chunk at a time) gives the whole-tensor encoder's payload
    // and report, field for field, whatever the chunk: one row, a few, all; with and without importance; through the
    // shape fallbacks; and its errors equal measure_encoded's over the whole decoded tensor.
    void rowChunkedEncodingEqualsWhole() {
        const int64_t rows = 13, cols = 512;
        std::vector<float> w = test::random_floats(static_cast<size_t>(rows * cols), 41, 0.05f);
        for (int64_t i = 0; i < rows * cols; i += 97) w[static_cast<size_t>(i)] *= 20.0f;  // outliers
        const std::vector<float> importance = [&] {
            std::vector<float> v = test::random_floats(static_cast<size_t>(cols), 42);
            for (float& x : v) x = x * x + 0.01f;
            return v;
        }();
        const Method methods[] = {Method::F32,  Method::F16,  Method::Q8_0,   Method::Q4_0, Method::Q4_1,
                                  Method::Q5_0, Method::Q5_1, Method::IQ4_NL, Method::Q2_K, Method::Q3_K,
                                  Method::Q4_K, Method::Q5_K, Method::Q6_K};
        for (const Method m : methods)
            for (const bool weighted : {false, true})
                for (const uint64_t chunk : {uint64_t{1}, uint64_t{3 * cols * 4}, uint64_t{1} << 30}) {
                    const QByteArray what = QByteArray(method_name(m).data()) + (weighted ? " weighted" : "") +
                                            " chunk " + QByteArray::number(static_cast<qulonglong>(chunk));
                    TensorInput in = input("w", TensorRole::FfnUp, {rows, cols}, w);
                    if (weighted) in.importance = importance.data();
                    const CodecParams p{.method = m};
                    uint64_t payload = 0;
                    QVERIFY2(encodes_by_rows(in, p, &payload), what.constData());
                    TensorReport whole_r, rows_r;
                    Result<EncodedTensor> whole = encode_tensor(in, p, &whole_r);
                    QVERIFY2(whole.is_ok(), what.constData());
                    int calls = 0;
                    Result<EncodedTensor> by_rows =
                        encode_tensor_rows(in, in.importance, rows_of(w, cols, &calls), p, &rows_r, chunk);
                    QVERIFY2(by_rows.is_ok(), what.constData());
                    const int64_t chunk_rows = std::max<int64_t>(static_cast<int64_t>(chunk) / (cols * 4), 1);
                    QCOMPARE(calls, static_cast<int>((rows + chunk_rows - 1) / chunk_rows));
                    QVERIFY2(by_rows->payload == whole->payload, what.constData());
                    QCOMPARE(by_rows->payload.size(), payload);
                    QCOMPARE(by_rows->method, whole->method);
                    QCOMPARE(by_rows->dtype, whole->dtype);
                    compare_reports(rows_r, whole_r);
                    Result<TensorReport> measured = measure_encoded(w.data(), *by_rows);
                    QVERIFY(measured.is_ok());
                    QCOMPARE(rows_r.rel_error, measured->rel_error);
                    QCOMPARE(rows_r.max_abs_error, measured->max_abs_error);
                    QVERIFY(rows_r.rel_error > 0.0 || m == Method::F32);
                }

        // Shape fallbacks: 40 columns take no 32- or 256-element block, so q4_k becomes f16; a value f16 cannot
        // hold in the last chunk then makes it f32, the encoding started again.
        const int64_t r2 = 9, c2 = 40;
        std::vector<float> v = test::random_floats(static_cast<size_t>(r2 * c2), 43);
        for (const bool huge : {false, true}) {
            if (huge) v[static_cast<size_t>(r2 * c2 - 3)] = 1e6f;
            const TensorInput in = input("odd", TensorRole::FfnDown, {r2, c2}, v);
            const CodecParams p{.method = Method::Q4_K};
            TensorReport whole_r, rows_r;
            Result<EncodedTensor> whole = encode_tensor(in, p, &whole_r);
            QVERIFY(whole.is_ok());
            int calls = 0;
            Result<EncodedTensor> by_rows =
                encode_tensor_rows(in, nullptr, rows_of(v, c2, &calls), p, &rows_r, uint64_t{2 * c2 * 4});
            QVERIFY(by_rows.is_ok());
            QCOMPARE(whole->method, huge ? Method::F32 : Method::F16);
            QVERIFY(by_rows->payload == whole->payload);
            compare_reports(rows_r, whole_r);
            QVERIFY(!rows_r.fallback.empty());
        }
        // A requested method refuses the value, naming the same element as the whole-tensor encoder.
        {
            const TensorInput in = input("big", TensorRole::FfnDown, {r2, c2}, v);
            const CodecParams p{.method = Method::F16};
            Result<EncodedTensor> whole = encode_tensor(in, p);
            int calls = 0;
            Result<EncodedTensor> by_rows = encode_tensor_rows(in, nullptr, rows_of(v, c2, &calls), p, nullptr, 1);
            QCOMPARE(whole.status().code(), StatusCode::InvalidArgument);
            QCOMPARE(by_rows.message(), whole.message());
            QVERIFY(by_rows.message().find("at element " + std::to_string(r2 * c2 - 3)) != std::string::npos);
        }
        // The low-rank methods need the whole matrix.
        const TensorInput in = input("w", TensorRole::AttnQ, {rows, cols}, w);
        QVERIFY(!encodes_by_rows(in, low_rank(2, 8)));
        int calls = 0;
        QCOMPARE(encode_tensor_rows(in, nullptr, rows_of(w, cols, &calls), low_rank(2, 8)).status().code(),
                 StatusCode::InvalidArgument);
        QCOMPARE(calls, 0);
    }
};

QTEST_APPLESS_MAIN(TestCodec)
#include "test_codec.moc"
