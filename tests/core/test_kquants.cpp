// llama.cpp's Q4_1, Q5_0, Q5_1, Q2_K..Q6_K, Q8_K and IQ4_NL as rows of the type table: the quantizers give ggml's
// reference blocks byte for byte and the dequantizers ggml's floats bit for bit (fixtures made by ggml itself,
// tests/data/quants/README.md); round trips stay within error bounds; GGUF files holding these types read and
// convert to f32 through the table.
#include "gkq/convert.h"
#include "gkq/model_file.h"
#include "gkq/type_traits.h"
#include "test_support.h"

#include <QtTest>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

using namespace gkq;
using gkq::test::Bytes;
using gkq::test::TempDir;

Q_DECLARE_METATYPE(gkq::DType)

namespace {

const DType kTypes[] = {DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K,
                        DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K, DType::IQ4_NL};

std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string fixture_dir() {
    return std::string(GKQ_TEST_DATA_DIR) + "/quants";
}

// One <type>.bin fixture (format: tests/fixtures-tools/gen_quant_fixtures.c).
struct Fixture {
    uint32_t ggml_id = 0, rows = 0, row_len = 0, block_bytes = 0;
    std::vector<uint8_t> blocks;
    std::vector<float> dequantized;
};

bool load_fixture(DType t, Fixture& f, std::string& why) {
    const std::string path = fixture_dir() + "/" + std::string(dtype_name(t)) + ".bin";
    const std::vector<uint8_t> b = read_bytes(path);
    uint32_t h[6];
    if (b.size() < sizeof h) {
        why = path + ": missing or short";
        return false;
    }
    std::memcpy(h, b.data(), sizeof h);
    if (h[0] != 0x51514B47u || h[1] != 1) {
        why = path + ": not a version-1 GKQQ fixture";
        return false;
    }
    f.ggml_id = h[2];
    f.rows = h[3];
    f.row_len = h[4];
    f.block_bytes = h[5];
    const TypeTraits& tr = type_traits(t);
    const uint64_t n = uint64_t{f.rows} * f.row_len;
    const uint64_t n_block_bytes = n / static_cast<uint64_t>(tr.block_elements) * f.block_bytes;
    if (b.size() != sizeof h + n_block_bytes + n * 4) {
        why = path + ": size " + std::to_string(b.size()) + " does not match its header";
        return false;
    }
    f.blocks.assign(b.begin() + sizeof h, b.begin() + static_cast<std::ptrdiff_t>(sizeof h + n_block_bytes));
    f.dequantized.resize(n);
    std::memcpy(f.dequantized.data(), b.data() + sizeof h + n_block_bytes, n * 4);
    return true;
}

std::vector<float> fixture_inputs() {
    const std::vector<uint8_t> b = read_bytes(fixture_dir() + "/inputs.f32");
    std::vector<float> x(b.size() / 4);
    std::memcpy(x.data(), b.data(), x.size() * 4);
    return x;
}

std::vector<uint8_t> quantize(DType t, const std::vector<float>& x) {
    const TypeTraits& tr = type_traits(t);
    std::vector<uint8_t> out(*dtype_storage_bytes(t, x.size()), 0xA5);  // poison: every byte must be written
    tr.from_f32(x.data(), out.data(), static_cast<int64_t>(x.size()));
    return out;
}

std::vector<float> dequantize(DType t, const std::vector<uint8_t>& blocks, size_t n) {
    std::vector<float> y(n);
    type_traits(t).to_f32(blocks.data(), y.data(), static_cast<int64_t>(n));
    return y;
}

// Rows like a weight matrix's: Gaussian, with a few rows scaled up and a few outliers.
std::vector<float> weight_like(size_t rows, size_t cols, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    std::vector<float> x(rows * cols);
    for (size_t r = 0; r < rows; ++r)
        for (size_t c = 0; c < cols; ++c) x[r * cols + c] = normal(rng) * (r % 4 == 3 ? 5.0f : 1.0f);
    for (size_t i = 0; i < x.size(); i += 997) x[i] *= 8.0f;
    return x;
}

double rel_rms_error(const std::vector<float>& x, const std::vector<float>& y) {
    double num = 0, den = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        num += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
        den += double(x[i]) * x[i];
    }
    return std::sqrt(num / den);
}

