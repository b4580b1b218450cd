// Exact storage conversions: f16, bf16 and llama.cpp's Q8_0 / Q4_0 blocks.
#include "gkq/convert.h"
#include "gkq/tensor.h"
#include "gkq/type_traits.h"
#include "test_support.h"

#include <QtTest>
#include <bit>
#include <cmath>
#include <cstring>
#include <set>
#include <string>

using namespace gkq;

class TestConvert : public QObject {
    Q_OBJECT
private slots:
    void f16KnownValues_data() {
        QTest::addColumn<float>("value");
        QTest::addColumn<int>("bits");
        QTest::newRow("one") << 1.0f << 0x3C00;
        QTest::newRow("minus two") << -2.0f << 0xC000;
        QTest::newRow("max") << 65504.0f << 0x7BFF;
        QTest::newRow("rounds to max") << 65519.0f << 0x7BFF;
        QTest::newRow("rounds to inf") << 65520.0f << 0x7C00;
        QTest::newRow("smallest subnormal") << std::ldexp(1.0f, -24) << 0x0001;
        QTest::newRow("half of smallest: tie to even zero") << std::ldexp(1.0f, -25) << 0x0000;
        QTest::newRow("0.75 of smallest rounds up") << std::ldexp(3.0f, -26) << 0x0001;
        QTest::newRow("1.5 of smallest: tie to even 2") << std::ldexp(3.0f, -25) << 0x0002;
        QTest::newRow("smallest normal") << std::ldexp(1.0f, -14) << 0x0400;
        QTest::newRow("tie to even (down)") << (1.0f + std::ldexp(1.0f, -11)) << 0x3C00;
        QTest::newRow("tie to even (up)") << (1.0f + 3 * std::ldexp(1.0f, -11)) << 0x3C02;
        QTest::newRow("negative zero") << -0.0f << 0x8000;
        QTest::newRow("-inf") << -INFINITY << 0xFC00;
    }
    void f16KnownValues() {
        QFETCH(float, value);
        QFETCH(int, bits);
        QCOMPARE(int(f32_to_f16(value)), bits);
    }

