// The real gkq binary's `generate`: run.c's greedy reference texts on the shared checkpoints, tokenizer
// discovery, seeded sampling, the speed report on stderr, option and input errors.
#include "child_run.h"
#include "cli_run.h"
#include "gkq/metadata.h"
#include "gkq/model_writer.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QProcess>
#include <QtTest>

#include <limits>

using namespace gkq;

namespace {
using Run = gkq::test::CliRunT<QString>;
Run run_gkq(const QStringList& args) {
    return gkq::test::run_gkq_as<QString>(args, 120000);
}

QString q(const std::string& s) {
    return QString::fromStdString(s);
}

const char* const kRef279K =
    "Once upon a time, there was a little girl named Lily. She loved to play outside and came to play with her "
    "friends. One day, she went to the park to play with her toys. She was very happy. He wanted to";
const char* const kRefTok105 = "Once upon a time, there was a little girl named Lily. She loved";

}  // namespace

class TestCliGenerate : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        if (qgetenv("GKQ_CLI").isEmpty()) QSKIP("GKQ_CLI is not set (run through ctest)");
    }

    void helpListsGenerate() {
        Run r = run_gkq({"--help"});
        QCOMPARE(r.code, 0);
        QVERIFY(r.out.contains("generate"));
        Run h = run_gkq({"generate", "--help"});
        QCOMPARE(h.code, 0);
        QVERIFY2(
            h.out.startsWith("usage: gkq generate [MODEL|KNOT] [--tokenizer F] [-p PROMPT | --ids LIST] [--print-ids]"),
            qPrintable(h.out));
        for (const char* opt :
             {"--tokenizer", "--prompt", "--ids", "--print-ids", "--steps", "--temp", "--top-p", "--seed", "--threads"})
            QVERIFY2(h.out.contains(opt), opt);
    }

    void greedyPrintsRunCReference_data() {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("expected");
        QTest::addColumn<QStringList>("extra");
        QTest::newRow("llama2xs-279K") << "llama2xs-279K/model.bin" << kRef279K << QStringList{};
        QTest::newRow("llama2xs-279K 1 thread")
            << "llama2xs-279K/model.bin" << kRef279K << QStringList{"--threads", "1"};
        QTest::newRow("llama2xs-279K prompt")
            << "llama2xs-279K/model.bin" << kRef279K << QStringList{"-p", "Once upon a time"};
        QTest::newRow("babyllama-tok105") << "babyllama-tok105/model5000.bin" << kRefTok105 << QStringList{};
    }
    void greedyPrintsRunCReference() {
        QFETCH(QString, model);
        QFETCH(QString, expected);
        QFETCH(QStringList, extra);
        auto path = test::shared_model(model.toStdString());
        if (!path) QSKIP(test::shared_models_skip_reason(model.toStdString()).c_str());
        // the tokenizer is found beside the model: the folder holds exactly one tok*.bin
        Run r = run_gkq(QStringList{"generate", q(*path), "--temp", "0", "-n", "64"} + extra);
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QCOMPARE(r.out, expected + "\n");
        QVERIFY2(r.err.contains(QRegularExpression("prompt: +\\d+ tokens in [0-9.]+ ms, [0-9.]+ tokens/s")),
                 qPrintable(r.err));
        QVERIFY2(r.err.contains(QRegularExpression("generation: +\\d+ tokens in [0-9.]+ ms, [0-9.]+ tokens/s")),
                 qPrintable(r.err));
    }

    void explicitTokenizerAndSeededSampling() {
        auto path = test::shared_model("llama2xs-279K/model.bin");
        auto tok = test::shared_model("llama2xs-279K/tok512.bin");
        if (!path || !tok) QSKIP(test::shared_models_skip_reason("llama2xs-279K").c_str());
        const QStringList base{"generate", q(*path),  "--tokenizer", q(*tok), "--temp",
                               "0.9",      "--top-p", "0.9",         "-n",    "48"};
        Run a = run_gkq(base + QStringList{"--seed", "42"});
        Run b = run_gkq(base + QStringList{"--seed", "42", "--threads", "1"});
        Run c = run_gkq(base + QStringList{"--seed", "43"});
        QVERIFY2(a.code == 0 && b.code == 0 && c.code == 0, qPrintable(a.err + b.err + c.err));
        QCOMPARE(a.out, b.out);
        QVERIFY(a.out != c.out);
        QVERIFY(a.err.contains("seed 42, temperature 0.9, top-p 0.9"));
    }

    void ggufUsesItsOwnVocabulary() {
        test::TempDir dir;
        const std::string path = dir.file("tiny.gguf");
        test::write_tiny_gguf(path, true, 6, test::tiny_vocabulary());
        Run r = run_gkq({"generate", q(path), "-p", "abc", "--temp", "0", "-n", "12"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.out.startsWith("abc"), qPrintable(r.out));  // the prompt's pieces come first
        QVERIFY(!r.err.contains("warning"));
    }

    // A weight holding nan or inf makes every logit nan: generate stops with an error naming that weight.
    void nonFiniteWeightsStopGeneration_data() {
        QTest::addColumn<float>("value");
        QTest::addColumn<QString>("held");
        QTest::newRow("nan") << std::numeric_limits<float>::quiet_NaN() << "nan";
        QTest::newRow("inf") << std::numeric_limits<float>::infinity() << "inf";
    }
    void nonFiniteWeightsStopGeneration() {
        QFETCH(float, value);
        QFETCH(QString, held);
        test::TempDir dir;
        auto m = test::make_tiny_model(test::tiny_config(true), 6);
        for (size_t i = 0; i < m.tensors.size(); ++i)
            if (m.tensors[i].role == TensorRole::FfnUp && m.tensors[i].layer == 1) m.storage[i][17] = value;
        const std::string path = dir.file("bad.gguf");
        QVERIFY(write_gguf(path, m.config, m.tensors, test::tiny_vocabulary()));
        Run r = run_gkq({"generate", q(path), "-p", "abc", "--temp", "0", "-n", "8"});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("gkq generate: generate: the logits at position "), qPrintable(r.err));
        QVERIFY2(r.err.contains(" are not finite (token "), qPrintable(r.err));
        QVERIFY2(r.err.contains("the first weight that is not: blk.1.ffn_up.weight holds " + held + " at element 17"),
                 qPrintable(r.err));
        QVERIFY2(!r.out.contains("<unk>"), qPrintable(r.out));
    }

    void missingOrAmbiguousTokenizer() {
        test::TempDir dir;
        const std::string path = dir.file("model.bin");
        auto m = test::make_tiny_model(test::tiny_config(true), 6);
        QVERIFY(write_llama2c(path, m.config, m.tensors));
        Run none = run_gkq({"generate", q(path)});
        QCOMPARE(none.code, 2);
        QCOMPARE(none.err,
                 q("gkq generate: " + path +
                   " has no vocabulary and no tokenizer.bin or tok*.bin is next to it: pass --tokenizer FILE\n"));
        QVERIFY(none.out.isEmpty());

        test::write_file(dir.file("tokenizer.bin"), std::string_view("x"));
        test::write_file(dir.file("tok40.bin"), std::string_view("y"));
        Run two = run_gkq({"generate", q(path)});
        QCOMPARE(two.code, 2);
        QVERIFY2(two.err.contains("several tokenizers next to it (" + q(dir.file("tok40.bin")) + ", " +
                                  q(dir.file("tokenizer.bin")) + "): pass --tokenizer FILE"),
                 qPrintable(two.err));

        // the only candidate is used, and a broken one is reported with its path
        QVERIFY(QFile::remove(q(dir.file("tok40.bin"))));
        Run broken = run_gkq({"generate", q(path)});
        QCOMPARE(broken.code, 2);
        QVERIFY2(broken.err.contains(q(dir.file("tokenizer.bin"))), qPrintable(broken.err));
    }

    // A llama2.c tokenizer.bin of another vocabulary size (larger or smaller) is refused with both sizes, before the
    // weights load: beside a GGUF that lacks a tensor, the tokenizer's error comes, not the missing tensor's.
    void tokenizerOfAnotherSizeRefusedFirst() {
        test::TempDir dir;
        const std::string path = dir.file("model.bin");
        auto m = test::make_tiny_model(test::tiny_config(true), 6);
        QVERIFY(write_llama2c(path, m.config, m.tensors));
        const std::string tok = dir.file("tokenizer.bin");
        for (const int n : {512, 20}) {
            test::write_llama2c_tokenizer(tok, n);
            Run r = run_gkq({"generate", q(path), "-p", "ab"});
            QCOMPARE(r.code, 2);
            QCOMPARE(r.err, q("gkq generate: " + tok + ": this llama2.c tokenizer holds " + std::to_string(n) +
                              " tokens, but the model's vocabulary has 40 (vocab_size): it is another model's "
                              "tokenizer: pass --tokenizer FILE\n"));
            QVERIFY(r.out.isEmpty());
        }
        QVERIFY(QFile::remove(q(path)));
        std::vector<WriteTensor> missing;
        for (const WriteTensor& t : m.tensors)
            if (!(t.role == TensorRole::FfnUp && t.layer == 1)) missing.push_back(t);
        const std::string gguf = dir.file("model.gguf");
        QVERIFY(write_gguf(gguf, m.config, missing).is_ok());
        Run wrong = run_gkq({"generate", q(gguf), "-p", "ab"});
        QCOMPARE(wrong.code, 2);
        QVERIFY2(
            wrong.err.contains(q(tok) + ": this llama2.c tokenizer holds 20 tokens") && !wrong.err.contains("ffn_up"),
            qPrintable(wrong.err));
        test::write_llama2c_tokenizer(tok, 40);
        Run right = run_gkq({"generate", q(gguf), "-p", "ab"});
        QCOMPARE(right.code, 2);
        QVERIFY2(right.err.contains("blk.1.ffn_up.weight"), qPrintable(right.err));
    }

    void badOptionsExitTwo_data() {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("message");
        QTest::newRow("negative temperature")
            << QStringList{"generate", "m.bin", "--temp", "-1"} << "option '--temp': -1 is out of range [0, 100]";
        QTest::newRow("top-p above 1") << QStringList{"generate", "m.bin", "--top-p", "1.5"}
                                       << "option '--top-p': 1.5 is out of range [0, 1]";
        QTest::newRow("negative steps") << QStringList{"generate", "m.bin", "-n", "-3"} << "-3 is out of range";
        QTest::newRow("seed zero") << QStringList{"generate", "m.bin", "--seed", "0"} << "0 is out of range [1,";
        QTest::newRow("unknown activations") << QStringList{"generate", "m.bin", "--activations", "q4"}
                                             << "option '--activations': 'q4' is not one of q8, f32";
        QTest::newRow("nonexistent model")
            << QStringList{"generate", "/nonexistent/m.bin"} << "/nonexistent/m.bin: no such file or directory";
    }
    void badOptionsExitTwo() {
        QFETCH(QStringList, args);
        QFETCH(QString, message);
        Run r = run_gkq(args);
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains(message), qPrintable(r.err));
    }

    void missingTokenizerFileNamesIt() {
        auto path = test::shared_model("llama2xs-279K/model.bin");
        if (!path) QSKIP(test::shared_models_skip_reason("llama2xs-279K/model.bin").c_str());
        Run r = run_gkq({"generate", q(*path), "--tokenizer", "/nonexistent/tok.bin"});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("/nonexistent/tok.bin"), qPrintable(r.err));
    }
};

QTEST_GUILESS_MAIN(TestCliGenerate)
#include "test_cli_generate.moc"