void put_str(Bytes& b, std::string_view s) {
    b.u64(s.size());
    b.raw(s);
}

}  // namespace

class TestKQuants : public QObject {
    Q_OBJECT
private slots:
    void typeRows_data() {
        QTest::addColumn<DType>("type");
        QTest::addColumn<int>("ggmlId");
        QTest::addColumn<int>("elements");
        QTest::addColumn<int>("bytes");
        // ggml-common.h's block structs, written out here on purpose: the table must agree with them
        QTest::newRow("q4_1") << DType::Q4_1 << 3 << 32 << 20;
        QTest::newRow("q5_0") << DType::Q5_0 << 6 << 32 << 22;
        QTest::newRow("q5_1") << DType::Q5_1 << 7 << 32 << 24;
        QTest::newRow("q2_k") << DType::Q2_K << 10 << 256 << 84;
        QTest::newRow("q3_k") << DType::Q3_K << 11 << 256 << 110;
        QTest::newRow("q4_k") << DType::Q4_K << 12 << 256 << 144;
        QTest::newRow("q5_k") << DType::Q5_K << 13 << 256 << 176;
        QTest::newRow("q6_k") << DType::Q6_K << 14 << 256 << 210;
        QTest::newRow("q8_k") << DType::Q8_K << 15 << 256 << 292;
        QTest::newRow("iq4_nl") << DType::IQ4_NL << 20 << 32 << 18;
    }
    void typeRows() {
        QFETCH(DType, type);
        QFETCH(int, ggmlId);
        QFETCH(int, elements);
        QFETCH(int, bytes);
        const TypeTraits& tr = type_traits(type);
        QCOMPARE(tr.dtype, type);
        QCOMPARE(tr.ggml_id, ggmlId);
        QCOMPARE(tr.block_elements, int64_t{elements});
        QCOMPARE(tr.block_bytes, uint64_t(bytes));
        QCOMPARE(type_traits_for_ggml_id(uint32_t(ggmlId)), &tr);
        QVERIFY(tr.to_f32 != nullptr && tr.from_f32 != nullptr);
        QVERIFY(dtype_is_float_convertible(type));
        QVERIFY(!dtype_storage_bytes(type, uint64_t(elements) + 1));
    }

    // ggml's reference quantizer on the fixture rows (all rows in one call, as the generator made them).
    void blocksMatchGgml_data() {
        QTest::addColumn<DType>("type");
        for (DType t : kTypes) QTest::newRow(std::string(dtype_name(t)).c_str()) << t;
    }
    void blocksMatchGgml() {
        QFETCH(DType, type);
        Fixture f;
        std::string why;
        QVERIFY2(load_fixture(type, f, why), why.c_str());
        const TypeTraits& tr = type_traits(type);
        QCOMPARE(f.ggml_id, uint32_t(tr.ggml_id));
        QCOMPARE(uint64_t{f.block_bytes}, tr.block_bytes);
        const std::vector<float> x = fixture_inputs();
        QCOMPARE(x.size(), size_t{f.rows} * f.row_len);
        const std::vector<uint8_t> ours = quantize(type, x);
        QCOMPARE(ours.size(), f.blocks.size());
        for (size_t i = 0; i < ours.size(); ++i) {
            if (ours[i] == f.blocks[i]) continue;
            const size_t block = i / f.block_bytes;
            const size_t per_row = f.row_len / size_t(tr.block_elements);
            QFAIL(qPrintable(QStringLiteral("row %1 block %2 byte %3: ours 0x%4, ggml 0x%5")
                                 .arg(block / per_row)
                                 .arg(block % per_row)
                                 .arg(i % f.block_bytes)
                                 .arg(ours[i], 2, 16, QChar('0'))
                                 .arg(f.blocks[i], 2, 16, QChar('0'))));
        }
    }

    void dequantizeMatchesGgml_data() { blocksMatchGgml_data(); }
    void dequantizeMatchesGgml() {
        QFETCH(DType, type);
        Fixture f;
        std::string why;
        QVERIFY2(load_fixture(type, f, why), why.c_str());
        const std::vector<float> y = dequantize(type, f.blocks, f.dequantized.size());
        for (size_t i = 0; i < y.size(); ++i) {
            if (std::bit_cast<uint32_t>(y[i]) == std::bit_cast<uint32_t>(f.dequantized[i])) continue;
            QFAIL(qPrintable(QStringLiteral("value %1 (row %2): ours %3, ggml %4")
                                 .arg(i)
                                 .arg(i / f.row_len)
                                 .arg(double(y[i]), 0, 'g', 9)
                                 .arg(double(f.dequantized[i]), 0, 'g', 9)));
        }
    }

