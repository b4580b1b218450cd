// The real gkq binary: profile -> quantize -> rknot encode / verify / show / set -> quantize --tuning, the
// "edit one matrix's bit width and re-quantize" round trip (exactly that record changes), and errors with paths.
#include "cli_run.h"
#include "gkq/knot.h"
#include "gkq/model_writer.h"
#include "gkq/rknot.h"
#include "gkq/saturation.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QProcess>
#include <QtTest>

#include <set>
#include <string>

using namespace gkq;

namespace {

using Run = gkq::test::CliRunT<std::string>;
Run run_gkq(const QStringList& args) {
    return gkq::test::run_gkq_as<std::string>(args, 120000);
}

QString q(const std::string& s) {
    return QString::fromStdString(s);
}

#define VERIFY_CONTAINS(haystack, needle)                             \
    QVERIFY2(std::string(haystack).find(needle) != std::string::npos, \
             qPrintable(QString::fromStdString(std::string(haystack) + "  [expected: " + (needle) + "]")))

// A tiny model as GGUF with a character vocabulary (so a text tokenizes).
std::string tiny_gguf(const test::TempDir& dir) {
    const std::string path = dir.file("tiny.gguf");
    auto m = test::make_tiny_model(test::tiny_config(false), 9);
    Vocabulary v;
    v.model = "llama";
    v.bos_id = 1;
    v.eos_id = 2;
    for (int i = 0; i < m.config.vocab_size; ++i) {
        v.tokens.push_back(i == 0   ? "<unk>"
                           : i == 1 ? "<s>"
                           : i == 2 ? "</s>"
                                    : std::string(1, char('a' + (i - 3) % 26)) + (i - 3 >= 26 ? "x" : ""));
        v.scores.push_back(-static_cast<float>(i));
    }
    if (Status s = write_gguf(path, m.config, m.tensors, v); !s) qFatal("%s", s.message().c_str());
    return path;
}

}  // namespace

