// The workflows layer (gkq/workflows.h) and the override table (gkq/quantize_fields.h): several candidates against
// one base give the reports separate evaluations give while the base runs once; saved and kept base logits agree (and
// name their base); the per-document protocol; perplexity runs; the report survives JSON both ways and bad documents
// are named; the tokenizer choice and its hint; the profile workflow equals profile_saturation run by hand; every
// override row parses its example, writes it back the same way and reaches the recorded command, and bad values are
// refused with the CLI's words.
#include "gkq/model_file.h"
#include "gkq/quantize.h"
#include "gkq/quantize_fields.h"
#include "gkq/transformer.h"
#include "gkq/workflows.h"
#include "test_support.h"
#include "tiny_model.h"

#include <QtTest>

#include <filesystem>
#include <fstream>
#include <set>

using namespace gkq;

namespace {

std::string write_text(const test::TempDir& dir) {
    const std::string path = dir.file("text.txt");
    std::ofstream out(path, std::ios::binary);
    for (int i = 0; i < 12; ++i) out << "ab ba abcd efgh hi cd ghi baba fed cab ";
    return path;
}

std::string quantize_to(const std::string& model_path, const std::string& out, const std::string& preset) {
    auto model = ModelFile::open(model_path);
    if (!model) qFatal("%s", model.message().c_str());
    QuantizeOptions o;
    o.preset = preset;
    o.global.rank = 2;
    o.n_threads = 1;
    auto r = quantize_model(*model, o, out);
    if (!r) qFatal("%s", r.message().c_str());
    return out;
}

// Every field of two reports but the timing.
void compare_reports(const EvalReport& a, const EvalReport& b) {
    QCOMPARE(a.text_label, b.text_label);
    QCOMPARE(a.n_ctx, b.n_ctx);
    QCOMPARE(a.stride, b.stride);
    QCOMPARE(a.n_windows, b.n_windows);
    QCOMPARE(a.n_tokens, b.n_tokens);
    QCOMPARE(a.n_bytes, b.n_bytes);
    QCOMPARE(a.compared, b.compared);
    auto same_ppl = [](const PerplexityStats& x, const PerplexityStats& y) {
        QCOMPARE(x.n_tokens, y.n_tokens);
        QCOMPARE(x.n_bytes, y.n_bytes);
        QCOMPARE(x.mean_nll, y.mean_nll);
        QCOMPARE(x.mean_nll_se, y.mean_nll_se);
        QCOMPARE(x.perplexity, y.perplexity);
        QCOMPARE(x.bits_per_byte, y.bits_per_byte);
    };
    if (!a.compared) {
        same_ppl(a.single, b.single);
        return;
    }
    const CompareStats& x = a.compare;
    const CompareStats& y = b.compare;
    same_ppl(x.base, y.base);
    same_ppl(x.candidate, y.candidate);
    QCOMPARE(x.mean_kld, y.mean_kld);
    QCOMPARE(x.mean_kld_se, y.mean_kld_se);
    QCOMPARE(x.median_kld, y.median_kld);
    QCOMPARE(x.kld_p99, y.kld_p99);
    QCOMPARE(x.kld_p999, y.kld_p999);
    QCOMPARE(x.max_kld, y.max_kld);
    QCOMPARE(x.same_top, y.same_top);
    QCOMPARE(x.same_top_se, y.same_top_se);
    QCOMPARE(x.rms_delta_p, y.rms_delta_p);
    QCOMPARE(x.rms_delta_p_se, y.rms_delta_p_se);
    QCOMPARE(x.ln_ppl_ratio, y.ln_ppl_ratio);
    QCOMPARE(x.ln_ppl_ratio_se, y.ln_ppl_ratio_se);
    QCOMPARE(x.ppl_ratio, y.ppl_ratio);
    QCOMPARE(x.ppl_ratio_se, y.ppl_ratio_se);
}

}  // namespace

class TestWorkflows : public QObject {
    Q_OBJECT
    test::TempDir m_dir;
    std::string m_model, m_text;
    std::vector<std::string> m_knots;