    // ggml_quantize_chunk with an importance vector (what llama-quantize does with an imatrix), row by row.
    void weightedBlocksMatchGgml_data() {
        QTest::addColumn<DType>("type");
        for (DType t : kTypes)
            if (t != DType::Q8_K) QTest::newRow(std::string(dtype_name(t)).c_str()) << t;
        QTest::newRow("q4_0") << DType::Q4_0;  // gkq's own Q4_0 row, weighted by ggml's quantize_row_q4_0_impl
    }
    void weightedBlocksMatchGgml() {
        QFETCH(DType, type);
        const TypeTraits& tr = type_traits(type);
        QVERIFY(tr.quantize_weighted != nullptr);
        const std::vector<float> x = fixture_inputs();
        const std::vector<uint8_t> imp_bytes = read_bytes(fixture_dir() + "/importance.f32");
        std::vector<float> importance(imp_bytes.size() / 4);
        std::memcpy(importance.data(), imp_bytes.data(), imp_bytes.size());
        const auto n_per_row = static_cast<int64_t>(importance.size());
        QVERIFY(n_per_row > 0 && x.size() % size_t(n_per_row) == 0);
        const std::vector<uint8_t> want = read_bytes(fixture_dir() + "/" + std::string(dtype_name(type)) + ".weighted");
        std::vector<uint8_t> ours(*dtype_storage_bytes(type, x.size()), 0xA5);
        QCOMPARE(ours.size(), want.size());
        tr.quantize_weighted(x.data(), ours.data(), int64_t(x.size()) / n_per_row, n_per_row, importance.data());
        for (size_t i = 0; i < ours.size(); ++i)
            if (ours[i] != want[i])
                QFAIL(qPrintable(QStringLiteral("byte %1 (block %2): ours 0x%3, ggml 0x%4")
                                     .arg(i)
                                     .arg(i / tr.block_bytes)
                                     .arg(ours[i], 2, 16, QChar('0'))
                                     .arg(want[i], 2, 16, QChar('0'))));
        // without importance: the reference quantizer, except IQ4_NL (its own fixture)
        std::vector<uint8_t> plain(ours.size(), 0xA5);
        tr.quantize_weighted(x.data(), plain.data(), int64_t(x.size()) / n_per_row, n_per_row, nullptr);
        if (type == DType::IQ4_NL) {
            QVERIFY(plain == read_bytes(fixture_dir() + "/iq4_nl.unweighted"));
            QVERIFY(plain != quantize(type, x));
        } else {
            QVERIFY(plain == quantize(type, x));
        }
    }

    // Importance does what it is for: the error weighted by importance drops against the unweighted quantizer.
    void importanceLowersWeightedError_data() { weightedBlocksMatchGgml_data(); }
    void importanceLowersWeightedError() {
        QFETCH(DType, type);
        const TypeTraits& tr = type_traits(type);
        const int64_t rows = 16, cols = 512;
        const std::vector<float> x = weight_like(size_t(rows), size_t(cols), 5);
        std::vector<float> importance(static_cast<size_t>(cols));
        std::mt19937 rng(3);
        std::lognormal_distribution<float> spread(0.0f, 1.5f);
        for (float& v : importance) v = spread(rng);
        auto weighted_error = [&](const std::vector<uint8_t>& blocks) {
            const std::vector<float> y = dequantize(type, blocks, x.size());
            double e = 0;
            for (size_t i = 0; i < x.size(); ++i) e += importance[i % size_t(cols)] * std::pow(double(x[i]) - y[i], 2);
            return e;
        };
        std::vector<uint8_t> with(*dtype_storage_bytes(type, x.size())), without(with.size());
        tr.quantize_weighted(x.data(), with.data(), rows, cols, importance.data());
        tr.quantize_weighted(x.data(), without.data(), rows, cols, nullptr);
        const double e_with = weighted_error(with), e_without = weighted_error(without);
        qInfo("%s: importance-weighted squared error %.4g with importance, %.4g without", dtype_name(type).data(),
              e_with, e_without);
        QVERIFY2(e_with < 0.9 * e_without, qPrintable(QString::number(e_with / e_without)));
    }