class TestCliRknot : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        if (qgetenv("GKQ_CLI").isEmpty()) QSKIP("GKQ_CLI is not set (run through ctest)");
    }

    void helpListsTheCommands() {
        Run top = run_gkq({"--help"});
        VERIFY_CONTAINS(top.out, "  profile ");
        VERIFY_CONTAINS(top.out, "  rknot ");
        Run rk = run_gkq({"rknot", "encode", "--help"});
        QCOMPARE(rk.code, 0);
        VERIFY_CONTAINS(rk.out, "--profile");
        Run qz = run_gkq({"quantize", "--help"});
        VERIFY_CONTAINS(qz.out, "--tuning");
        Run bad = run_gkq({"rknot", "frobnicate"});
        QCOMPARE(bad.code, 2);
        VERIFY_CONTAINS(bad.err, "unknown subcommand 'frobnicate'");
    }

    void profileEncodeEditRequantize() {
        test::TempDir dir;
        const std::string model = tiny_gguf(dir);
        const std::string text = dir.file("calib.txt");
        std::string body;
        for (int i = 0; i < 40; ++i) body += "thequickbrownfoxjumpsoverthelazydog";
        test::write_file(text, body);

        const std::string masks = dir.file("masks.json");
        Run prof = run_gkq({"profile", q(model), "--text", q(text), "--threshold", "1.5", "-o", q(masks)});
        QVERIFY2(prof.code == 0, prof.err.c_str());
        VERIFY_CONTAINS(prof.out, "threshold |a| > 1.5 x block RMS");
        auto profile = read_saturation_profile(masks);
        QVERIFY2(profile.is_ok(), profile.message().c_str());
        QCOMPARE(profile->layers.size(), size_t{2});
        QCOMPARE(profile->layers[0].neuron_count, int64_t{96});

        const std::string knot_a = dir.file("a.knot");
        Run qa = run_gkq({"quantize", q(model), "-o", q(knot_a), "--preset", "paper"});
        QVERIFY2(qa.code == 0, qa.err.c_str());

        const std::string rk = dir.file("a.rknot");
        Run enc =
            run_gkq({"rknot", "encode", "--knot", q(knot_a), "--model", q(model), "--profile", q(masks), "-o", q(rk)});
        QVERIFY2(enc.code == 0, enc.err.c_str());
        VERIFY_CONTAINS(enc.out, "2 masks");
        Run ver = run_gkq({"rknot", "verify", q(rk)});
        QCOMPARE(ver.code, 0);
        VERIFY_CONTAINS(ver.out, rk + ": ok (");
        Run show = run_gkq({"rknot", "show", q(rk)});
        QCOMPARE(show.code, 0);
        VERIFY_CONTAINS(show.out, "blk.1.ffn_down.weight");
        VERIFY_CONTAINS(show.out, "saturation masks");
        Run json = run_gkq({"rknot", "show", q(rk), "--json"});
        QCOMPARE(json.code, 0);
        auto parsed = rknot_from_json(json.out, "stdout");
        QVERIFY2(parsed.is_ok(), parsed.message().c_str());
        QCOMPARE(parsed->saturation_maps->layers[1].bitmask_hash, bitmask_hash(profile->layers[1].hot));

        // the first low-rank matrix of block 1
        size_t target = parsed->layers.size();
        for (size_t i = 0; i < parsed->layers.size(); ++i)
            if (parsed->layers[i].bit_width && parsed->layers[i].layer_id == 1) {
                target = i;
                break;
            }
        QVERIFY(target < parsed->layers.size());
        const std::string field = "folded_waves.layers[" + std::to_string(target) + "].bit_width";

        // a bad value: refused with its path, file untouched
        const auto before = test::read_file(rk);
        Run bad = run_gkq({"rknot", "set", q(rk), q(field + "=7")});
        QCOMPARE(bad.code, 2);
        VERIFY_CONTAINS(bad.err, rk + ": " + field + ": 7 is not one of 2, 4, 8");
        QVERIFY(test::read_file(rk) == before);
        Run missing = run_gkq({"rknot", "set", q(rk), "folded_waves.layers[0].colour=1"});
        QCOMPARE(missing.code, 2);
        VERIFY_CONTAINS(missing.err, "folded_waves.layers[0].colour: no such field");

        const int new_bits = *parsed->layers[target].bit_width == 2 ? 4 : 2;
        Run set = run_gkq({"rknot", "set", q(rk), q(field + "=" + std::to_string(new_bits))});
        QVERIFY2(set.code == 0, set.err.c_str());
        QCOMPARE(run_gkq({"rknot", "verify", q(rk)}).code, 0);

        const std::string knot_c = dir.file("c.knot");
        Run qc = run_gkq({"quantize", q(model), "-o", q(knot_c), "--preset", "paper", "--tuning", q(rk)});
        QVERIFY2(qc.code == 0, qc.err.c_str());
        auto a = KnotFile::open(knot_a);
        auto c = KnotFile::open(knot_c);
        QVERIFY(a.is_ok() && c.is_ok());
        QCOMPARE(a->n_records(), c->n_records());
        std::vector<std::string> differ;
        for (size_t i = 0; i < a->n_records(); ++i)
            if (a->read_raw(i)->bytes != c->read_raw(i)->bytes) differ.push_back(a->entries()[i].name);
        QCOMPARE(differ, std::vector<std::string>{parsed->layers[target].tensor});
        const int64_t idx = c->find(parsed->layers[target].tensor);
        QCOMPARE(int(c->entries()[static_cast<size_t>(idx)].factor_bits), new_bits);
    }

    // A --target-bpw mix (block types the codec has beyond q8_0 / q4_0) survives the rknot: encoded, then applied
    // by --tuning, it gives the same records, byte for byte.
    void targetBpwChoiceRoundTripsThroughAnRknot() {
        test::TempDir dir;
        const std::string model = tiny_gguf(dir);
        const std::string a = dir.file("a.knot"), rk = dir.file("a.rknot"), b = dir.file("b.knot");
        Run qa = run_gkq({"quantize", q(model), "-o", q(a), "--target-bpw", "6"});
        QVERIFY2(qa.code == 0, qa.err.c_str());
        Run enc = run_gkq({"rknot", "encode", "--knot", q(a), "--model", q(model), "-o", q(rk)});
        QVERIFY2(enc.code == 0, enc.err.c_str());
        Run qb = run_gkq({"quantize", q(model), "-o", q(b), "--preset", "q4_k_m", "--tuning", q(rk)});
        QVERIFY2(qb.code == 0, qb.err.c_str());
        auto ka = KnotFile::open(a);
        auto kb = KnotFile::open(b);
        QVERIFY(ka.is_ok() && kb.is_ok());
        QCOMPARE(ka->n_records(), kb->n_records());
        std::set<std::string> methods;
        for (size_t i = 0; i < ka->n_records(); ++i) {
            QVERIFY2(ka->read_raw(i)->bytes == kb->read_raw(i)->bytes, ka->entries()[i].name.c_str());
            methods.insert(std::string(method_name(ka->entries()[i].method)));
        }
        QVERIFY2(methods.count("q5_0") + methods.count("q5_1") > 0, "the mix holds a type beyond q8_0 / q4_0");
    }

    void brokenFilesFail() {
        test::TempDir dir;
        const std::string plain = dir.file("plain.rknot");
        test::write_file(plain, std::string("{}"));
        Run r = run_gkq({"rknot", "verify", q(plain)});
        QCOMPARE(r.code, 2);
        VERIFY_CONTAINS(r.err, plain + ": not a gzip file (bad magic at offset 0)");
        Rknot k;
        k.model_name = "m";
        k.compression.method = "x";
        k.measured.spectrum_source = "knot";
        const std::string good = dir.file("good.rknot");
        QVERIFY(write_rknot(good, k).is_ok());
        auto bytes = test::read_file(good);
        bytes.resize(bytes.size() - 4);
        const std::string cut = dir.file("cut.rknot");
        test::write_file(cut, bytes);
        Run t = run_gkq({"rknot", "verify", q(cut)});
        QCOMPARE(t.code, 2);
        VERIFY_CONTAINS(t.err, cut + ": truncated gzip stream");
        Run qz = run_gkq({"quantize", q(dir.file("none.gguf")), "-o", q(dir.file("x.knot")), "--preset", "paper",
                          "--tuning", q(cut)});
        QCOMPARE(qz.code, 2);
        VERIFY_CONTAINS(qz.err, cut + ": truncated gzip stream");
    }
};

QTEST_APPLESS_MAIN(TestCliRknot)
#include "test_cli_rknot.moc"