    EvalRequest request() const {
        EvalRequest r;
        r.base = m_model;
        r.text_path = m_text;
        r.windows.n_ctx = 16;
        r.windows.stride = 8;
        r.n_threads = 1;
        return r;
    }

private slots:
    void initTestCase() {
        m_model = test::write_tiny_gguf(m_dir.file("tiny.gguf"), true, 3, test::tiny_vocabulary());
        m_text = write_text(m_dir);
        for (const char* preset : {"q8_0", "q4_0", "lowrank-q4"})
            m_knots.push_back(quantize_to(m_model, m_dir.file(std::string(preset) + ".knot"), preset));
    }

    void severalCandidatesAgainstOneBase() {
        int64_t passes = -1;
        auto together = evaluate_candidates(request(), m_knots, {}, &passes);
        QVERIFY2(together, together ? "" : together.message().c_str());
        QCOMPARE(passes, int64_t{1});
        QCOMPARE(together->size(), m_knots.size());
        for (size_t i = 0; i < m_knots.size(); ++i) {
            int64_t alone_passes = -1;
            auto alone = evaluate_candidates(request(), {m_knots[i]}, {}, &alone_passes);
            QVERIFY2(alone, alone ? "" : alone.message().c_str());
            QCOMPARE(alone_passes, int64_t{1});
            const EvalRun& t = (*together)[i];
            QCOMPARE(t.model, m_model);
            QCOMPARE(t.candidate, m_knots[i]);
            QVERIFY(t.report.compared && t.report.compare.mean_kld > 0.0);
            compare_reports(t.report, alone->front().report);
        }
        // And the core's own comparison, assembled by hand, gives the same numbers.
        auto base = open_model_to_run(m_model, {});
        auto cand = open_model_to_run(m_knots[2], {});
        QVERIFY(base && cand);
        auto tok = choose_tokenizer(base->path, base->vocab, base->config.vocab_size, {});
        QVERIFY(tok);
        auto text = read_eval_text(m_text);
        QVERIFY(text);
        auto direct =
            evaluate_compare(*base->transformer, *cand->transformer, make_eval_text(*tok, *text), request().windows);
        QVERIFY(direct);
        direct->text_label = m_text;
        compare_reports((*together)[2].report, *direct);
    }

    void sessionKeepsAndSavesTheBase() {
        EvalRequest save = request();
        save.save_base = m_dir.file("base.logits");
        auto session = EvalSession::open(save);
        QVERIFY2(session, session ? "" : session.message().c_str());
        auto first = session->compare(m_knots[0]);
        QVERIFY(first);
        auto second = session->compare(m_knots[1]);  // the compact base logits of the first pass are kept
        QVERIFY(second);
        QCOMPARE(session->base_passes(), int64_t{1});
        QVERIFY(QFileInfo::exists(QString::fromStdString(save.save_base)));

        EvalRequest reuse = request();
        reuse.base_logits = save.save_base;
        int64_t passes = -1;
        auto reused = evaluate_candidates(reuse, {m_knots[0], m_knots[1]}, {}, &passes);
        QVERIFY2(reused, reused ? "" : reused.message().c_str());
        QCOMPARE(passes, int64_t{0});
        compare_reports((*reused)[0].report, first->report);
        compare_reports((*reused)[1].report, second->report);
    }

