// The real gkq binary's `export`: the demo model exported --type q4_k_m has, tensor for tensor, the types and the
// data bytes llama-quantize Q4_K_M writes from gkq's F32 GGUF of it (tests/data/export/demo-q4_k_m.tensors, made with
// llama.cpp's llama-quantize; see its README), fallbacks included (the demo's 192-wide rows are no whole Q4_K / Q6_K
// blocks); a Q8_0 knot's records are kept as they are (the exported GGUF generates what the knot generates); bad
// options and outputs are refused before anything is written. A Hugging Face folder's tokenizer (byte-level BPE and
// byte-fallback tokenizer.json) travels into the knot quantize writes and the GGUF export writes: each of them alone
// tokenizes as the folder did.
#include "cli_run.h"
#include "gkq/model_file.h"
#include "gkq/model_writer.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QCryptographicHash>
#include <QFile>
#include <QtTest>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <tuple>

using namespace gkq;

namespace {
using Run = gkq::test::CliRunT<QString>;
Run run_gkq(const QStringList& args) {
    return gkq::test::run_gkq_as<QString>(args, 300000);
}
QString q(const std::string& s) {
    return QString::fromStdString(s);
}
const QString kDemo = QStringLiteral(GKQ_DEMO_MODEL_DIR);

// "name TYPE sha256" per line, in file order.
struct Expected {
    QString name, type, sha256;
};
std::vector<Expected> read_expected(const QString& path) {
    QFile f(path);
    std::vector<Expected> out;
    if (!f.open(QIODevice::ReadOnly | QIODevice::Text)) return out;
    while (!f.atEnd()) {
        const QString line = QString::fromUtf8(f.readLine()).trimmed();
        if (line.isEmpty() || line.startsWith('#')) continue;
        const QStringList p = line.split(' ', Qt::SkipEmptyParts);
        if (p.size() == 3) out.push_back({p[0], p[1], p[2]});
    }
    return out;
}

// A tiny model's Hugging Face folder (safetensors + config.json) with a 40-token tokenizer.json of the family
// `family`, "bpe" (byte-level BPE, GPT-2's pre-tokenizer, three special added tokens) or "spm" (byte-fallback BPE,
// sentencepiece-style), and its tokenizer_config.json.
// Whether a GGUF's tokens, scores and token types each have n entries (one per embedding row).
bool vocabulary_arrays_have(const Metadata& meta, size_t n) {
    for (const char* key : {"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"}) {
        const MetaValue* v = meta.find(key);
        if (v == nullptr || v->array.size() != n) return false;
    }
    return true;
}

void write_hf_folder(const std::string& dir, const std::string& family) {
    std::filesystem::create_directories(dir);
    const test::TinyModel tm = test::make_tiny_model(test::tiny_config(false), 5);
    QVERIFY(write_safetensors(dir + "/model.safetensors", tm.config, tm.tensors).is_ok());
    nlohmann::json vocab = nlohmann::json::object();
    nlohmann::json added = nlohmann::json::array();
    nlohmann::json tok, config;
    const std::string sp = "\xE2\x96\x81";  // U+2581
    if (family == "bpe") {
        for (int i = 0; i < 26; ++i) vocab[std::string(1, static_cast<char>('a' + i))] = i;
        const std::string g = "\xC4\xA0";  // U+0120, GPT-2's space
        vocab[g] = 26;
        const std::vector<std::string> merges = {g + " a", "a b",     "b a", g + " b", "c d",
                                                 g + " c", g + "a b", "e l", "l o",    "h e"};
        for (size_t m = 0; m < merges.size(); ++m) {
            std::string t = merges[m];
            t.erase(t.find(' '), 1);
            vocab[t] = 27 + static_cast<int>(m);
        }
        int id = 37;
        for (const char* s : {"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"})
            added.push_back({{"id", id++}, {"content", s}, {"special", true}});
        tok = {{"version", "1.0"},
               {"added_tokens", added},
               {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
               {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
        config = {{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|end_of_text|>"}, {"add_bos_token", true}};
    } else {
        vocab["<unk>"] = 0;
        vocab["<s>"] = 1;
        vocab["</s>"] = 2;
        vocab[sp] = 3;
        for (int i = 0; i < 26; ++i) vocab[std::string(1, static_cast<char>('a' + i))] = 4 + i;
        const std::vector<std::string> merges = {sp + " a", "a b",      "b a", sp + " b", "c d",
                                                 sp + " c", sp + "a b", "e l", "l o",     "h e"};
        for (size_t m = 0; m < merges.size(); ++m) {
            std::string t = merges[m];
            t.erase(t.find(' '), 1);
            vocab[t] = 30 + static_cast<int>(m);
        }
        int id = 0;
        for (const char* s : {"<unk>", "<s>", "</s>"})
            added.push_back({{"id", id++}, {"content", s}, {"special", true}});
        tok = {{"version", "1.0"},
               {"added_tokens", added},
               {"normalizer",
                {{"type", "Sequence"},
                 {"normalizers",
                  {{{"type", "Prepend"}, {"prepend", sp}},
                   {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", sp}}}}}},
               {"pre_tokenizer", nullptr},
               {"model",
                {{"type", "BPE"},
                 {"byte_fallback", true},
                 {"fuse_unk", true},
                 {"unk_token", "<unk>"},
                 {"vocab", vocab},
                 {"merges", merges}}}};
        config = {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"add_bos_token", true}, {"add_eos_token", false}};
    }
    test::write_file(dir + "/tokenizer.json", std::string_view(tok.dump()));
    test::write_file(dir + "/tokenizer_config.json", std::string_view(config.dump()));
}
}  // namespace

class TestCliExport : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        if (qgetenv("GKQ_CLI").isEmpty()) QSKIP("GKQ_CLI is not set (run through ctest)");
    }

    void helpListsExport() {
        Run r = run_gkq({"--help"});
        QCOMPARE(r.code, 0);
        QVERIFY(r.out.contains("export"));
        Run h = run_gkq({"export", "--help"});
        QCOMPARE(h.code, 0);
        for (const char* opt : {"--type", "--keep", "--dense", "q4_k_m", "q2_k", "iq4_nl"})
            QVERIFY2(h.out.contains(opt), opt);
    }

    void q4KMAsLlamaQuantize() {
        const std::vector<Expected> want =
            read_expected(QStringLiteral(GKQ_TEST_DATA_DIR "/export/demo-q4_k_m.tensors"));
        QVERIFY(!want.empty());
        test::TempDir dir;
        const std::string out = dir.file("demo-q4_k_m.gguf");
        Run r = run_gkq({"export", kDemo, "-o", q(out), "--type", "q4_k_m"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        auto m = ModelFile::open(out);
        QVERIFY2(m.is_ok(), m.message().c_str());
        QCOMPARE(m->tensors().size(), want.size());
        int fell_back = 0;
        for (const Expected& e : want) {  // llama-quantize sorts the tensors within a block: compared by name
            const Tensor* t = m->find(e.name.toStdString());
            QVERIFY2(t != nullptr, qPrintable(e.name));
            QVERIFY2(q(t->type_name) == e.type, qPrintable(e.name + ": " + q(t->type_name) + " vs " + e.type));
            const QByteArray hash = QCryptographicHash::hash(
                QByteArrayView(reinterpret_cast<const char*>(t->data), static_cast<qsizetype>(t->n_bytes)),
                QCryptographicHash::Sha256);
            QVERIFY2(QString::fromLatin1(hash.toHex()) == e.sha256, qPrintable(e.name));
        }
        for (const QString& line : r.out.split('\n'))
            if (line.contains("fell back to")) ++fell_back;
        QVERIFY(fell_back > 0);  // rows of 192: Q4_K -> Q5_0, Q6_K -> Q8_0
        QVERIFY2(r.out.contains(QString("; %1 fell back").arg(fell_back)), qPrintable(r.out));
        QVERIFY2(r.out.contains("rows of 192 are not whole q4_k blocks: fell back to q5_0"), qPrintable(r.out));
        const MetaValue* ft = m->metadata().find("general.file_type");
        QVERIFY(ft != nullptr);
        QCOMPARE(*ft->as_int(), int64_t{15});  // LLAMA_FTYPE_MOSTLY_Q4_K_M
    }

    // Every matrix of the demo model takes iq4_nl (and q5_0) whole: the file's one type is not among the writer's
    // default matrix types (f32 f16 bf16 q8_0 q4_0), which must not refuse it since no matrix falls to the default.
    void oneTypeBeyondTheDefaults() {
        test::TempDir dir;
        for (const auto& [type, dtype, ftype] :
             {std::tuple{"iq4_nl", DType::IQ4_NL, int64_t{25}}, std::tuple{"q5_0", DType::Q5_0, int64_t{8}}}) {
            const std::string out = dir.file(std::string("demo-") + type + ".gguf");
            Run r = run_gkq({"export", kDemo, "-o", q(out), "--type", type});
            QVERIFY2(r.code == 0, qPrintable(r.err));
            QVERIFY2(r.out.contains("; 0 fell back"), qPrintable(r.out));
            auto m = ModelFile::open(out);
            QVERIFY2(m.is_ok(), m.message().c_str());
            for (const Tensor& t : m->tensors()) QCOMPARE(t.dtype, t.shape.size() == 1 ? DType::F32 : dtype);
            QCOMPARE(*m->metadata().find("general.file_type")->as_int(), ftype);  // LLAMA_FTYPE_MOSTLY_IQ4_NL, _Q5_0
        }
    }

    void knotRecordsKept() {
        test::TempDir dir;
        const std::string knot = dir.file("demo.knot"), out = dir.file("demo-knot.gguf");
        Run qz = run_gkq({"quantize", kDemo, "--preset", "q8_0", "--threads", "2", "-o", q(knot)});
        QVERIFY2(qz.code == 0, qPrintable(qz.err));
        Run r = run_gkq({"export", q(knot), "-o", q(out)});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.out.contains("stored bytes copied"), qPrintable(r.out));
        auto m = ModelFile::open(out);
        QVERIFY2(m.is_ok(), m.message().c_str());
        for (const Tensor& t : m->tensors()) QCOMPARE(t.dtype, t.shape.size() == 1 ? DType::F32 : DType::Q8_0);
        QCOMPARE(*m->metadata().find("general.file_type")->as_int(), int64_t{7});  // LLAMA_FTYPE_MOSTLY_Q8_0
        QCOMPARE(*m->metadata().find("tokenizer.ggml.model")->as_string(), std::string("llama"));
        // the same weights (q/k rows moved to GGUF's rotary layout): the same greedy text as the knot
        const QStringList gen = {"-p", "The best way to", "--temp", "0", "-n", "40", "--threads", "1"};
        Run a = run_gkq(QStringList{"generate", q(knot)} + gen);
        Run b = run_gkq(QStringList{"generate", q(out)} + gen);
        QVERIFY2(a.code == 0 && b.code == 0, qPrintable(a.err + b.err));
        QCOMPARE(b.out, a.out);
    }

    // quantize and export carry a Hugging Face folder's tokenizer: the knot alone, and the GGUFs exported from the
    // knot and from the folder, tokenize every text as the folder does (ids, special ids, add_bos), and the GGUF
    // holds the keys llama.cpp reads; generate gives the same greedy ids from the same weights.
    void hfTokenizerCarried_data() {
        QTest::addColumn<QString>("family");
        QTest::addColumn<QString>("ggml_model");
        QTest::newRow("byte-level BPE") << "bpe"
                                        << "gpt2";
        QTest::newRow("byte-fallback BPE (SPM)") << "spm"
                                                 << "llama";
    }
    void hfTokenizerCarried() {
        QFETCH(QString, family);
        QFETCH(QString, ggml_model);
        test::TempDir dir;
        const std::string hf = dir.file("hf");
        write_hf_folder(hf, family.toStdString());
        if (QTest::currentTestFailed()) return;
        const std::string knot = dir.file("m.knot"), from_knot = dir.file("knot.gguf"), from_hf = dir.file("hf.gguf");
        Run qz = run_gkq({"quantize", q(hf), "--preset", "q8_0", "--threads", "2", "-o", q(knot)});
        QVERIFY2(qz.code == 0, qPrintable(qz.err));
        Run ek = run_gkq({"export", q(knot), "-o", q(from_knot)});
        QVERIFY2(ek.code == 0, qPrintable(ek.err));
        Run eh = run_gkq({"export", q(hf), "-o", q(from_hf), "--dense", "f32"});
        QVERIFY2(eh.code == 0, qPrintable(eh.err));
        const QStringList texts = {"ab cd", "hello world", "abba baab cab", " leading and trailing ", "z"};
        auto tokenize = [](const std::string& path, const QString& text, bool special) {
            QStringList args = {"tokenize", q(path), "--text", text, "--json"};
            if (special) args << "--parse-special";
            Run r = run_gkq(args);
            return r.code == 0 ? r.out : QString("exit %1: %2").arg(r.code).arg(r.err);
        };
        const QString special =
            family == "bpe" ? QStringLiteral("ab<|eot_id|>cd<|end_of_text|>") : QStringLiteral("ab</s>cd");
        std::vector<QString> want;
        for (const QString& t : texts) want.push_back(tokenize(hf, t, false));
        want.push_back(tokenize(hf, special, true));
        const QStringList gen = {"-p", "ab cd", "--temp", "0", "-n", "16", "--threads", "1", "--print-ids"};
        Run gen_hf = run_gkq(QStringList{"generate", q(hf)} + gen);
        Run gen_knot = run_gkq(QStringList{"generate", q(knot)} + gen);
        QVERIFY2(gen_hf.code == 0 && gen_knot.code == 0, qPrintable(gen_hf.err + gen_knot.err));
        std::filesystem::remove_all(hf);  // from here on the tokenizer comes from the files written
        for (const std::string& path : {knot, from_knot, from_hf}) {
            for (qsizetype i = 0; i < texts.size(); ++i)
                QCOMPARE(tokenize(path, texts[i], false), want[static_cast<size_t>(i)]);
            QCOMPARE(tokenize(path, special, true), want.back());
        }
        // ids as expected of each family: BOS first, the merges taken
        const nlohmann::json j = nlohmann::json::parse(want[0].toStdString());
        const std::vector<int32_t> ids = j["ids"].get<std::vector<int32_t>>();
        if (family == "bpe")
            QCOMPARE(ids, (std::vector<int32_t>{37, 28, 26, 31}));  // <|begin_of_text|> "ab" "G" "cd"
        else
            QCOMPARE(ids, (std::vector<int32_t>{1, 36, 3, 34}));  // <s> "_ab" "_" "cd"
        // the GGUF keys llama.cpp reads
        for (const std::string& path : {from_knot, from_hf}) {
            auto m = ModelFile::open(path);
            QVERIFY2(m.is_ok(), m.message().c_str());
            const Metadata& meta = m->metadata();
            QCOMPARE(q(*meta.find("tokenizer.ggml.model")->as_string()), ggml_model);
            QCOMPARE(meta.find("tokenizer.ggml.tokens")->array.size(), size_t{40});
            QCOMPARE(meta.find("tokenizer.ggml.token_type")->array.size(), size_t{40});
            QVERIFY(meta.find("tokenizer.ggml.add_bos_token") != nullptr);
            QCOMPARE(*meta.find("tokenizer.ggml.bos_token_id")->as_int(), int64_t{family == "bpe" ? 37 : 1});
            QCOMPARE(*meta.find("tokenizer.ggml.eos_token_id")->as_int(), int64_t{family == "bpe" ? 38 : 2});
            // the end of turn gkq stops at, stated (<|eot_id|>; the byte-fallback vocabulary has none)
            const MetaValue* eot = meta.find("tokenizer.ggml.eot_token_id");
            QCOMPARE(eot != nullptr, family == "bpe");
            if (eot != nullptr) QCOMPARE(*eot->as_int(), int64_t{39});
            if (family == "bpe") {
                QCOMPARE(*meta.find("tokenizer.ggml.pre")->as_string(), std::string("gpt-2"));
                QCOMPARE(meta.find("tokenizer.ggml.merges")->array.size(), size_t{10});
            } else {
                QCOMPARE(meta.find("tokenizer.ggml.scores")->array.size(), size_t{40});
                QCOMPARE(*meta.find("tokenizer.ggml.unknown_token_id")->as_int(), int64_t{0});
            }
        }
        // the knot carries it in its vocabulary: inspect reports it, and generation ends there
        for (const std::string& path : {knot, from_knot}) {
            Run in = run_gkq({"inspect", "--json", q(path)});
            QVERIFY2(in.code == 0, qPrintable(in.err));
            const nlohmann::json t = nlohmann::json::parse(in.out.toStdString())["tokenizer"];
            QCOMPARE(t["eot_id"], family == "bpe" ? nlohmann::json(39) : nlohmann::json());
            QCOMPARE(t["eog_ids"], family == "bpe" ? nlohmann::json({38, 39}) : nlohmann::json({2}));
        }
        // the same weights, the same greedy ids: the folder and its f32 GGUF, the knot and its GGUF
        Run gen_from_hf = run_gkq(QStringList{"generate", q(from_hf)} + gen);
        Run gen_from_knot = run_gkq(QStringList{"generate", q(from_knot)} + gen);
        QVERIFY2(gen_from_hf.code == 0 && gen_from_knot.code == 0, qPrintable(gen_from_hf.err + gen_from_knot.err));
        QCOMPARE(gen_from_hf.out, gen_hf.out);
        QCOMPARE(gen_from_knot.out, gen_knot.out);
        QVERIFY(gen_hf.out.startsWith(family == "bpe" ? "37,28,26,31" : "1,36,3,34"));
    }

    // One token per embedding row, as llama.cpp loads it: a tokenizer with more tokens than the config's vocab_size
    // (Gemma 3's <image_soft_token> after 262144 rows) loses the ids past it, one with fewer gets "[PADi]" tokens,
    // as convert_hf_to_gguf.py writes them; export and reconstruct say so, and the BOS / EOS ids past the end go.
    void vocabularyFitsTheEmbedding() {
        test::TempDir dir;
        const std::string hf = dir.file("hf");
        write_hf_folder(hf, "spm");
        if (QTest::currentTestFailed()) return;
        const std::string json_path = hf + "/tokenizer.json";
        const std::vector<uint8_t> bytes = test::read_file(json_path);
        const nlohmann::json original = nlohmann::json::parse(bytes.begin(), bytes.end());
        // the folder with this tokenizer.json and EOS text, exported as a float32 GGUF to out
        auto export_with = [&](const nlohmann::json& tokenizer, const std::string& eos, const std::string& out) {
            test::write_file(json_path, std::string_view(tokenizer.dump()));
            const nlohmann::json config = {{"bos_token", "<s>"}, {"eos_token", eos}, {"add_bos_token", true}};
            test::write_file(hf + "/tokenizer_config.json", std::string_view(config.dump()));
            return run_gkq({"export", q(hf), "-o", q(out), "--dense", "f32"});
        };
        // the same, which must succeed and say `said`
        auto export_saying = [&](const nlohmann::json& tokenizer, const std::string& eos, const std::string& out,
                                 const char* said) {
            Run r = export_with(tokenizer, eos, out);
            QVERIFY2(r.code == 0, qPrintable(r.err));
            QVERIFY2(r.out.contains(said), qPrintable(r.out));
        };
        nlohmann::json more = original;
        more["added_tokens"].push_back({{"id", 40}, {"content", "<image_soft_token>"}, {"special", true}});
        more["added_tokens"].push_back({{"id", 41}, {"content", "<eos>"}, {"special", true}});
        const std::string out = dir.file("more.gguf");
        export_saying(more, "<eos>", out,
                      "vocabulary: 42 tokens for 40 embedding rows: ids 40..41 dropped "
                      "('<image_soft_token>', '<eos>'), as convert_hf_to_gguf.py drops them");
        if (QTest::currentTestFailed()) return;
        auto m = ModelFile::open(out);
        QVERIFY2(m.is_ok(), m.message().c_str());
        QVERIFY2(vocabulary_arrays_have(m->metadata(), 40), "tokens, scores and token types are not 40 long");
        QCOMPARE(*m->metadata().find("tokenizer.ggml.bos_token_id")->as_int(), int64_t{1});
        QVERIFY(m->metadata().find("tokenizer.ggml.eos_token_id") == nullptr);  // <eos> was dropped
        // the knot keeps the tokenizer's 42; its reconstruction to GGUF fits it the same way
        const std::string knot = dir.file("more.knot"), rebuilt = dir.file("rebuilt.gguf");
        Run qz = run_gkq({"quantize", q(hf), "--preset", "q8_0", "--threads", "2", "-o", q(knot)});
        QVERIFY2(qz.code == 0, qPrintable(qz.err));
        Run rc = run_gkq({"reconstruct", q(knot), "-o", q(rebuilt)});
        QVERIFY2(rc.code == 0, qPrintable(rc.err));
        QVERIFY2(rc.out.contains("vocabulary: 42 tokens for 40 embedding rows: ids 40..41 dropped"),
                 qPrintable(rc.out));
        auto back = ModelFile::open(rebuilt);
        QVERIFY2(back.is_ok(), back.message().c_str());
        QCOMPARE(back->metadata().find("tokenizer.ggml.tokens")->array.size(), size_t{40});

        // fewer tokens than rows: the last two merges' tokens (ids 38, 39) gone from the tokenizer
        nlohmann::json fewer = original;
        for (auto it = fewer["model"]["vocab"].begin(); it != fewer["model"]["vocab"].end();)
            it = it.value().get<int>() >= 38 ? fewer["model"]["vocab"].erase(it) : std::next(it);
        fewer["model"]["merges"].erase(fewer["model"]["merges"].end() - 2, fewer["model"]["merges"].end());
        const std::string padded = dir.file("fewer.gguf");
        export_saying(fewer, "</s>", padded,
                      "vocabulary: 38 tokens for 40 embedding rows: 2 \"[PADi]\" tokens added, as "
                      "convert_hf_to_gguf.py pads them");
        if (QTest::currentTestFailed()) return;
        auto pm = ModelFile::open(padded);
        QVERIFY2(pm.is_ok(), pm.message().c_str());
        QVERIFY2(vocabulary_arrays_have(pm->metadata(), 40), "tokens, scores and token types are not 40 long");
        const MetaValue* tokens = pm->metadata().find("tokenizer.ggml.tokens");
        QCOMPARE(*tokens->array[39].as_string(), std::string("[PAD39]"));
        QCOMPARE(*pm->metadata().find("tokenizer.ggml.token_type")->array[39].as_int(), int64_t{5});  // UNUSED
        QCOMPARE(*pm->metadata().find("tokenizer.ggml.eos_token_id")->as_int(), int64_t{2});
        // a tokenizer with one token per row is written as it is, and export says nothing of it
        Run same = export_with(original, "</s>", dir.file("same.gguf"));
        QVERIFY2(same.code == 0, qPrintable(same.err));
        QVERIFY2(!same.out.contains("vocabulary:"), qPrintable(same.out));
    }

    // EOM and the fill-in-the-middle ids travel: a GGUF's own key (eom_token_id) is kept, those found by text are
    // stated (so llama.cpp need not look for them in an order of its own), through the knot too; inspect reports them.
    void specialIdsCarried() {
        test::TempDir dir;
        const std::string sp = "\xE2\x96\x81";
        Vocabulary v = test::tiny_vocabulary({sp + "a", "ab", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>",
                                              "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<|eom_id|>", "hi"});
        const test::TinyModel tm = test::make_tiny_model(test::tiny_config(false), 5);
        WriteOptions wo;
        wo.extra_metadata.set("tokenizer.ggml.eom_token_id", MetaValue::of_uint(39, MetaType::U32));
        const std::string src = dir.file("src.gguf"), knot = dir.file("m.knot");
        QVERIFY(write_gguf(src, tm.config, tm.tensors, v, wo).is_ok());
        Run qz = run_gkq({"quantize", q(src), "--preset", "q8_0", "--threads", "2", "-o", q(knot)});
        QVERIFY2(qz.code == 0, qPrintable(qz.err));
        for (const std::string& from : {src, knot}) {
            const std::string out = dir.file("out.gguf");
            Run r = run_gkq({"export", q(from), "-o", q(out)});
            QVERIFY2(r.code == 0, qPrintable(r.err));
            auto m = ModelFile::open(out);
            QVERIFY2(m.is_ok(), m.message().c_str());
            auto key = [&](const char* name) {
                const MetaValue* value = m->metadata().find(std::string("tokenizer.ggml.") + name);
                return value != nullptr ? *value->as_int() : int64_t{-1};
            };
            QCOMPARE(key("eom_token_id"), int64_t{39});  // the source's, not "<|eom_id|>" (38)
            QCOMPARE(QList<int64_t>({key("fim_pre_token_id"), key("fim_suf_token_id"), key("fim_mid_token_id"),
                                     key("fim_pad_token_id"), key("fim_rep_token_id"), key("fim_sep_token_id")}),
                     QList<int64_t>({32, 33, 34, 35, 36, 37}));
            QCOMPARE(key("eot_token_id"), int64_t{-1});  // none in the vocabulary
            Run in = run_gkq({"inspect", "--json", q(out)});
            QVERIFY2(in.code == 0, qPrintable(in.err));
            const nlohmann::json t = nlohmann::json::parse(in.out.toStdString())["tokenizer"];
            QCOMPARE(t["eom_id"], nlohmann::json(39));
            QCOMPARE(t["fim_ids"]["sep"], nlohmann::json(37));
            // EOS, the FIM pad / repository / separator, "<|eom_id|>" by its text, and the keyed EOM
            QCOMPARE(t["eog_ids"], nlohmann::json({2, 35, 36, 37, 38, 39}));
        }
    }

    void badInputRefused() {
        test::TempDir dir;
        const std::string out = dir.file("x.gguf");
        Run t = run_gkq({"export", kDemo, "-o", q(out), "--type", "q9_k"});
        QCOMPARE(t.code, 2);
        QVERIFY2(t.err.contains("unknown export type 'q9_k'") && t.err.contains("q4_k_m"), qPrintable(t.err));
        Run k = run_gkq({"export", kDemo, "-o", q(out), "--type", "q8_0", "--keep"});
        QCOMPARE(k.code, 2);
        Run s = run_gkq({"export", kDemo, "-o", q(dir.file("x.safetensors"))});
        QCOMPARE(s.code, 2);
        QVERIFY2(s.err.contains("must end in .gguf"), qPrintable(s.err));
        Run d = run_gkq({"export", kDemo, "-o", q(out), "--dense", "q8_0"});
        QCOMPARE(d.code, 2);
        QVERIFY(std::filesystem::is_empty(dir.path()));
    }
};

QTEST_APPLESS_MAIN(TestCliExport)
#include "test_cli_export.moc"