    void f16EveryPatternRoundTrips() {
        for (uint32_t h = 0; h < 0x10000; ++h) {
            const float f = f16_to_f32(static_cast<uint16_t>(h));
            if (std::isnan(f)) {
                QVERIFY(std::isnan(f16_to_f32(f32_to_f16(f))));
                continue;
            }
            if (f32_to_f16(f) != h) QFAIL(qPrintable(QString("pattern 0x%1").arg(h, 4, 16, QChar('0'))));
        }
        QCOMPARE(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
        QCOMPARE(f16_to_f32(0x03FF), std::ldexp(1023.0f, -24));
        QCOMPARE(f16_to_f32(0x3555), 0.333251953125f);
    }

    void bf16RoundsToNearestEven() {
        QCOMPARE(int(f32_to_bf16(1.0f)), 0x3F80);
        QCOMPARE(int(f32_to_bf16(std::bit_cast<float>(0x3F808000u))), 0x3F80);  // tie, even stays
        QCOMPARE(int(f32_to_bf16(std::bit_cast<float>(0x3F818000u))), 0x3F82);  // tie, odd rounds up
        QCOMPARE(int(f32_to_bf16(std::bit_cast<float>(0x3F808001u))), 0x3F81);
        QVERIFY(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
        QCOMPARE(bf16_to_f32(0x4049), 3.140625f);
        for (uint32_t b = 0; b < 0x10000; ++b) {
            float f = bf16_to_f32(static_cast<uint16_t>(b));
            if (!std::isnan(f) && f32_to_bf16(f) != b) QFAIL("bf16 pattern does not round trip");
        }
    }

    void q8_0DequantizesHandMadeBlock() {
        uint8_t blk[34];
        const uint16_t d = 0x3800;  // 0.5
        std::memcpy(blk, &d, 2);
        for (int j = 0; j < 32; ++j) blk[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j * 8 - 128));
        float out[32];
        QVERIFY(convert_to_f32(DType::Q8_0, blk, 32, out).is_ok());
        for (int j = 0; j < 32; ++j) QCOMPARE(out[j], 0.5f * float(j * 8 - 128));
    }

    void q4_0DequantizesHandMadeBlock() {
        uint8_t blk[18];
        const uint16_t d = 0x4000;  // 2.0
        std::memcpy(blk, &d, 2);
        for (int j = 0; j < 16; ++j) blk[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
        float out[32];
        QVERIFY(convert_to_f32(DType::Q4_0, blk, 32, out).is_ok());
        for (int j = 0; j < 16; ++j) {
            QCOMPARE(out[j], 2.0f * float(j - 8));
            QCOMPARE(out[j + 16], 2.0f * float(7 - j));
        }
    }

    void q8_0QuantizesLikeLlamaCpp() {
        // x = j - 16: amax 16, d = 16/127, codes round(x * 127/16)
        float x[32];
        for (int j = 0; j < 32; ++j) x[j] = float(j - 16);
        uint8_t blk[34];
        quantize_q8_0(x, 32, blk);
        uint16_t d;
        std::memcpy(&d, blk, 2);
        QCOMPARE(int(d), int(f32_to_f16(16.0f / 127.0f)));
        QCOMPARE(int(static_cast<int8_t>(blk[2 + 0])), -127);  // -16 * 127/16
        QCOMPARE(int(static_cast<int8_t>(blk[2 + 16])), 0);
        QCOMPARE(int(static_cast<int8_t>(blk[2 + 17])), 8);    // 1 * 7.9375 = 7.94 -> 8
        QCOMPARE(int(static_cast<int8_t>(blk[2 + 31])), 119);  // 15 * 7.9375 = 119.06 -> 119
        // all-zero block: scale 0, codes 0
        float z[32] = {};
        quantize_q8_0(z, 32, blk);
        for (uint8_t b : blk) QCOMPARE(int(b), 0);
    }

    void q4_0QuantizesLikeLlamaCpp() {
        // x = j - 16: the largest magnitude is -16, so d = -16 / -8 = 2 and codes = trunc(x/2 + 8.5) capped at 15
        float x[32];
        for (int j = 0; j < 32; ++j) x[j] = float(j - 16);
        uint8_t blk[18];
        quantize_q4_0(x, 32, blk);
        uint16_t d;
        std::memcpy(&d, blk, 2);
        QCOMPARE(int(d), 0x4000);
        for (int j = 0; j < 16; ++j) {
            const int lo = (j + 1) / 2;                    // x = j - 16  ->  j/2 + 0.5
            const int hi = std::min(15, 8 + (j + 1) / 2);  // x = j       ->  j/2 + 8.5
            QCOMPARE(int(blk[2 + j] & 0x0F), lo);
            QCOMPARE(int(blk[2 + j] >> 4), hi);
        }
    }

    void quantizedRoundTripErrorIsBounded() {
        auto x = test::random_floats(32 * 64, 7, 0.5f);
        std::vector<uint8_t> q8(34 * 64), q4(18 * 64);
        std::vector<float> y8(x.size()), y4(x.size());
        quantize_q8_0(x.data(), x.size(), q8.data());
        quantize_q4_0(x.data(), x.size(), q4.data());
        QVERIFY(convert_to_f32(DType::Q8_0, q8.data(), x.size(), y8.data()).is_ok());
        QVERIFY(convert_to_f32(DType::Q4_0, q4.data(), x.size(), y4.data()).is_ok());
        for (size_t b = 0; b < 64; ++b) {
            float amax = 0;
            for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
            for (int j = 0; j < 32; ++j) {
                const size_t i = b * 32 + j;
                // half a step of each grid, plus the f16 rounding of the scale
                QVERIFY(std::fabs(y8[i] - x[i]) <= amax / 127.0f * 0.5f + amax * 1e-3f);
                QVERIFY(std::fabs(y4[i] - x[i]) <= amax / 8.0f * 1.0f + amax * 1e-3f);
            }
        }
    }

    void tensorToF32ChecksSizes() {
        float v[4] = {1, 2, 3, 4};
        Tensor t;
        t.name = "w";
        t.shape = {2, 2};
        t.dtype = DType::F32;
        t.type_name = "F32";
        t.data = reinterpret_cast<const uint8_t*>(v);
        t.n_bytes = 16;
        auto r = tensor_to_f32(t);
        QVERIFY(r.is_ok());
        QCOMPARE((*r)[3], 4.0f);
        t.n_bytes = 12;
        auto bad = tensor_to_f32(t);
        QVERIFY(!bad.is_ok());
        QCOMPARE(QString::fromStdString(bad.message()),
                 QStringLiteral("tensor 'w': data size 12 does not fit its shape 2 x 2 and type F32"));
        t.dtype = DType::Other;
        t.type_name = "IQ2_XXS";
        QCOMPARE(tensor_to_f32(t).status().code(), StatusCode::Unsupported);
        QCOMPARE(convert_to_f32(DType::Q8_0, v, 31, nullptr).code(), StatusCode::InvalidArgument);
    }

    void q8gUsesGroupScales() {
        int8_t codes[8] = {1, -2, 3, -4, 5, 6, 7, -128};
        float scales[2] = {0.5f, 0.25f};
        Tensor t;
        t.name = "q";
        t.shape = {8};
        t.dtype = DType::Q8_G;
        t.type_name = "q8_g4";
        t.data = reinterpret_cast<const uint8_t*>(codes);
        t.n_bytes = 8;
        t.scales = reinterpret_cast<const uint8_t*>(scales);
        t.n_scale_bytes = 8;
        t.group_size = 4;
        auto r = tensor_to_f32(t);
        QVERIFY(r.is_ok());
        const float want[8] = {0.5f, -1.0f, 1.5f, -2.0f, 1.25f, 1.5f, 1.75f, -32.0f};
        for (int i = 0; i < 8; ++i) QCOMPARE((*r)[i], want[i]);
        t.group_size = 3;
        QCOMPARE(tensor_to_f32(t).status().code(), StatusCode::Corrupt);
    }

    // ---- the type table ----

    void typeTableHasOneRowPerType() {
        const DType all[] = {DType::F32,  DType::F16,  DType::BF16, DType::F64,    DType::I8,   DType::U8,
                             DType::I16,  DType::I32,  DType::I64,  DType::Q8_0,   DType::Q4_0, DType::Q8_G,
                             DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K,   DType::Q3_K, DType::Q4_K,
                             DType::Q5_K, DType::Q6_K, DType::Q8_K, DType::IQ4_NL, DType::Other};
        for (DType t : all) {
            QCOMPARE(type_traits(t).dtype, t);
            QCOMPARE(type_traits(t).name, dtype_name(t));
        }
        // llama.cpp's layouts, written out here on purpose: the table must agree with them
        QCOMPARE(type_traits(DType::Q8_0).block_elements, int64_t{32});
        QCOMPARE(type_traits(DType::Q8_0).block_bytes, uint64_t{34});
        QCOMPARE(type_traits(DType::Q4_0).block_elements, int64_t{32});
        QCOMPARE(type_traits(DType::Q4_0).block_bytes, uint64_t{18});
        QCOMPARE(*dtype_storage_bytes(DType::Q8_0, 64), uint64_t{68});
        QCOMPARE(*dtype_storage_bytes(DType::Q4_0, 96), uint64_t{54});
        QVERIFY(!dtype_storage_bytes(DType::Q4_0, 33));
        QVERIFY(!dtype_storage_bytes(DType::Other, 1));
        QCOMPARE(*dtype_storage_bytes(DType::BF16, 3), uint64_t{6});

        // every ggml type a file may hold, once, with ggml.h's ids (4, 5, 31..33 and 36..38 are not valid in files)
        std::set<int32_t> ids;
        std::set<std::string_view> names;
        for (const TypeTraits& t : type_table()) {
            QVERIFY(t.block_elements >= 1);
            if (t.ggml_id < 0) continue;
            QVERIFY2(ids.insert(t.ggml_id).second, t.ggml_name.data());
            QVERIFY(names.insert(t.ggml_name).second);
            QCOMPARE(type_traits_for_ggml_id(static_cast<uint32_t>(t.ggml_id)), &t);
            QVERIFY(t.block_bytes > 0);
        }
        QCOMPARE(ids.size(), size_t{32});
        for (uint32_t removed : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u})
            QVERIFY(type_traits_for_ggml_id(removed) == nullptr);
        const TypeTraits* q4_k = type_traits_for_ggml_id(12);
        QVERIFY(q4_k != nullptr);
        QCOMPARE(q4_k->ggml_name, std::string_view("Q4_K"));
        QCOMPARE(q4_k->name, std::string_view("q4_k"));
        QCOMPARE(q4_k->block_elements, int64_t{256});
        QCOMPARE(q4_k->block_bytes, uint64_t{144});
        QCOMPARE(q4_k->dtype, DType::Q4_K);  // converted (test_kquants)
        const TypeTraits* iq2_xxs = type_traits_for_ggml_id(16);
        QVERIFY(iq2_xxs != nullptr);
        QCOMPARE(iq2_xxs->ggml_name, std::string_view("IQ2_XXS"));
        QCOMPARE(iq2_xxs->block_bytes, uint64_t{66});
        QCOMPARE(iq2_xxs->dtype, DType::Other);
        QVERIFY(iq2_xxs->to_f32 == nullptr && iq2_xxs->from_f32 == nullptr && iq2_xxs->dot_f32 == nullptr);
        QCOMPARE(type_traits_for_ggml_id(30)->dtype, DType::BF16);
        QCOMPARE(type_traits_for_ggml_id(39)->block_bytes, uint64_t{17});  // MXFP4
    }

    // The table's functions are the conversions: to_f32 == convert_to_f32, from_f32 == the encoders, bit for bit.
    void rowFunctionsAreTheConversions() {
        const int64_t n = 32 * 5;
        const std::vector<float> x = test::random_floats(static_cast<size_t>(n), 11, 3.0f);
        for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
            const TypeTraits& tt = type_traits(t);
            QVERIFY(tt.to_f32 && tt.from_f32 && tt.dot_f32);
            const size_t bytes = *dtype_storage_bytes(t, static_cast<uint64_t>(n));
            std::vector<uint8_t> stored(bytes + 1);  // + 1: write at an odd address
            uint8_t* at = stored.data() + 1;
            tt.from_f32(x.data(), at, n);
            std::vector<uint8_t> want(bytes);
            if (t == DType::F32) std::memcpy(want.data(), x.data(), bytes);
            if (t == DType::Q8_0) quantize_q8_0(x.data(), static_cast<uint64_t>(n), want.data());
            if (t == DType::Q4_0) quantize_q4_0(x.data(), static_cast<uint64_t>(n), want.data());
            if (t == DType::F16 || t == DType::BF16) {
                std::vector<uint16_t> h(static_cast<size_t>(n));
                (t == DType::F16 ? encode_f16 : encode_bf16)(x.data(), static_cast<uint64_t>(n), h.data());
                std::memcpy(want.data(), h.data(), bytes);
            }
            QVERIFY2(std::memcmp(at, want.data(), bytes) == 0, tt.name.data());
            std::vector<float> got(static_cast<size_t>(n)), ref(static_cast<size_t>(n));
            tt.to_f32(at, got.data(), n);
            QVERIFY(convert_to_f32(t, at, static_cast<uint64_t>(n), ref.data()).is_ok());
            QVERIFY2(std::memcmp(got.data(), ref.data(), got.size() * 4) == 0, tt.name.data());
        }
        const double v[2] = {1.5, -1e300};
        float f[2];
        type_traits(DType::F64).to_f32(v, f, 2);
        QCOMPARE(f[0], 1.5f);
        QVERIFY(std::isinf(f[1]) && f[1] < 0);
        QVERIFY(type_traits(DType::F64).from_f32 == nullptr);
        for (DType t : {DType::I8, DType::U8, DType::I16, DType::I32, DType::I64, DType::Q8_G, DType::Other})
            QVERIFY(type_traits(t).to_f32 == nullptr && type_traits(t).dot_f32 == nullptr);
        QVERIFY(dtype_is_float_convertible(DType::Q8_G));  // with its group scales (tensor_to_f32)
        QVERIFY(!dtype_is_float_convertible(DType::I32));
        QCOMPARE(convert_to_f32(DType::Q8_G, x.data(), 4, nullptr).code(), StatusCode::Unsupported);
        QCOMPARE(QString::fromStdString(convert_to_f32(DType::Q4_0, x.data(), 31, nullptr).message()),
                 QStringLiteral("q4_0: element count 31 is not a multiple of 32"));
    }