    // The per-document protocol in a session: the documents are counted and named in the run, the saved base logits
    // name their base (a request without a base takes it from them) and reuse gives the same report, and the
    // protocol survives the report's JSON.
    void perDocumentProtocolInASession() {
        const std::string docs = m_dir.file("docs.txt");
        {
            std::ofstream out(docs, std::ios::binary);
            out << "ab ba abcd efgh hi cd ghi baba |||\n fed cab ab ba abcd ||| ||| efgh hi cd ghi baba fed cab ";
        }
        EvalRequest save = request();
        save.text_path = docs;
        save.per_document = true;
        save.doc_separator = "|||";
        save.save_base = m_dir.file("docs.logits");
        auto session = EvalSession::open(save);
        QVERIFY2(session, session ? "" : session.message().c_str());
        QCOMPARE(session->text().doc_starts.size(), size_t{3});
        auto first = session->compare(m_knots[1]);
        QVERIFY2(first, first ? "" : first.message().c_str());
        QVERIFY(first->protocol.per_document);
        QCOMPARE(first->protocol.n_separators, int64_t{3});
        QCOMPARE(first->protocol.n_documents, int64_t{3});
        QCOMPARE(first->protocol.separators, std::vector<std::string>{"|||"});
        QVERIFY2(first->protocol.describe().rfind("per-document: 3 documents split at '|||'", 0) == 0,
                 first->protocol.describe().c_str());

        EvalRequest reuse = save;
        reuse.base.clear();  // the saved logits name it
        reuse.save_base.clear();
        reuse.base_logits = save.save_base;
        int64_t passes = -1;
        auto reused = evaluate_candidates(reuse, {m_knots[1]}, {}, &passes);
        QVERIFY2(reused, reused ? "" : reused.message().c_str());
        QCOMPARE(passes, int64_t{0});
        QCOMPARE(reused->front().model, std::filesystem::absolute(m_model).lexically_normal().string());
        compare_reports(reused->front().report, first->report);

        const std::string doc = eval_run_json(*first);
        auto back = parse_eval_run_json(doc, "docs.json");
        QVERIFY2(back, back ? "" : back.message().c_str());
        QVERIFY(back->protocol.per_document);
        QCOMPARE(back->protocol.n_documents, int64_t{3});
        QCOMPARE(eval_run_json(*back), doc);
        std::string renamed = doc;
        const size_t at = renamed.find("\"per-document\"");
        QVERIFY(at != std::string::npos);
        renamed.replace(at, 14, "\"per-window\"");
        auto bad = parse_eval_run_json(renamed, "docs.json");
        QVERIFY(!bad);
        QVERIFY2(bad.message().rfind("docs.json: $.protocol.name is 'per-window'", 0) == 0, bad.message().c_str());
    }

    void perplexityOfTheBase() {
        int64_t passes = -1;
        auto runs = evaluate_candidates(request(), {}, {}, &passes);
        QVERIFY(runs);
        QCOMPARE(passes, int64_t{1});
        QCOMPARE(runs->size(), size_t{1});
        const EvalReport& r = runs->front().report;
        QVERIFY(!r.compared);
        QVERIFY(r.single.perplexity > 1.0 && r.n_tokens > 0);
        QVERIFY(runs->front().candidate.empty());
    }

    void cancelStopsTheSession() {
        auto runs = evaluate_candidates(request(), m_knots, [](double, std::string_view) { return false; });
        QVERIFY(!runs);
        QCOMPARE(runs.status().code(), StatusCode::Cancelled);
    }

    void reportJsonBothWays() {
        auto compared = evaluate_candidates(request(), {m_knots[1]});
        auto single = evaluate_candidates(request(), {});
        QVERIFY(compared && single);
        for (const EvalRun& run : {compared->front(), single->front()}) {
            const std::string doc = eval_run_json(run);
            auto back = parse_eval_run_json(doc, "report.json");
            QVERIFY2(back, back ? "" : back.message().c_str());
            QCOMPARE(back->model, run.model);
            QCOMPARE(back->candidate, run.candidate);
            QCOMPARE(back->report.seconds, run.report.seconds);
            compare_reports(back->report, run.report);
            QCOMPARE(eval_run_json(*back), doc);
        }
        std::string doc = eval_run_json(compared->front());
        const size_t at = doc.find("\"p99_9\"");
        QVERIFY(at != std::string::npos);
        doc.replace(at, 7, "\"p99_8\"");
        auto bad = parse_eval_run_json(doc, "report.json");
        QVERIFY(!bad);
        QCOMPARE(bad.message(), std::string("report.json: $.kld.p99_9 is missing"));
        auto not_json = parse_eval_run_json("{ nope", "x.json");
        QVERIFY(!not_json && not_json.message() == "x.json: not a JSON document");
    }

