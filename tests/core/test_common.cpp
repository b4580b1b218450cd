// Shared core pieces: bounds-checked byte reading, UTF-8 validation, tensor naming, metadata, atomic writes.
#include "common/byte_reader.h"
#include "gkq/atomic_file.h"
#include "gkq/metadata.h"
#include "gkq/naming.h"
#include "test_support.h"

#include <QtTest>
#include <filesystem>

using namespace gkq;

class TestCommon : public QObject {
    Q_OBJECT
private slots:
    void byteReaderReadsAndStopsAtEnd() {
        test::Bytes b;
        b.u32(7).u64(0x1122334455667788ull).u8(9);
        ByteReader r(b.vec().data(), b.size(), "x.bin");
        uint32_t a = 0;
        uint64_t c = 0;
        uint8_t d = 0;
        QVERIFY(r.read(a, "a") && r.read(c, "c") && r.read(d, "d"));
        QCOMPARE(a, 7u);
        QCOMPARE(c, 0x1122334455667788ull);
        QCOMPARE(r.remaining(), uint64_t(0));
        uint32_t e = 0;
        QVERIFY(!r.read(e, "field e"));
        QCOMPARE(QString::fromStdString(r.status().message()),
                 QStringLiteral("x.bin: field e at offset 13: needs 4 bytes but the file ends after 0 (truncated?)"));
        QCOMPARE(r.status().code(), StatusCode::Corrupt);
        // the first error sticks
        QVERIFY(!r.skip(1, "other"));
        QVERIFY(r.status().message().find("field e") != std::string::npos);
    }

    void byteReaderRejectsOversizedString() {
        test::Bytes b;
        b.u64(1000).raw("abc");
        ByteReader r(b.vec().data(), b.size(), "k.gguf");
        std::string s;
        QVERIFY(!r.read_string_u64(s, "key"));
        QVERIFY(r.status().message().find("string length 1000 exceeds the 3 bytes left") != std::string::npos);
    }

    void checkedArithmetic() {
        uint64_t out = 0;
        QVERIFY(checked_mul(1ull << 32, 1ull << 31, out));
        QCOMPARE(out, 1ull << 63);
        QVERIFY(!checked_mul(1ull << 32, 1ull << 32, out));
        QVERIFY(!checked_add(UINT64_MAX, 1, out));
        QVERIFY(range_in_file(10, 5, 15));
        QVERIFY(!range_in_file(10, 6, 15));
        QVERIFY(!range_in_file(16, 0, 15));
        QVERIFY(!range_in_file(1, UINT64_MAX, 15));
    }

    void utf8Validation_data() {
        QTest::addColumn<QByteArray>("bytes");
        QTest::addColumn<bool>("valid");
        QTest::newRow("ascii") << QByteArray("blk.0.attn_q.weight") << true;
        QTest::newRow("two-byte") << QByteArray("\xC3\xA9") << true;
        QTest::newRow("four-byte") << QByteArray("\xF0\x9F\x98\x80") << true;
        QTest::newRow("lone continuation") << QByteArray("\x80") << false;
        QTest::newRow("overlong slash") << QByteArray("\xC0\xAF") << false;
        QTest::newRow("surrogate") << QByteArray("\xED\xA0\x80") << false;
        QTest::newRow("truncated") << QByteArray("\xE2\x82") << false;
        QTest::newRow("above U+10FFFF") << QByteArray("\xF4\x90\x80\x80") << false;
        QTest::newRow("0xFF") << QByteArray("a\xFFz") << false;
    }
    void utf8Validation() {
        QFETCH(QByteArray, bytes);
        QFETCH(bool, valid);
        QCOMPARE(is_valid_utf8(std::string_view(bytes.constData(), static_cast<size_t>(bytes.size()))), valid);
    }

