// The transformer on stored weights: a model file's F16 / BF16 / Q8_0 / Q4_0 tensors run from its mapping, a knot's
// Q8_0 / Q4_0 records from their blocks, never converted as a whole. The stored products convert each row tile to
// exactly to_f32's values and sum them in the dense kernel's order, so the expected tolerance against the same
// weights converted to float32 at load is zero: the logits must be bit-identical. They must also be identical
// between the generic and AVX2 kernels, 1 and 3 threads, and a batch against tokens one by one.
#include "gkq/convert.h"
#include "gkq/knot.h"
#include "gkq/model_file.h"
#include "gkq/model_writer.h"
#include "gkq/quantize.h"
#include "gkq/transformer.h"
#include "gkq/type_traits.h"
#include "gkq/weights.h"
#include "infer/kernels.h"
#include "infer/thread_pool.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QtTest>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

using namespace gkq;

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

Transformer load_or_die(const std::shared_ptr<const Weights>& w, int threads, bool stored) {
    TransformerOptions o;
    o.n_threads = threads;
    o.max_batch = 5;  // blocks of 5: a batch crosses block boundaries
    o.stored = stored;
    auto t = Transformer::load(w, o);
    if (!t) qFatal("%s", t.message().c_str());
    return std::move(*t);
}

std::shared_ptr<const Weights> open_or_die(const std::string& path) {
    auto w = open_weights(path);
    if (!w) qFatal("%s", w.message().c_str());
    return std::shared_ptr<const Weights>(std::move(*w));
}

// The stored runs of `w` against its float32 run: every ISA, thread count and batching gives the dense bits.
void check_stored_equals_dense(const std::shared_ptr<const Weights>& w, DType expect_type) {
    const std::vector<int32_t> tokens = test::cycle_tokens(static_cast<int32_t>(w->config().vocab_size), 12);
    const KernelIsa was = active_kernel_isa();
    const int64_t was_macs = min_parallel_macs();
    set_min_parallel_macs(0);  // every product split across the pool
    Transformer dense = load_or_die(w, 1, false);
    QCOMPARE(dense.weights().layers[0].wq.stored(), false);
    const std::vector<float> want = test::all_logits(dense, tokens, false);
    for (KernelIsa isa : {KernelIsa::Generic, KernelIsa::Avx2}) {
        const KernelIsa got_isa = set_kernel_isa(isa);
        for (int threads : {1, 3}) {
            Transformer t = load_or_die(w, threads, true);
            const Matrix& wq = t.weights().layers[0].wq;
            QVERIFY(wq.stored());
            QCOMPARE(wq.values->stored_type, expect_type);
            QVERIFY(t.weights().token_embedding.stored());
            for (bool batch : {false, true}) {
                const std::vector<float> got = test::all_logits(t, tokens, batch);
                QVERIFY2(same_bits(got, want), qPrintable(QString("%1, %2 threads, %3")
                                                              .arg(kernel_isa_name(got_isa))
                                                              .arg(threads)
                                                              .arg(batch ? "batch" : "one by one")));
            }
        }
    }
    set_kernel_isa(was);
    set_min_parallel_macs(was_macs);
}

// A dense random matrix quantized to `type` with its row function, converted back by to_f32.
struct StoredMatrix {
    std::vector<uint8_t> bytes;
    std::vector<float> f32;  // to_f32 of bytes
};

StoredMatrix make_stored(DType type, int64_t rows, int64_t cols, uint64_t seed) {
    const TypeTraits& tt = type_traits(type);
    const std::vector<float> src = test::random_floats(static_cast<size_t>(rows * cols), seed, 0.5f);
    StoredMatrix m;
    m.bytes.resize(static_cast<size_t>(rows) * stored_row_bytes(type, cols));
    m.f32.resize(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
        uint8_t* row = m.bytes.data() + static_cast<uint64_t>(r) * stored_row_bytes(type, cols);
        tt.from_f32(src.data() + r * cols, row, cols);
        tt.to_f32(row, m.f32.data() + r * cols, cols);
    }
    return m;
}

}  // namespace