    void tokenizerChoiceAndText() {
        // A model without a vocabulary and no tokenizer.bin beside it: the core's message plus the caller's hint.
        test::TempDir bare;
        const std::string model = test::write_tiny_gguf(bare.file("bare.gguf"), true, 3);
        TokenizerChoice c;
        c.hint = "pass --tokenizer FILE";
        auto none = choose_tokenizer(model, {}, 40, c);
        QVERIFY(!none);
        QCOMPARE(none.status().code(), StatusCode::NotFound);
        QVERIFY2(none.message().rfind(model, 0) == 0, none.message().c_str());
        QVERIFY2(
            none.message().size() > c.hint.size() && none.message().compare(none.message().size() - c.hint.size() - 2,
                                                                            std::string::npos, ": " + c.hint) == 0,
            none.message().c_str());
        // The origin's vocabulary (a knot header's) stands in for the model's.
        c.origin = "from.knot";
        c.origin_vocab = test::tiny_vocabulary();
        auto from_origin = choose_tokenizer(model, {}, 40, c);
        QVERIFY2(from_origin, from_origin ? "" : from_origin.message().c_str());
        QCOMPARE(from_origin->vocab_size(), 40);
        // An origin without a vocabulary and no tokenizer beside either: the error names the origin (what the user
        // opened), not the stand-in model.
        c.origin = bare.file("from.knot");
        c.origin_vocab = {};
        auto neither = choose_tokenizer(model, {}, 40, c);
        QVERIFY(!neither);
        QCOMPARE(neither.status().code(), StatusCode::NotFound);
        QVERIFY2(neither.message().rfind(c.origin + ": no vocabulary", 0) == 0, neither.message().c_str());
        // A given file that is not there: its own error, no hint.
        TokenizerChoice given;
        given.given = bare.file("nope.bin");
        given.hint = "pass --tokenizer FILE";
        auto missing = choose_tokenizer(model, test::tiny_vocabulary(), 40, given);
        QVERIFY(!missing);
        QVERIFY2(missing.message().find("pass --tokenizer") == std::string::npos, missing.message().c_str());

        auto text = read_eval_text(m_dir.file("absent.txt"));
        QVERIFY(!text);
        QCOMPARE(text.status().code(), StatusCode::NotFound);
        QCOMPARE(text.message(), m_dir.file("absent.txt") + ": cannot open the text file");
    }

    void profileAsByHand() {
        auto model = ModelFile::open(m_model);
        QVERIFY(model);
        ProfileRequest r;
        r.model_label = "tiny";
        r.text_path = m_text;
        r.max_tokens = 40;
        r.threshold = 1.5;
        r.min_frequency = 0.01;
        r.n_threads = 1;
        auto p = profile_model(*model, r);
        QVERIFY2(p, p ? "" : p.message().c_str());
        QCOMPARE(p->model, std::string("tiny"));
        QCOMPARE(p->text, m_text);
        QCOMPARE(p->command,
                 "gkq profile tiny --text " + m_text + " --threshold 1.5 --min-frequency 0.01 --max-tokens 40");

        auto tok = Tokenizer::from_vocabulary(test::tiny_vocabulary(), "tiny");
        auto text = read_eval_text(m_text);
        QVERIFY(tok && text);
        std::vector<int32_t> tokens = tok->encode(*text, true, false);
        tokens.resize(40);
        TransformerOptions to;
        to.n_threads = 1;
        auto t = Transformer::load(*model, to);
        QVERIFY(t);
        SaturationOptions so;
        so.thresholds = {1.5};
        so.min_frequency = 0.01;
        auto by_hand = profile_saturation(*t, tokens, so);
        QVERIFY(by_hand);
        const SaturationProfile& h = by_hand->front();
        QCOMPARE(p->n_tokens, h.n_tokens);
        QCOMPARE(p->layers.size(), h.layers.size());
        for (size_t i = 0; i < h.layers.size(); ++i) {
            QCOMPARE(p->layers[i].counts, h.layers[i].counts);
            QCOMPARE(p->layers[i].hot, h.layers[i].hot);
            QCOMPARE(p->layers[i].scale, h.layers[i].scale);
        }
    }