    // Relative RMS error of a round trip on weight-like rows, each type within its bound (measured: q2_k 0.297,
    // q3_k 0.153, q4_1 0.079, iq4_nl 0.079, q4_k 0.073, q5_0 0.044, q5_1 0.038, q5_k 0.037, q6_k 0.018, q8_k 0.009).
    void roundTripError_data() {
        QTest::addColumn<DType>("type");
        QTest::addColumn<double>("bound");
        QTest::newRow("q2_k") << DType::Q2_K << 0.36;
        QTest::newRow("q3_k") << DType::Q3_K << 0.19;
        QTest::newRow("q4_1") << DType::Q4_1 << 0.10;
        QTest::newRow("iq4_nl") << DType::IQ4_NL << 0.10;
        QTest::newRow("q4_k") << DType::Q4_K << 0.09;
        QTest::newRow("q5_0") << DType::Q5_0 << 0.055;
        QTest::newRow("q5_1") << DType::Q5_1 << 0.047;
        QTest::newRow("q5_k") << DType::Q5_K << 0.046;
        QTest::newRow("q6_k") << DType::Q6_K << 0.023;
        QTest::newRow("q8_k") << DType::Q8_K << 0.011;
    }
    void roundTripError() {
        QFETCH(DType, type);
        QFETCH(double, bound);
        const std::vector<float> x = weight_like(16, 512, 7);
        const std::vector<float> y = dequantize(type, quantize(type, x), x.size());
        const double err = rel_rms_error(x, y);
        qInfo("%s: relative RMS error %.5f (bound %.3f)", dtype_name(type).data(), err, bound);
        QVERIFY2(err < bound, qPrintable(QString::number(err)));
        QVERIFY(err > 0);
    }
    void moreBitsLessError() {
        const std::vector<float> x = weight_like(16, 512, 11);
        auto err = [&](DType t) { return rel_rms_error(x, dequantize(t, quantize(t, x), x.size())); };
        const DType k_family[] = {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K};
        for (size_t i = 1; i < std::size(k_family); ++i)
            QVERIFY2(err(k_family[i]) < err(k_family[i - 1]), dtype_name(k_family[i]).data());
        QVERIFY(err(DType::Q5_1) < err(DType::Q4_1));
        QVERIFY(err(DType::Q5_0) < err(DType::Q4_0));
        QVERIFY(err(DType::IQ4_NL) < err(DType::Q4_0));  // the non-linear code book fits Gaussian weights better
    }