    // dot_f32 is the stored row converted to f32, times x, summed in f32 in the transformer's lane order (the scalar
    // reference): eight lane sums over j = k (mod 8) below n - n % 8, combined pairwise as type_traits.h says, then
    // the tail in order.
    void dotIsTheOrderedSumOfTheDecodedRow() {
        auto lane_order = [](const std::vector<float>& w, const float* x) {
            const size_t n8 = w.size() & ~size_t{7};
            float l[8] = {};
            for (size_t j = 0; j < n8; ++j) l[j % 8] += w[j] * x[j];
            float s = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
            for (size_t j = n8; j < w.size(); ++j) s += w[j] * x[j];
            return s;
        };
        for (int64_t n : {int64_t{32}, int64_t{96}, int64_t{160}}) {
            const std::vector<float> w = test::random_floats(static_cast<size_t>(n), 21, 2.0f);
            const std::vector<float> x = test::random_floats(static_cast<size_t>(n), 22, 1.0f);
            for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
                const TypeTraits& tt = type_traits(t);
                std::vector<uint8_t> stored(*dtype_storage_bytes(t, static_cast<uint64_t>(n)));
                tt.from_f32(w.data(), stored.data(), n);
                std::vector<float> decoded(static_cast<size_t>(n));
                tt.to_f32(stored.data(), decoded.data(), n);
                QCOMPARE(tt.dot_f32(stored.data(), x.data(), n), lane_order(decoded, x.data()));
            }
        }
        // a plain type need not be a whole number of its conversion chunks: 100 values
        const std::vector<float> w = test::random_floats(100, 23, 1.0f);
        const std::vector<float> x = test::random_floats(100, 24, 1.0f);
        QCOMPARE(type_traits(DType::F32).dot_f32(w.data(), x.data(), 100), lane_order(w, x.data()));
    }
};

QTEST_APPLESS_MAIN(TestConvert)
#include "test_convert.moc"