    void overrideRowsRoundTrip() {
        std::set<std::string_view> flags;
        ParamOverride all;
        std::string expected;
        for (const OverrideField& f : override_fields()) {
            QVERIFY2(flags.insert(f.flag).second, std::string(f.flag).c_str());
            QVERIFY(find_override_field(f.flag) == &f);
            QVERIFY(!f.metavar.empty() && !f.label.empty() && !f.help.empty() && !f.example.empty());
            ParamOverride o;
            QVERIFY(!f.get(o));
            Status s = set_override(f, o, f.example);
            QVERIFY2(s, (std::string(f.flag) + ": " + s.message()).c_str());
            QCOMPARE(f.get(o).value_or(""), std::string(f.example));
            QVERIFY(!o.empty());
            const std::string args = " --" + std::string(f.flag) + " " + std::string(f.example);
            QCOMPARE(override_arguments(o), args);
            // The example is valid alone over every preset, for every matrix role.
            for (const std::string& preset : preset_names()) {
                auto p = find_preset(preset);
                QVERIFY(p);
                // a whitening preset refuses a method override that is not low rank (validate_params), by design
                if (preset_needs_gram(*p)) continue;
                for (TensorRole role : {TensorRole::AttnQ, TensorRole::FfnDown, TensorRole::TokenEmbd}) {
                    Status v = validate_params(resolve_params(*p, role, 0, 2, o, {}));
                    QVERIFY2(v, (preset + " --" + std::string(f.flag) + ": " + v.message()).c_str());
                }
                QuantizeOptions qo;
                qo.preset = preset;
                qo.global = o;
                QCOMPARE(quantize_command(qo), "quantize --preset " + preset + args);
            }
            QVERIFY(set_override(f, all, f.example));
            expected += args;
        }
        QCOMPARE(flags.size(), size_t{12});  // every field of ParamOverride has a row
        QCOMPARE(override_arguments(all), expected);
        // Reading the written arguments back gives the same override.
        ParamOverride back;
        for (const OverrideField& f : override_fields()) QVERIFY(set_override(f, back, *f.get(all)));
        QCOMPARE(override_arguments(back), expected);
    }

    void overrideValuesRefused_data() {
        QTest::addColumn<QString>("flag");
        QTest::addColumn<QString>("value");
        QTest::addColumn<QString>("message");
        QTest::newRow("rank text") << "rank"
                                   << "x"
                                   << "'x' is not an integer";
        QTest::newRow("rank 0") << "rank"
                                << "0"
                                << "0 is out of range [1, 1073741824]";
        QTest::newRow("bits 3") << "bits"
                                << "3"
                                << "3 is not 2, 4 or 8";
        QTest::newRow("bits 9") << "bits"
                                << "9"
                                << "9 is out of range [2, 8]";
        QTest::newRow("energy 0") << "energy"
                                  << "0"
                                  << "0 is out of range [1e-12, 1]";
        QTest::newRow("energy nan") << "energy"
                                    << "nan"
                                    << "'nan' is not a number";
        QTest::newRow("residual")
            << "residual"
            << "q2"
            << "'q2' is not one of none, q4_0, q8_0, q4_1, q5_0, q5_1, iq4_nl, q2_k, q3_k, q4_k, q5_k, q6_k";
        QTest::newRow("delta") << "delta"
                               << "yes"
                               << "'yes' is not one of on, off";
    }
    void overrideValuesRefused() {
        QFETCH(QString, flag);
        QFETCH(QString, value);
        QFETCH(QString, message);
        const OverrideField* f = find_override_field(flag.toStdString());
        QVERIFY(f != nullptr);
        ParamOverride o;
        Status s = set_override(*f, o, value.toStdString());
        QVERIFY(!s);
        QCOMPARE(s.code(), StatusCode::InvalidArgument);
        QCOMPARE(QString::fromStdString(s.message()), message);
        QVERIFY(o.empty());
    }
};

QTEST_GUILESS_MAIN(TestWorkflows)
#include "test_workflows.moc"