    void namingRoundTrips() {
        const TensorRole roles[] = {TensorRole::AttnQ,   TensorRole::AttnK,    TensorRole::AttnV,
                                    TensorRole::AttnO,   TensorRole::FfnGate,  TensorRole::FfnUp,
                                    TensorRole::FfnDown, TensorRole::AttnNorm, TensorRole::FfnNorm};
        for (TensorRole r : roles) {
            for (int layer : {0, 7, 31}) {
                auto h = parse_hf_name(hf_name(r, layer));
                QCOMPARE(int(h.role), int(r));
                QCOMPARE(h.layer, layer);
                auto g = parse_gguf_name(gguf_name(r, layer));
                QCOMPARE(int(g.role), int(r));
                QCOMPARE(g.layer, layer);
            }
        }
        QCOMPARE(QString::fromStdString(hf_name(TensorRole::FfnDown, 3)),
                 QStringLiteral("model.layers.3.mlp.down_proj.weight"));
        QCOMPARE(QString::fromStdString(gguf_name(TensorRole::AttnO, 12)), QStringLiteral("blk.12.attn_output.weight"));
        QCOMPARE(int(parse_hf_name("lm_head.weight").role), int(TensorRole::Output));
        QCOMPARE(int(parse_gguf_name("token_embd.weight").role), int(TensorRole::TokenEmbd));
        QCOMPARE(int(parse_gguf_name("output_norm.weight").role), int(TensorRole::OutputNorm));
        // unknown names inside a block keep their layer; malformed layer numbers do not parse
        auto rb = parse_hf_name("model.layers.2.self_attn.rotary_emb.inv_freq");
        QCOMPARE(int(rb.role), int(TensorRole::Other));
        QCOMPARE(rb.layer, 2);
        QCOMPARE(parse_gguf_name("blk.x.attn_q.weight").layer, -1);
        QCOMPARE(parse_gguf_name("blk..attn_q.weight").layer, -1);
        QCOMPARE(parse_gguf_name("blk.-1.attn_q.weight").layer, -1);
        QCOMPARE(role_name(TensorRole::FfnGate), std::string_view("ffn_gate"));
        QCOMPARE(int(role_from_name("attn_o")), int(TensorRole::AttnO));
    }

    void metadataAccessors() {
        Metadata m;
        m.set("a", MetaValue::of_uint(32, MetaType::U32));
        m.set("b", MetaValue::of_string("llama"));
        m.set("a", MetaValue::of_int(-5));
        QCOMPARE(m.entries.size(), size_t(2));
        QCOMPARE(*m.find("a")->as_int(), int64_t(-5));
        QCOMPARE(*m.find("b")->as_string(), std::string("llama"));
        QVERIFY(!m.find("b")->as_int());
        QVERIFY(!m.find("zzz"));
        QVERIFY(!MetaValue::of_uint(UINT64_MAX).as_int());
        MetaValue arr;
        arr.type = MetaType::Array;
        arr.array_type = MetaType::I32;
        for (int i = 0; i < 10; ++i) arr.array.push_back(MetaValue::of_int(i));
        QCOMPARE(QString::fromStdString(arr.to_display(3)), QStringLiteral("[0, 1, 2, ...] (10 x i32)"));
        QCOMPARE(QString::fromStdString(MetaValue::of_string("a\nb").to_display()), QStringLiteral("\"a\\x0ab\""));
    }

    void atomicFileCommitsOrLeavesNothing() {
        test::TempDir dir;
        const std::string target = dir.file("out.bin");
        {
            auto f = AtomicFile::create(target);
            QVERIFY(f.is_ok());
            QVERIFY(f->write("partial").is_ok());
            // destroyed without commit: neither the target nor a temporary may remain
        }
        QVERIFY(!std::filesystem::exists(target));
        QCOMPARE(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 0);
        {
            auto f = AtomicFile::create(target);
            QVERIFY(f->write("hello").is_ok());
            QVERIFY(f->write_zeros(3).is_ok());
            QCOMPARE(f->bytes_written(), uint64_t(8));
            QVERIFY(f->commit().is_ok());
        }
        auto bytes = test::read_file(target);
        QCOMPARE(bytes.size(), size_t(8));
        QCOMPARE(std::string(bytes.begin(), bytes.begin() + 5), std::string("hello"));
        QCOMPARE(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
        // overwrite keeps the old content until the rename
        QVERIFY(write_file_atomic(target, "new").is_ok());
        QCOMPARE(test::read_file(target).size(), size_t(3));
    }

    void atomicFileReportsUnwritableFolder() {
        auto f = AtomicFile::create("/nonexistent-folder-gkq/x.knot");
        QVERIFY(!f.is_ok());
        QCOMPARE(f.status().code(), StatusCode::IoError);
        QVERIFY(f.message().find("/nonexistent-folder-gkq/x.knot") != std::string::npos);
    }
};

QTEST_APPLESS_MAIN(TestCommon)
#include "test_common.moc"