    // dot_f32, the scalar reference: the dequantized values times the activations, summed in f32 in the
    // transformer's lane order (type_traits.h; this file builds with -ffp-contract=off, so the loop below is that
    // order exactly).
    void dotIsTheScalarReference_data() { blocksMatchGgml_data(); }
    void dotIsTheScalarReference() {
        QFETCH(DType, type);
        const TypeTraits& tr = type_traits(type);
        QVERIFY(tr.dot_f32 != nullptr);
        const std::vector<float> w = weight_like(2, 512, 13);
        const std::vector<float> act = weight_like(1, 1024, 17);
        const std::vector<uint8_t> blocks = quantize(type, w);
        const std::vector<float> v = dequantize(type, blocks, w.size());
        float lane[8] = {};
        double exact = 0, magnitude = 0;
        for (size_t i = 0; i < v.size(); ++i) {  // 1024 values: no tail
            lane[i % 8] += v[i] * act[i];
            exact += double(v[i]) * act[i];
            magnitude += std::fabs(double(v[i]) * act[i]);
        }
        const float want = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
        std::vector<uint8_t> odd(blocks.size() + 1);  // at an odd address: blocks need no alignment
        std::memcpy(odd.data() + 1, blocks.data(), blocks.size());
        const float got = tr.dot_f32(odd.data() + 1, act.data(), int64_t(w.size()));
        QCOMPARE(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want));
        QVERIFY(std::fabs(got - exact) <= 1e-5 * magnitude);
    }

    // A zero row comes back as zeros (-0 where d = 0 meets a negative code, as in ggml), and so does the row whose
    // largest magnitude is below ggml's group epsilon of 1e-15.
    void zerosStayZero_data() { blocksMatchGgml_data(); }
    void zerosStayZero() {
        QFETCH(DType, type);
        for (float fill : {0.0f, 1e-16f}) {
            const std::vector<float> x(512, fill);
            const std::vector<float> y = dequantize(type, quantize(type, x), x.size());
            for (float v : y)
                QVERIFY2(v == 0.0f || (fill != 0 && std::fabs(v - fill) <= fill),
                         qPrintable(QString::number(double(v))));
        }
    }

    // A GGUF file whose tensors hold these types (the fixture blocks) opens as data, and tensor_to_f32 converts each
    // through its table row to ggml's floats.
    void ggufTensorsConvertThroughTheTable() {
        TempDir dir;
        const std::string path = dir.file("kquants.gguf");
        Bytes b;
        std::vector<uint8_t> data;
        std::vector<Fixture> fixtures;
        std::vector<uint64_t> offsets;
        for (DType t : kTypes) {
            Fixture f;
            std::string why;
            QVERIFY2(load_fixture(t, f, why), why.c_str());
            while (data.size() % 32) data.push_back(0);
            offsets.push_back(data.size());
            data.insert(data.end(), f.blocks.begin(), f.blocks.end());
            fixtures.push_back(std::move(f));
        }
        b.raw("GGUF", 4).u32(3).u64(std::size(kTypes)).u64(1);
        put_str(b, "general.architecture");
        b.u32(8);
        put_str(b, "llama");
        for (size_t i = 0; i < std::size(kTypes); ++i) {
            put_str(b, "t." + std::string(dtype_name(kTypes[i])));
            b.u32(2).u64(fixtures[i].row_len).u64(fixtures[i].rows);
            b.u32(uint32_t(type_traits(kTypes[i]).ggml_id)).u64(offsets[i]);
        }
        b.pad_to(32);
        b.raw(data.data(), data.size());
        gkq::test::write_file(path, b.vec());

        auto m = ModelFile::open(path);
        QVERIFY2(m.is_ok(), m.message().c_str());
        for (size_t i = 0; i < std::size(kTypes); ++i) {
            const std::string name = "t." + std::string(dtype_name(kTypes[i]));
            const Tensor* t = m->find(name);
            QVERIFY2(t != nullptr, name.c_str());
            QCOMPARE(t->dtype, kTypes[i]);
            QCOMPARE(t->type_name, std::string(type_traits(kTypes[i]).ggml_name));
            QCOMPARE(t->shape, (std::vector<int64_t>{int64_t(fixtures[i].rows), int64_t(fixtures[i].row_len)}));
            QCOMPARE(t->n_bytes, uint64_t(fixtures[i].blocks.size()));
            auto v = tensor_to_f32(*t);
            QVERIFY2(v.is_ok(), v.message().c_str());
            QCOMPARE(v->size(), fixtures[i].dequantized.size());
            QVERIFY2(std::memcmp(v->data(), fixtures[i].dequantized.data(), v->size() * 4) == 0, name.c_str());
        }
    }

    // A GGUF row that is not whole blocks is refused, naming the tensor and the block size.
    void ggufPartialBlockRefused() {
        TempDir dir;
        const std::string path = dir.file("bad.gguf");
        Bytes b;
        b.raw("GGUF", 4).u32(3).u64(1).u64(1);
        put_str(b, "general.architecture");
        b.u32(8);
        put_str(b, "llama");
        put_str(b, "t.q6_k");
        b.u32(2).u64(128).u64(2).u32(14).u64(0);  // Q6_K rows of 128 values: half a super-block
        b.pad_to(32);
        const std::vector<uint8_t> data(210, 0);
        b.raw(data.data(), data.size());
        gkq::test::write_file(path, b.vec());
        auto m = ModelFile::open(path);
        QVERIFY(!m.is_ok());
        QVERIFY2(m.message().find("t.q6_k") != std::string::npos, m.message().c_str());
        QVERIFY2(m.message().find("Q6_K block size 256") != std::string::npos, m.message().c_str());
    }
};

QTEST_GUILESS_MAIN(TestKQuants)
#include "test_kquants.moc"