class TestTransformerStored : public QObject {
    Q_OBJECT

private slots:
    // Every type the table converts, under both ISAs: matmul_stored equals matmul over the converted matrix and the
    // type table's dot_f32 of each row bit for bit (13 rows: blocks of 8, 4 and single rows; 3 tokens), and a
    // converted row equals to_f32's.
    void storedProductsEqualDense_data() {
        QTest::addColumn<int>("type");
        QTest::addColumn<int>("cols");
        for (const TypeTraits& tt : type_table()) {
            if (!stored_type_runs(tt.dtype) || tt.from_f32 == nullptr) continue;
            const int cols = tt.block_elements == 1 ? 613 : 3 * 256;  // a plain type: a tail of 5 after 8-lane steps
            QTest::newRow(std::string(tt.name).c_str()) << static_cast<int>(tt.dtype) << cols;
        }
    }
    void storedProductsEqualDense() {
        QFETCH(int, type);
        QFETCH(int, cols);
        const auto t = static_cast<DType>(type);
        const int64_t rows = 13, n = 3;
        const StoredMatrix m = make_stored(t, rows, cols, 5);
        const std::vector<float> x = test::random_floats(static_cast<size_t>(n * cols), 9);
        std::vector<float> want(static_cast<size_t>(n * rows)), got(want.size());
        const KernelIsa was = active_kernel_isa();
        set_kernel_isa(KernelIsa::Generic);
        matmul(want.data(), x.data(), m.f32.data(), n, rows, cols, nullptr);
        // the type table's scalar dot_f32 defines the order: each output is its dot of the stored row
        const uint64_t row_bytes = stored_row_bytes(t, cols);
        for (int64_t i = 0; i < n; ++i)
            for (int64_t r = 0; r < rows; ++r) {
                const float dot = type_traits(t).dot_f32(m.bytes.data() + r * row_bytes, x.data() + i * cols, cols);
                QVERIFY(std::memcmp(&dot, &want[static_cast<size_t>(i * rows + r)], sizeof dot) == 0);
            }
        for (KernelIsa isa : {KernelIsa::Generic, KernelIsa::Avx2}) {
            const KernelIsa in_use = set_kernel_isa(isa);
            matmul_stored(got.data(), x.data(), StoredRows{t, m.bytes.data()}, n, rows, cols, nullptr);
            QVERIFY2(same_bits(got, want), kernel_isa_name(in_use));
            std::vector<float> row(static_cast<size_t>(cols));
            for (int64_t r : {int64_t{0}, rows - 1}) {
                stored_row_to_f32(StoredRows{t, m.bytes.data()}, rows, cols, r, row.data());
                QVERIFY(std::memcmp(row.data(), m.f32.data() + r * cols, row.size() * sizeof(float)) == 0);
            }
        }
        set_kernel_isa(was);
    }

