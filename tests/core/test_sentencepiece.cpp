// Sentencepiece tokenizer.model files: the ids of models trained here by Debian's spm_train must be spm_encode's
// (unicode, byte fallback, leading and repeated spaces), but for the runs of unknown characters spm_encode fuses into
// one <unk>, which gkq does not fuse, as llama.cpp (see gkq/tokenizer.h); the shared llama2.c tok105.model must give
// the pieces and scores of the tok105.bin llama2.c exported from it; a handwritten model takes the special tokens and
// vocabulary size of its Hugging Face folder as convert_hf_to_gguf.py does; broken files fail naming the file
// and the offset.
#include "gkq/tokenizer.h"
#include "test_support.h"

#include <QProcess>
#include <QtTest>

#include <string>
#include <vector>

using namespace gkq;

namespace {

QString ids_text(const std::vector<int32_t>& ids) {
    QStringList s;
    for (int32_t i : ids) s << QString::number(i);
    return s.join(' ');
}

bool run(const QString& program, const QStringList& args, const QString& stdin_text, QString* out) {
    QProcess p;
    p.start(program, args);
    if (!p.waitForStarted(10000)) return false;
    p.write(stdin_text.toUtf8());
    p.closeWriteChannel();
    const bool ok = p.waitForFinished(120000) && p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0;
    *out = QString::fromUtf8(p.readAllStandardOutput());
    if (!ok) *out += QString::fromUtf8(p.readAllStandardError()).right(400);
    return ok;
}

// A small vocabulary: <unk>, <s>, </s>, the 256 byte tokens, then text pieces with scores.
std::vector<test::SpmProtoPiece> small_pieces() {
    std::vector<test::SpmProtoPiece> p = {{"<unk>", 0.0f, 2}, {"<s>", 0.0f, 3}, {"</s>", 0.0f, 3}};
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        p.push_back({name, 0.0f, 6});
    }
    const char* const text[] = {"\xE2\x96\x81", "h", "i", "\xE2\x96\x81h", "\xE2\x96\x81hi", "<extra>"};
    float score = -1.0f;
    for (const char* t : text) p.push_back({t, score--, 1});
    p.back().type = 4;  // <extra>: user-defined, which the converter makes normal
    return p;
}

}  // namespace

