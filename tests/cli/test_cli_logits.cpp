// The real gkq binary's `logits` (every position's logits of a token sequence, raw or .npy) and `generate --ids
// --print-ids`, checked against the transformer run in this process on the same tiny GGUF.
#include "cli_run.h"
#include "test_support.h"
#include "tiny_model.h"

#include "gkq/transformer.h"
#include "gkq/weights.h"

#include <QtTest>

#include <cstring>

using namespace gkq;

namespace {
using Run = gkq::test::CliRunT<QString>;
Run run_gkq(const QStringList& args) {
    return gkq::test::run_gkq_as<QString>(args, 120000);
}

QString q(const std::string& s) {
    return QString::fromStdString(s);
}

// The logits of every position of `ids` from a fresh transformer over `path`.
std::vector<float> logits_here(const std::string& path, const std::vector<int32_t>& ids) {
    auto w = open_weights(path);
    if (!w) qFatal("%s", w.message().c_str());
    auto t = Transformer::load(**w);
    if (!t) qFatal("%s", t.message().c_str());
    std::vector<float> out(ids.size() * static_cast<size_t>(t->config().vocab_size));
    if (!t->forward_batch(ids.data(), static_cast<int64_t>(ids.size()), 0, out.data())) qFatal("forward failed");
    return out;
}

}  // namespace

class TestCliLogits : public QObject {
    Q_OBJECT

    test::TempDir m_dir;
    std::string m_model;

private slots:
    void initTestCase() {
        if (qgetenv("GKQ_CLI").isEmpty()) QSKIP("GKQ_CLI is not set (run through ctest)");
        m_model = test::write_tiny_gguf(m_dir.file("m.gguf"), false, 3, test::tiny_vocabulary());
    }

    void helpListsLogits() {
        Run r = run_gkq({"--help"});
        QCOMPARE(r.code, 0);
        QVERIFY(r.out.contains("logits"));
        Run h = run_gkq({"logits", "--help"});
        QCOMPARE(h.code, 0);
        QVERIFY2(h.out.startsWith("usage: gkq logits MODEL|KNOT (--ids LIST | --text S) -o FILE [--npy]"),
                 qPrintable(h.out));
    }

    // Raw: n_tokens x n_vocab little-endian f32, exactly the transformer's logits for exactly the given ids.
    void rawLogitsAreTheTransformers() {
        const std::string out = m_dir.file("l.bin");
        Run r = run_gkq({"logits", q(m_model), "--ids", "5,1,7,30", "-o", q(out)});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.err.contains("ids 5,1,7,30"), qPrintable(r.err));  // no BOS added
        const std::vector<uint8_t> bytes = test::read_file(out);
        const std::vector<float> want = logits_here(m_model, {5, 1, 7, 30});
        QCOMPARE(bytes.size(), size_t{4 * 40 * 4});
        QCOMPARE(want.size(), size_t{4 * 40});
        QVERIFY(std::memcmp(bytes.data(), want.data(), bytes.size()) == 0);
    }

    // .npy: NumPy's format 1.0 header (64-byte aligned, shape (n, vocab)), then the same floats.
    void npyHasTheHeaderAndTheSameData() {
        const std::string raw = m_dir.file("l2.bin");
        const std::string npy = m_dir.file("l2.npy");
        QCOMPARE(run_gkq({"logits", q(m_model), "--ids", "1,2,3", "-o", q(raw)}).code, 0);
        QCOMPARE(run_gkq({"logits", q(m_model), "--ids", "1,2,3", "-o", q(npy), "--npy"}).code, 0);
        const std::vector<uint8_t> a = test::read_file(raw);
        const std::vector<uint8_t> b = test::read_file(npy);
        QVERIFY(b.size() > a.size());
        const size_t header = b.size() - a.size();
        QCOMPARE(header % 64, size_t{0});
        QVERIFY(std::memcmp(b.data(), "\x93NUMPY\x01\x00", 8) == 0);
        QCOMPARE(size_t(b[8]) | size_t(b[9]) << 8, header - 10);
        const std::string dict(b.begin() + 10, b.begin() + static_cast<std::ptrdiff_t>(header));
        QVERIFY2(dict.find("'descr': '<f4'") != std::string::npos, dict.c_str());
        QVERIFY2(dict.find("'shape': (3, 40)") != std::string::npos, dict.c_str());
        QCOMPARE(dict.back(), '\n');
        QVERIFY(std::memcmp(b.data() + header, a.data(), a.size()) == 0);
    }

    // --text runs the tokenizer's ids (BOS first) and prints them.
    void textIsTokenized() {
        const std::string out = m_dir.file("t.bin");
        Run r = run_gkq({"logits", q(m_model), "--text", "ab", "-o", q(out)});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.err.contains("ids 1,"), qPrintable(r.err));
        const qsizetype n = r.err.section('\n', 0, 0).count(',') + 1;
        QCOMPARE(test::read_file(out).size(), size_t(n) * 40 * 4);
    }

    void badInputIsRefused() {
        const std::string out = m_dir.file("bad.bin");
        Run both = run_gkq({"logits", q(m_model), "--ids", "1", "--text", "a", "-o", q(out)});
        QCOMPARE(both.code, 2);
        QVERIFY(both.err.contains("exactly one of --ids and --text"));
        Run list = run_gkq({"logits", q(m_model), "--ids", "1,x,3", "-o", q(out)});
        QCOMPARE(list.code, 2);
        QVERIFY2(list.err.contains("'x' (item 2 of '1,x,3') is not a token id"), qPrintable(list.err));
        Run vocab = run_gkq({"logits", q(m_model), "--ids", "1,40", "-o", q(out)});
        QCOMPARE(vocab.code, 2);
        QVERIFY2(vocab.err.contains("token 40 at position 1 is outside the vocabulary of 40"), qPrintable(vocab.err));
        Run missing = run_gkq({"logits", q(m_model), "--ids", "1"});
        QCOMPARE(missing.code, 2);
        QVERIFY(missing.err.contains("missing -o FILE"));
        Run self = run_gkq({"logits", q(m_model), "--ids", "1", "-o", q(m_model)});
        QCOMPARE(self.code, 2);
        QVERIFY(!QFileInfo::exists(q(out)));
    }

    // generate --ids --print-ids: the given ids, then the greedy continuation, as ids.
    void generatePrintsIds() {
        Run r = run_gkq({"generate", q(m_model), "--ids", "5,9", "--print-ids", "--temp", "0", "-n", "6"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const QStringList ids = r.out.trimmed().split(',');
        QVERIFY2(ids.size() >= 2 && ids[0] == "5" && ids[1] == "9", qPrintable(r.out));
        // each generated id is the argmax of the logits after the ids before it (ties: the lowest)
        std::vector<int32_t> seq;
        for (const QString& s : ids) seq.push_back(s.toInt());
        for (size_t i = 2; i < seq.size(); ++i) {
            const std::vector<int32_t> prefix(seq.begin(), seq.begin() + static_cast<std::ptrdiff_t>(i));
            const std::vector<float> l = logits_here(m_model, prefix);
            const float* last = l.data() + (i - 1) * 40;
            int32_t best = 0;
            for (int32_t k = 1; k < 40; ++k)
                if (last[k] > last[best]) best = k;
            QCOMPARE(seq[i], best);
        }
        QVERIFY(seq.size() <= 7);  // -n 6: positions 0..5 run, each run position samples one
        Run both = run_gkq({"generate", q(m_model), "--ids", "5", "-p", "a"});
        QCOMPARE(both.code, 2);
    }
};

QTEST_GUILESS_MAIN(TestCliLogits)
#include "test_cli_logits.moc"