    // Q4_0 rows regrouped eight at a time (kernels.h: group_rows; 13 rows: one group and 5 rows left row-major)
    // hold the same rows, and the products over them, with float32 or Q8_0 activations, equal the row-major ones bit
    // for bit under both ISAs, whole or split over a pool.
    void groupedRowsAreTheSameMatrix() {
        const DType t = DType::Q4_0;
        QVERIFY(stored_type_groups(t));
        QVERIFY(!stored_type_groups(DType::Q8_0));
        const int64_t rows = 13, n = 3, cols = 3 * 256;
        const StoredMatrix m = make_stored(t, rows, cols, 21);
        std::vector<uint8_t> grouped(m.bytes.size());
        group_rows(t, m.bytes.data(), grouped.data(), rows, cols);
        QVERIFY(grouped != m.bytes);  // the group's bytes moved
        const uint64_t row_bytes = stored_row_bytes(t, cols);
        QVERIFY(std::memcmp(grouped.data() + kRowGroup * row_bytes, m.bytes.data() + kRowGroup * row_bytes,
                            (rows - kRowGroup) * row_bytes) == 0);  // the rest stays where it was
        const StoredRows plain{t, m.bytes.data()}, regrouped{t, grouped.data(), true};
        std::vector<uint8_t> back(row_bytes);
        std::vector<float> row(static_cast<size_t>(cols));
        for (int64_t r = 0; r < rows; ++r) {
            stored_row_blocks(regrouped, rows, cols, r, back.data());
            QVERIFY2(std::memcmp(back.data(), m.bytes.data() + r * row_bytes, row_bytes) == 0,
                     qPrintable(QString::number(r)));
            stored_row_to_f32(regrouped, rows, cols, r, row.data());
            QVERIFY(std::memcmp(row.data(), m.f32.data() + r * cols, row.size() * sizeof(float)) == 0);
        }
        const std::vector<float> x = test::random_floats(static_cast<size_t>(n * cols), 23, 2.0f);
        const KernelIsa was = active_kernel_isa();
        const int64_t was_macs = min_parallel_macs();
        ThreadPool pool(2);
        for (KernelIsa isa : {KernelIsa::Generic, KernelIsa::Avx2})
            for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
                const KernelIsa in_use = set_kernel_isa(isa);
                set_min_parallel_macs(0);
                std::vector<float> want(static_cast<size_t>(n * rows)), got(want.size());
                matmul_stored(want.data(), x.data(), plain, n, rows, cols, p);
                matmul_stored(got.data(), x.data(), regrouped, n, rows, cols, p);
                QVERIFY2(same_bits(got, want), kernel_isa_name(in_use));
                matmul_stored_q8(want.data(), x.data(), plain, n, rows, cols, p);
                matmul_stored_q8(got.data(), x.data(), regrouped, n, rows, cols, p);
                QVERIFY2(same_bits(got, want), kernel_isa_name(in_use));
            }
        set_kernel_isa(was);
        set_min_parallel_macs(was_macs);
    }

    // Q4_0 and Q8_0 rows against Q8_0 activations: both ISAs give the documented sums bit for bit (computed here
    // from to_f32's codes), split over a pool or not, and stay within the activations' rounding of the float32
    // product.
    void q8ActivationProductsFollowTheirOrder_data() {
        QTest::addColumn<int>("type");
        QTest::newRow("q4_0") << static_cast<int>(DType::Q4_0);
        QTest::newRow("q8_0") << static_cast<int>(DType::Q8_0);
    }
    void q8ActivationProductsFollowTheirOrder() {
        QFETCH(int, type);
        const auto t = static_cast<DType>(type);
        QVERIFY(stored_type_has_q8_dot(t));
        const int64_t rows = 67, n = 3, cols = 5 * 32, nb = cols / 32;  // pairs of rows and a last one
        const StoredMatrix m = make_stored(t, rows, cols, 7);
        std::vector<float> x = test::random_floats(static_cast<size_t>(n * cols), 11, 2.0f);
        for (int64_t j = 32; j < 64; ++j) x[static_cast<size_t>(j)] = 0.0f;  // an all-zero block: scale 0
        // the documented order: codes of x, then per block its exact integer sum, scaled and added in block order
        std::vector<float> want(static_cast<size_t>(n * rows)), dense(want.size());
        const uint64_t row_bytes = stored_row_bytes(t, cols);
        for (int64_t i = 0; i < n; ++i) {
            std::vector<int8_t> q(static_cast<size_t>(cols));
            std::vector<float> d(static_cast<size_t>(nb));
            for (int64_t b = 0; b < nb; ++b) {
                float amax = 0.0f;
                for (int64_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[i * cols + b * 32 + j]));
                const float db = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
                for (int64_t j = 0; j < 32; ++j)
                    q[b * 32 + j] = static_cast<int8_t>(std::nearbyint(x[i * cols + b * 32 + j] * id));
                d[b] = f16_to_f32(f32_to_f16(db));
            }
            for (int64_t r = 0; r < rows; ++r) {
                float acc = 0.0f;
                for (int64_t b = 0; b < nb; ++b) {
                    const uint8_t* block = m.bytes.data() + r * row_bytes + b * (row_bytes / nb);
                    uint16_t h;
                    std::memcpy(&h, block, 2);
                    const float dw = f16_to_f32(h);
                    int32_t p = 0;
                    for (int64_t j = 0; j < 32; ++j) {
                        // the code: the converted value over the block's scale (exact for these types)
                        const float v = m.f32[static_cast<size_t>(r * cols + b * 32 + j)];
                        p += static_cast<int32_t>(std::lrint(dw != 0.0f ? v / dw : 0.0f)) * q[b * 32 + j];
                    }
                    acc = acc + static_cast<float>(p) * (dw * d[b]);
                }
                want[i * rows + r] = acc;
            }
        }
        const KernelIsa was = active_kernel_isa();
        const int64_t was_macs = min_parallel_macs();
        set_kernel_isa(KernelIsa::Generic);
        matmul(dense.data(), x.data(), m.f32.data(), n, rows, cols, nullptr);
        ThreadPool pool(2);
        for (KernelIsa isa : {KernelIsa::Generic, KernelIsa::Avx2})
            for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
                const KernelIsa in_use = set_kernel_isa(isa);
                set_min_parallel_macs(0);
                std::vector<float> got(want.size());
                matmul_stored_q8(got.data(), x.data(), StoredRows{t, m.bytes.data()}, n, rows, cols, p);
                QVERIFY2(same_bits(got, want), kernel_isa_name(in_use));
                if (!stored_type_groups(t)) continue;
                std::vector<uint8_t> grouped(m.bytes.size());
                group_rows(t, m.bytes.data(), grouped.data(), rows, cols);
                std::fill(got.begin(), got.end(), 0.0f);
                matmul_stored_q8(got.data(), x.data(), StoredRows{t, grouped.data(), true}, n, rows, cols, p);
                QVERIFY2(same_bits(got, want), (std::string("grouped, ") + kernel_isa_name(in_use)).c_str());
            }
        set_kernel_isa(was);
        set_min_parallel_macs(was_macs);
        // each activation moves by at most half its block's step: |error| <= sum |w| * d / 2 (plus float rounding)
        for (int64_t i = 0; i < n; ++i)
            for (int64_t r = 0; r < rows; ++r) {
                double bound = 1e-4;
                for (int64_t b = 0; b < nb; ++b) {
                    float amax = 0.0f;
                    for (int64_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[i * cols + b * 32 + j]));
                    for (int64_t j = 0; j < 32; ++j)
                        bound += std::fabs(m.f32[static_cast<size_t>(r * cols + b * 32 + j)]) * amax / 127.0 * 0.51;
                }
                const double err = std::fabs(double(want[i * rows + r]) - double(dense[i * rows + r]));
                QVERIFY2(err <= bound, qPrintable(QString("row %1: %2 > %3").arg(r).arg(err).arg(bound)));
            }
    }

    void avx2ConvertsTheRequiredTypes() {
        if (set_kernel_isa(KernelIsa::Avx2) != KernelIsa::Avx2) QSKIP("this CPU has no AVX2 + F16C");
        set_kernel_isa(KernelIsa::Generic);
        for (DType t : {DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K})
            QVERIFY2(stored_type_has_avx2(t), std::string(dtype_name(t)).c_str());
    }

    // A GGUF model in each stored type, mapped: its stored logits are its float32 logits.
    void modelFileRunsStored_data() {
        QTest::addColumn<int>("type");
        QTest::addColumn<bool>("shared");
        for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0})
            for (bool shared : {true, false})
                QTest::newRow((std::string(dtype_name(t)) + (shared ? " tied" : " untied")).c_str())
                    << static_cast<int>(t) << shared;
    }
    void modelFileRunsStored() {
        QFETCH(int, type);
        QFETCH(bool, shared);
        test::TempDir dir;
        const std::string path = dir.file("tiny.gguf");
        auto m = test::make_tiny_model(test::tiny_config(shared), 3);
        WriteOptions wo;
        wo.dtype = static_cast<DType>(type);
        QVERIFY(write_gguf(path, m.config, m.tensors, {}, wo));
        const std::shared_ptr<const Weights> w = open_or_die(path);
        check_stored_equals_dense(w, static_cast<DType>(type));

        // Mapped rows hold the file: the transformer outlives every other reference to its weights.
        std::weak_ptr<const Weights> watch = w;
        Transformer t = [&] {
            std::shared_ptr<const Weights> only = open_or_die(path);
            watch = only;
            return load_or_die(only, 1, true);
        }();
        QVERIFY(!watch.expired());
        const std::vector<float> logits = test::all_logits(t, test::cycle_tokens(40, 3), true);
        QCOMPARE(logits.size(), size_t{3 * 40});
        // What it holds is what the file stores: the matrices' stored bytes, the norms as float32.
        uint64_t stored = 0;
        for (size_t i = 0; i < w->n_tensors(); ++i) stored += w->stored_bytes(i);
        QCOMPARE(t.loaded_weight_bytes(), stored);
        // mapped rows stay as the file lays them out; a copy of them (no owner) is the transformer's own and is
        // regrouped where the type regroups
        const auto down = static_cast<size_t>(w->index_of(TensorRole::FfnDown, 1));
        LoadTensorOptions mapped;
        mapped.owner = w;
        auto in_file = load_tensor(*w, down, mapped);
        QVERIFY(in_file);
        QVERIFY(!in_file->grouped);
        QCOMPARE(in_file->mapped, w.get());
        auto copied = load_tensor(*w, down, LoadTensorOptions{});
        QVERIFY(copied);
        QCOMPARE(copied->grouped, static_cast<DType>(type) == DType::Q4_0);
    }

    // Q8_0 / Q4_0 knots: each record runs from its inflated blocks (its payload, not a float32 copy).
    void knotRecordsRunStored_data() {
        QTest::addColumn<QString>("preset");
        QTest::addColumn<int>("type");
        QTest::newRow("q8_0") << "q8_0" << static_cast<int>(DType::Q8_0);
        QTest::newRow("q4_0") << "q4_0" << static_cast<int>(DType::Q4_0);
    }
    void knotRecordsRunStored() {
        QFETCH(QString, preset);
        QFETCH(int, type);
        test::TempDir dir;
        const std::string path = dir.file("tiny.gguf");
        auto m = test::make_tiny_model(test::tiny_config(false), 4);
        QVERIFY(write_gguf(path, m.config, m.tensors));
        auto model = ModelFile::open(path);
        QVERIFY(model);
        QuantizeOptions o;
        o.preset = preset.toStdString();
        o.n_threads = 1;
        const std::string knot = dir.file("tiny.knot");
        auto q = quantize_model(*model, o, knot);
        QVERIFY2(q, q.message().c_str());
        const std::shared_ptr<const Weights> w = open_or_die(knot);
        check_stored_equals_dense(w, static_cast<DType>(type));
        auto loaded = load_tensor(*w, static_cast<size_t>(w->index_of(TensorRole::FfnDown, 1)), true);
        QVERIFY(loaded);
        QVERIFY(loaded->dense.empty());
        QCOMPARE(loaded->stored.size(), *dtype_storage_bytes(static_cast<DType>(type), 64 * 96));
        // an inflated Q4_0 record is the transformer's own: regrouped eight rows at a time (the equal logits above
        // ran on it); a mapped model's rows never are
        QCOMPARE(loaded->grouped, static_cast<DType>(type) == DType::Q4_0);
    }
};

QTEST_GUILESS_MAIN(TestTransformerStored)
#include "test_transformer_stored.moc"