class TestSentencepiece : public QObject {
    Q_OBJECT

private slots:
    // Models spm_train makes (bpe, byte fallback, identity normalization) against spm_encode's ids.
    void spm_encode_ids_data() {
        QTest::addColumn<bool>("byte_fallback");
        QTest::addColumn<bool>("dummy_prefix");
        QTest::newRow("byte-fallback") << true << true;
        QTest::newRow("no-byte-fallback") << false << true;
        QTest::newRow("no-dummy-prefix") << true << false;
    }
    void spm_encode_ids() {
        QFETCH(bool, byte_fallback);
        QFETCH(bool, dummy_prefix);
        if (QStandardPaths::findExecutable("spm_train").isEmpty() ||
            QStandardPaths::findExecutable("spm_encode").isEmpty())
            QSKIP("spm_train/spm_encode are not installed (Debian package sentencepiece)");
        test::TempDir dir;
        // A corpus with repeated words (merges), accents and CJK (characters kept), rare symbols (dropped by
        // character_coverage, so byte fallback has work).
        std::string corpus;
        const char* const words[] = {"the",   "quick", "brown", "fox",         "jumps", "over",  "lazy", "dog",
                                     "café",  "naïve", "über",  "smörgåsbord", "日本",  "語",    "東京", "hello",
                                     "world", "token", "izer",  "sentence",    "piece", "llama", "2024", "42"};
        uint64_t x = 12345;
        for (int line = 0; line < 3000; ++line) {
            for (int w = 0; w < 9; ++w) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                corpus += words[x % (sizeof words / sizeof words[0])];
                corpus += (x >> 20) % 11 == 0 ? "  " : " ";
            }
            if (line % 500 == 0) corpus += "\xE2\x88\xAB\xF0\x9F\xA6\x99";  // ∫🦙, rare
            corpus += "\n";
        }
        test::write_file(dir.file("corpus.txt"), corpus);
        QString out;
        const QString prefix = QString::fromStdString(dir.file("m"));
        QVERIFY2(run("spm_train",
                     {"--input=" + QString::fromStdString(dir.file("corpus.txt")), "--model_prefix=" + prefix,
                      byte_fallback ? "--vocab_size=420" : "--vocab_size=200", "--model_type=bpe",
                      "--character_coverage=0.999", QString("--byte_fallback=") + (byte_fallback ? "true" : "false"),
                      "--normalization_rule_name=identity", "--remove_extra_whitespaces=false",
                      QString("--add_dummy_prefix=") + (dummy_prefix ? "true" : "false"), "--num_threads=1",
                      "--minloglevel=2"},
                     {}, &out),
                 qPrintable(out));
        // The folder's tokenizer.model, as Tokenizer::load finds it.
        QVERIFY(QFile::rename(prefix + ".model", QString::fromStdString(dir.file("tokenizer.model"))));
        auto tok = Tokenizer::load(dir.path());
        QVERIFY2(bool(tok), tok.message().c_str());
        QCOMPARE(int(tok->family()), int(TokenizerFamily::Spm));
        QCOMPARE(tok->has_byte_fallback(), byte_fallback);
        QCOMPARE(tok->add_space_prefix(), dummy_prefix);
        const QStringList texts = {"the quick brown fox",
                                   "Hello world",
                                   "   leading spaces and  two  inner",
                                   "trailing space ",
                                   "café naïve über smörgåsbord",
                                   "日本語 東京",
                                   "rare ∫ and 🦙 and Ω",
                                   "ZQXJ unseen capitals",
                                   "2024 42 1234567",
                                   "a"};
        QVERIFY2(
            run("spm_encode", {"--model=" + QString::fromStdString(dir.file("tokenizer.model")), "--output_format=id"},
                texts.join('\n') + "\n", &out),
            qPrintable(out));
        const QStringList lines = out.split('\n');
        QVERIFY(lines.size() >= texts.size());
        QStringList failed;
        int n_bytes = 0;
        int n_unknown = 0;
        int n_unfused = 0;  // <unk> after <unk>: what spm_encode fuses
        for (qsizetype i = 0; i < texts.size(); ++i) {
            std::vector<int32_t> got;
            for (int32_t id : tok->encode(texts[i].toStdString(), false, false)) {
                n_bytes += tok->piece(id).size() == 6 && tok->piece(id).rfind("<0x", 0) == 0;
                n_unknown += id == tok->unk_id();
                if (id == tok->unk_id() && !got.empty() && got.back() == id) {
                    ++n_unfused;
                    continue;
                }
                got.push_back(id);
            }
            if (ids_text(got) != lines[i].trimmed())
                failed << QString("'%1': gkq [%2] spm_encode [%3]").arg(texts[i], ids_text(got), lines[i].trimmed());
        }
        QVERIFY2(failed.isEmpty(), qPrintable(failed.join("\n")));
        // The strings did exercise byte fallback (rare characters became <0xXX> tokens) or, without it, runs of
        // unknown characters (one <unk> a character).
        QVERIFY(byte_fallback ? n_bytes > 0 : n_unknown > 0 && n_unfused > 0);
    }

    // llama2.c's tok105.bin was exported from tok105.model (pieces with U+2581 as ' ', scores as they are, BOS/EOS
    // renamed "\n<s>\n"/"\n</s>\n"): the same pieces, scores and ids.
    void llama2c_export_agrees() {
        const auto model = test::shared_model("babyllama-tok105/tok105.model");
        const auto bin = test::shared_model("babyllama-tok105/tok105.bin");
        if (!model || !bin) QSKIP(test::shared_models_skip_reason("babyllama-tok105").c_str());
        auto sp = Tokenizer::load_sentencepiece(*model);
        QVERIFY2(bool(sp), sp.message().c_str());
        auto ref = Tokenizer::load_llama2c(*bin, 105);
        QVERIFY2(bool(ref), ref.message().c_str());
        QCOMPARE(sp->vocab_size(), 105);
        for (int32_t i = 0; i < 105; ++i) {
            if (i != 1 && i != 2) QCOMPARE(sp->piece(i), ref->piece(i));
            QCOMPARE(sp->score(i), ref->score(i));
        }
        QVERIFY(sp->is_control(1) && sp->is_control(2));
        QCOMPARE(sp->bos_id(), 1);
        QCOMPARE(sp->eos_id(), 2);
        for (const char* text : {"Once upon a time, there was a little girl.", "  Lily said: \"hi!\"", "x"})
            QCOMPARE(ids_text(sp->encode(text, true, false)), ids_text(ref->encode(text, true, false)));
    }

    // The converter's folder rules: config.json's vocab_size pads with [PADi] (UNUSED), added_tokens.json and
    // tokenizer_config.json's added_tokens_decoder become USER_DEFINED / CONTROL tokens; a user-defined piece is
    // normal; special ids from config.json when no tokenizer.json names them, add_bos/add_eos from
    // tokenizer_config.json.
    void folder_rules() {
        test::TempDir dir;
        const std::vector<test::SpmProtoPiece> pieces = small_pieces();
        test::write_file(dir.file("tokenizer.model"), test::sentencepiece_proto(pieces));
        const auto n = static_cast<int32_t>(pieces.size());
        test::write_file(dir.file("config.json"),
                         "{\"vocab_size\": " + std::to_string(n + 4) +
                             ", \"bos_token_id\": 1, \"eos_token_id\": " + std::to_string(n + 1) + "}");
        test::write_file(dir.file("added_tokens.json"), "{\"<tool>\": " + std::to_string(n) + "}");
        test::write_file(dir.file("tokenizer_config.json"),
                         "{\"add_bos_token\": false, \"add_eos_token\": true, \"bos_token\": \"<s>\", "
                         "\"added_tokens_decoder\": {\"" +
                             std::to_string(n + 1) + "\": {\"content\": \"<|end|>\", \"special\": false}, \"" +
                             std::to_string(n + 2) + "\": {\"content\": \"\xE2\x96\x81sp\", \"special\": false}}}");
        auto tok = Tokenizer::load(dir.path());
        QVERIFY2(bool(tok), tok.message().c_str());
        QCOMPARE(tok->vocab_size(), n + 4);
        QCOMPARE(tok->piece(n + 3), "[PAD" + std::to_string(n + 3) + "]");
        QCOMPARE(tok->score(n + 3), -10000.0f);
        QCOMPARE(tok->score(n), -1000.0f);
        QVERIFY(tok->is_control(n + 1));                  // <|end|> looks special
        QCOMPARE(tok->piece(n + 2), std::string(" sp"));  // user-defined: U+2581 as a space
        QCOMPARE(tok->eos_id(), n + 1);
        QCOMPARE(tok->bos_id(), 1);
        QVERIFY(!tok->add_bos());
        QVERIFY(tok->add_eos());
        QVERIFY(tok->has_byte_fallback());
        // User-defined text is a token whatever parse_special says; <extra> is normal, merged as text.
        const std::vector<int32_t> ids = tok->encode("hi<tool>", false, false, false);
        QCOMPARE(ids_text(ids), ids_text(tok->encode("hi<tool>", false, false, true)));
        QVERIFY(std::find(ids.begin(), ids.end(), n) != ids.end());
        QCOMPARE(tok->encode("hi", false, false).size(), size_t(1));                    // "▁hi" is one piece
        const std::vector<int32_t> extra = tok->encode("<extra>", false, false, true);  // text, not a token
        QVERIFY(!tok->is_control(n - 1) && std::find(extra.begin(), extra.end(), n - 1) == extra.end());
        // With a tokenizer.json beside it (its model not read: tokenizer.model wins), its added tokens name
        // tokenizer_config.json's tokens: EOS "</s>" is id 2, ahead of config.json's id.
        test::write_file(dir.file("tokenizer.json"),
                         std::string_view(R"({"added_tokens": [{"id": 2, "content": "</s>", "special": true}],
                                              "model": {"type": "Unigram"}})"));
        test::write_file(dir.file("tokenizer_config.json"), std::string_view(R"({"eos_token": {"content": "</s>"}})"));
        auto beside = Tokenizer::load(dir.path());
        QVERIFY2(bool(beside), beside.message().c_str());
        QCOMPARE(beside->eos_id(), 2);
        QCOMPARE(beside->vocab_size(), n + 4);
        QVERIFY(beside->add_bos() && !beside->add_eos());
        // Bytes without a piece become byte tokens: "é" is <0xC3><0xA9>.
        QCOMPARE(ids_text(tok->encode("\xC3\xA9", false, false)),
                 QString("%1 %2 %3").arg(n - 6).arg(3 + 0xC3).arg(3 + 0xA9));
    }

    // A unigram model is refused (llama.cpp's SPM session merges pairs, which is sentencepiece's BPE only).
    void unigram_refused() {
        test::TempDir dir;
        test::write_file(dir.file("tokenizer.model"), test::sentencepiece_proto(small_pieces(), 1));
        auto tok = Tokenizer::load(dir.file("tokenizer.model"));
        QVERIFY(!bool(tok));
        QCOMPARE(tok.status().code(), StatusCode::Unsupported);
        QVERIFY2(tok.message().find("unigram") != std::string::npos, tok.message().c_str());
    }

    // Broken files: Corrupt, naming the file and the offset of the fault.
    void corrupt_data() {
        QTest::addColumn<QByteArray>("bytes");
        QTest::addColumn<QString>("message");
        const std::string good = test::sentencepiece_proto(small_pieces());
        auto qb = [](const std::string& s) { return QByteArray(s.data(), static_cast<qsizetype>(s.size())); };
        QTest::newRow("empty") << QByteArray() << "no pieces";
        QTest::newRow("truncated") << qb(good.substr(0, good.size() - 3)) << "runs past the end";
        QTest::newRow("length past end") << qb(test::proto_key(1, 2) + test::proto_varint(1000) + "abc")
                                         << "offset 1: length 1000 runs past the end of its message (3 bytes left)";
        QTest::newRow("varint past end") << qb(test::proto_key(1, 2) + "\xFF\xFF") << "offset 1: varint runs past";
        QTest::newRow("overlong varint") << qb(std::string(11, '\xFF')) << "offset 0: varint longer than 10 bytes";
        QTest::newRow("group") << qb(test::proto_key(7, 3)) << "offset 1: wire type 3";
        QTest::newRow("field 0") << qb(std::string("\x02\x00", 2)) << "offset 0: field number 0";
        const std::string piece_as_varint = test::proto_key(1, 0) + test::proto_varint(5);
        QTest::newRow("piece as varint") << qb(test::proto_bytes_field(1, piece_as_varint))
                                         << "offset 2: field 1 (piece) has wire type 0, expected 2";
        const std::string bad_type = test::proto_bytes_field(1, "a") + test::proto_key(3, 0) + test::proto_varint(9);
        QTest::newRow("piece type 9") << qb(test::proto_bytes_field(1, bad_type)) << "piece type 9 is not one of 1..6";
        QTest::newRow("no text") << qb(test::proto_bytes_field(1, test::proto_key(3, 0) + test::proto_varint(1)))
                                 << "offset 0: piece 0 has no text";
        const std::string bad_trainer = test::proto_key(35, 2) + test::proto_varint(0);
        QTest::newRow("byte_fallback as bytes")
            << qb(good + test::proto_bytes_field(2, bad_trainer)) << "field 35 (byte_fallback) has wire type 2";
    }
    void corrupt() {
        QFETCH(QByteArray, bytes);
        QFETCH(QString, message);
        test::TempDir dir;
        const std::string path = dir.file("tokenizer.model");
        test::write_file(path, std::string_view(bytes.constData(), static_cast<size_t>(bytes.size())));
        auto tok = Tokenizer::load(path);
        QVERIFY(!bool(tok));
        QCOMPARE(tok.status().code(), StatusCode::Corrupt);
        QVERIFY2(tok.message().rfind(path + ": ", 0) == 0, tok.message().c_str());
        QVERIFY2(tok.message().find(message.toStdString()) != std::string::npos, tok.message().c_str());
    }
};

QTEST_GUILESS_MAIN(TestSentencepiece)
#include "test_sentencepiece.moc"
