// The Quantize view's calibration files and target bits per weight, offscreen through the real panel: a whitened
// preset without a Gram file is refused before it runs, with the reason on the disabled button; with the Gram matrices
// (and an importance matrix) the engine computed for the model, the run records them in the command line as
// `gkq quantize --imatrix --gram` does and writes the same records as the engine (and the CLI) with those files; files
// of another model or not such files are refused naming the file and the entry; a target bits per weight quantizes
// with the types the engine's plan_target_bpw chooses for the same inputs, the heat map's Method shows them, and the
// rknot the Tuning view makes of that knot carries them; a tuning with that choice re-quantizes to the same types.
#include "cli_run.h"
#include "gkq/imatrix.h"
#include "gkq/knot.h"
#include "gkq/model_file.h"
#include "gkq/quantize.h"
#include "gkq/rknot.h"
#include "gkq/transformer.h"
#include "gkq/workflows.h"
#include "jobs/job_runner.h"
#include "models/layer_role_model.h"
#include "models/rknot_tree_model.h"
#include "test_support.h"
#include "tiny_model.h"
#include "widgets/calibration_files.h"
#include "widgets/quantize_panel.h"
#include "widgets/rknot_editor.h"

#include <QComboBox>
#include <QLabel>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QtTest>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

using namespace gkq;
using Kind = ui::CalibrationFiles::Kind;

namespace {

// The importance matrix and Gram matrices of `model_path` on a fixed token sequence (4 chunks of 16), computed by the
// engine as `gkq imatrix --gram` does, written to `imatrix_path` and `gram_path`.
void write_calibration(const std::string& model_path, const std::string& imatrix_path, const std::string& gram_path) {
    auto model = ModelFile::open(model_path);
    QVERIFY2(static_cast<bool>(model), model.message().c_str());
    auto t = Transformer::load(*model);
    QVERIFY2(static_cast<bool>(t), t.message().c_str());
    ImatrixOptions io;
    io.n_ctx = 16;
    io.dataset = "cycle";
    GramSet gram;
    auto im = compute_imatrix(*t, test::cycle_tokens(model->config().vocab_size, 64), 1, io, {}, &gram);
    QVERIFY2(static_cast<bool>(im), im.message().c_str());
    QVERIFY(write_imatrix(*im, imatrix_path, ImatrixFormat::Gguf).is_ok());
    if (!gram_path.empty()) QVERIFY(write_gram(gram, gram_path).is_ok());
}

// Every record's bytes as stored (CRC-checked), in file order.
std::vector<std::vector<uint8_t>> records(const std::string& knot_path) {
    std::vector<std::vector<uint8_t>> out;
    auto k = KnotFile::open(knot_path);
    if (!k) qFatal("%s", k.message().c_str());
    for (size_t i = 0; i < k->n_records(); ++i) {
        auto r = k->read_raw(i);
        if (!r) qFatal("%s", r.message().c_str());
        out.push_back(std::move(r->bytes));
    }
    return out;
}

// Waits for the calibration row `kind` to end its load; its file (empty when refused).
QString waitLoaded(ui::CalibrationFiles* c, Kind kind) {
    if (!QTest::qWaitFor([c] { return !c->isLoading(); }, 60000)) qFatal("a calibration file did not load in 60 s");
    return c->file(kind);
}

// A llama model whose rows the k-quants' 256-element blocks divide, so that the plan's candidates are the k-quants
// themselves (a 64-wide matrix falls back to the legacy types).
ModelConfig k256_config() {
    ModelConfig a;
    a.architecture = "llama";
    a.dim = 256;
    a.hidden_dim = 512;
    a.n_layers = 2;
    a.n_heads = 4;
    a.n_kv_heads = 1;
    a.vocab_size = 259;
    a.context_length = 64;
    a.norm_eps = 1e-5;
    a.shared_classifier = false;
    a.rope_style = RopeStyle::Interleaved;
    return a;
}

std::shared_ptr<const ModelFile> open_shared(const std::string& path) {
    auto m = ModelFile::open(path);
    if (!m) qFatal("%s", m.message().c_str());
    return std::make_shared<const ModelFile>(std::move(*m));
}

// Each planned tensor's method (by name).
std::map<std::string, Method> planned_methods(const BpwPlan& plan) {
    std::map<std::string, Method> out;
    for (const BpwPlanTensor& t : plan.tensors) out[t.name] = t.candidates[t.chosen].method;
    return out;
}

// Whether the report stores every tensor of `planned` with its planned method (the first one that does not is named).
void expect_planned_methods(const QuantizeReport& report, const std::map<std::string, Method>& planned) {
    size_t seen = 0;
    for (const QuantizedTensor& q : report.tensors) {
        auto it = planned.find(q.codec.name);
        if (it == planned.end()) continue;
        ++seen;
        QVERIFY2(q.codec.method == it->second, q.codec.name.c_str());
    }
    QCOMPARE(seen, planned.size());
}

}  // namespace

class TestQuantizeCalibration : public QObject {
    Q_OBJECT
    test::TempDir m_dir;
    std::string m_model, m_imatrix, m_gram;

private slots:
    void initTestCase() {
        QCoreApplication::setOrganizationName(QStringLiteral("gkq-tests"));
        QCoreApplication::setApplicationName(QStringLiteral("test_quantize_calibration"));
        QSettings().clear();
        m_model = test::write_tiny_gguf(m_dir.file("tiny.gguf"), true, 5, test::tiny_vocabulary());
        m_imatrix = m_dir.file("tiny.imatrix.gguf");
        m_gram = m_dir.file("tiny.gram.gguf");
        write_calibration(m_model, m_imatrix, m_gram);
    }

    // svd-llm and q4_0-lqer are selectable, and without a Gram file Quantize says what they need instead of running.
    void whitenedPresetWithoutGramIsRefusedWithTheReason() {
        ui::JobRunner runner;
        ui::QuantizePanel panel(&runner);
        panel.setModel(open_shared(m_model));
        auto* combo = panel.findChild<QComboBox*>();
        QVERIFY(combo != nullptr);
        for (const QString& preset : {QStringLiteral("svd-llm"), QStringLiteral("q4_0-lqer")}) {
            const int row = combo->findText(preset);
            QVERIFY(row >= 0);
            QVERIFY(!combo->itemData(row, Qt::UserRole - 1).isValid());  // not disabled: the button explains
            QVERIFY(combo->itemData(row, Qt::ToolTipRole).toString().contains(QStringLiteral("Gram")));
            panel.setPreset(preset);
            QCOMPARE(panel.preset(), preset);
            QVERIFY(!panel.runButton()->isEnabled());
            const QString why = panel.quantizeUnavailableReason();
            QVERIFY2(
                why.contains(
                    QStringLiteral("Preset %1 whitens by the activations and needs their Gram matrices").arg(preset)),
                qPrintable(why));
            QVERIFY(why.contains(QStringLiteral("Activation Gram matrices...")));
            QCOMPARE(panel.runButton()->toolTip(), why);
            QVERIFY(!panel.runNote()->isHidden());
            QCOMPARE(panel.runNote()->text(), why);
            QSignalSpy started(&runner, &ui::JobRunner::started);
            QCOMPARE(panel.startQuantize(), quint64(0));
            QCOMPARE(started.count(), 0);
            QCOMPARE(panel.statusText(), why);
        }
        panel.setPreset(QStringLiteral("lowrank-q4"));
        QVERIFY(panel.runButton()->isEnabled());
        QVERIFY(panel.quantizeUnavailableReason().isEmpty());
        QVERIFY(panel.runNote()->isHidden());
    }

    // With both files: the recorded command carries them as the CLI's does, and the records are the engine's (and
    // the CLI's) for the same files, whitened: not those of the plain SVD at the same rank.
    void gramAndImatrixFilesRunTheWhitenedPreset() {
        ui::JobRunner runner;
        ui::QuantizePanel panel(&runner);
        auto model = open_shared(m_model);
        panel.setModel(model);
        panel.setPreset(QStringLiteral("svd-llm"));
        ui::CalibrationFiles* calib = panel.calibrationFiles();
        QVERIFY(calib->setFile(Kind::Gram, QString::fromStdString(m_gram)) != 0);
        QVERIFY(calib->isLoading());
        QVERIFY(!panel.runButton()->isEnabled());  // the run waits for the file
        QVERIFY2(panel.quantizeUnavailableReason().startsWith(QStringLiteral("Reading tiny.gram.gguf")),
                 qPrintable(panel.quantizeUnavailableReason()));
        QCOMPARE(waitLoaded(calib, Kind::Gram), QString::fromStdString(m_gram));
        QVERIFY(calib->setFile(Kind::Importance, QString::fromStdString(m_imatrix)) != 0);
        QCOMPARE(waitLoaded(calib, Kind::Importance), QString::fromStdString(m_imatrix));
        QVERIFY2(calib->summary(Kind::Gram).contains(QStringLiteral("Gram matrices for 14 matrices")),
                 qPrintable(calib->summary(Kind::Gram)));
        QVERIFY2(calib->summary(Kind::Importance).contains(QStringLiteral("importance for 14 matrices")),
                 qPrintable(calib->summary(Kind::Importance)));
        QVERIFY(panel.runButton()->isEnabled());

        QSignalSpy quantized(&panel, &ui::QuantizePanel::quantized);
        QVERIFY(panel.startQuantize() != 0);
        QVERIFY(quantized.wait(120000));
        auto gram = load_model_gram(m_gram, *model);
        auto importance = load_model_importance(m_imatrix, *model);
        QVERIFY(gram && importance);
        const std::string command = panel.lastReport()->command;
        QCOMPARE(command, "quantize --preset svd-llm " + importance->command + " " + gram->command);
        QVERIFY(command.find(" --gram tiny.gram.gguf sha256:") != std::string::npos);

        // The engine with the same files writes the same records.
        QuantizeOptions o;
        o.preset = "svd-llm";
        o.n_threads = 1;
        o.importance = importance->by_tensor;
        o.importance_command = importance->command;
        o.importance_metadata = importance->metadata;
        o.gram = gram->by_tensor;
        o.gram_command = gram->command;
        auto engine = quantize_model(*model, o, m_dir.file("engine.knot"));
        QVERIFY2(static_cast<bool>(engine), engine.message().c_str());
        QCOMPARE(engine->command, command);
        const auto ours = records(panel.lastKnotPath().toStdString());
        QVERIFY(ours == records(m_dir.file("engine.knot")));
        // Whitened: the plain SVD at the same rank stores other factors.
        o.preset = "svd-plain";
        o.gram.clear();
        o.gram_command.clear();
        QVERIFY(quantize_model(*model, o, m_dir.file("plain.knot")).is_ok());
        QVERIFY(ours != records(m_dir.file("plain.knot")));

        // Clearing the Gram file makes the preset wait for one again.
        calib->clear(Kind::Gram);
        QVERIFY(calib->file(Kind::Gram).isEmpty());
        QVERIFY(!panel.runButton()->isEnabled());
        QVERIFY(panel.options().gram.empty() && panel.options().gram_command.empty());
        QCOMPARE(panel.options().importance_command, importance->command);

        if (qgetenv("GKQ_CLI").isEmpty()) QSKIP("GKQ_CLI is not set (run through ctest): the CLI half is not checked");
        auto r = test::run_gkq_as<std::string>({"quantize", QString::fromStdString(m_model), "-o",
                                                QString::fromStdString(m_dir.file("cli.knot")), "--preset", "svd-llm",
                                                "--imatrix", QString::fromStdString(m_imatrix), "--gram",
                                                QString::fromStdString(m_gram), "--json"});
        QVERIFY2(r.code == 0, r.err.c_str());
        QCOMPARE(nlohmann::json::parse(r.out)["command"].get<std::string>(), command);
        QVERIFY(ours == records(m_dir.file("cli.knot")));
    }

    // Files that do not fit the open model are refused naming the file and what does not fit; the panel stays usable.
    void filesOfAnotherModelAreRefusedNamingTheFile() {
        test::TempDir dir;
        ModelConfig wider = test::tiny_config(true);
        wider.hidden_dim = 128;  // ffn_down reads 128 columns, not 96
        test::TinyModel other = test::make_tiny_model(wider, 9);
        const std::string other_path = dir.file("other.gguf");
        QVERIFY(write_gguf(other_path, wider, other.tensors, test::tiny_vocabulary()).is_ok());
        const std::string other_imatrix = dir.file("other.imatrix.gguf");
        write_calibration(other_path, other_imatrix, {});
        const std::string corrupt = dir.file("corrupt.gram.gguf");
        std::string bytes("GGUF\x03\x00\x00\x00", 8);  // a GGUF header, then nothing a GGUF file holds
        bytes += " not a Gram file at all";
        test::write_file(corrupt, bytes);

        ui::JobRunner runner;
        ui::QuantizePanel panel(&runner);
        panel.setModel(open_shared(m_model));
        panel.setPreset(QStringLiteral("q4_0"));
        ui::CalibrationFiles* calib = panel.calibrationFiles();
        QSignalSpy failed(calib, &ui::CalibrationFiles::loadFailed);
        QSignalSpy panelError(&panel, &ui::QuantizePanel::errorOccurred);

        QVERIFY(calib->setFile(Kind::Importance, QString::fromStdString(other_imatrix)) != 0);
        QVERIFY(waitLoaded(calib, Kind::Importance).isEmpty());
        QCOMPARE(failed.count(), 1);
        const QString m = failed.takeFirst().at(0).toString();
        QVERIFY2(m.startsWith(QString::fromStdString(other_imatrix) + QStringLiteral(": ")), qPrintable(m));
        QVERIFY2(m.contains(QStringLiteral("ffn_down")) && m.contains(QStringLiteral("128")), qPrintable(m));
        QVERIFY2(calib->summary(Kind::Importance).startsWith(QStringLiteral("Refused: ")),
                 qPrintable(calib->summary(Kind::Importance)));
        QCOMPARE(panel.statusText(), m);
        QCOMPARE(panelError.count(), 1);
        QVERIFY(panel.options().importance.empty() && panel.options().importance_command.empty());
        QVERIFY(panel.runButton()->isEnabled());  // q4_0 needs no file

        // A Gram file that is not one, and an imatrix given as Gram matrices.
        for (const std::string& wrong : {corrupt, m_imatrix}) {
            QVERIFY(calib->setFile(Kind::Gram, QString::fromStdString(wrong)) != 0);
            QVERIFY(waitLoaded(calib, Kind::Gram).isEmpty());
            QCOMPARE(failed.count(), 1);
            const QString g = failed.takeFirst().at(0).toString();
            QVERIFY2(g.startsWith(QString::fromStdString(wrong)), qPrintable(g));
            QVERIFY(!calib->hasGram());
        }

        // The right file for the model after the refusals loads; opening the other model refuses it again.
        QVERIFY(calib->setFile(Kind::Importance, QString::fromStdString(m_imatrix)) != 0);
        QCOMPARE(waitLoaded(calib, Kind::Importance), QString::fromStdString(m_imatrix));
        panel.setModel(open_shared(other_path));
        QVERIFY(waitLoaded(calib, Kind::Importance).isEmpty());
        QCOMPARE(failed.count(), 1);
        QVERIFY2(failed.takeFirst().at(0).toString().startsWith(QString::fromStdString(m_imatrix)), "the model's own");
    }

    // Mixed precision by measurement: the run's types are the engine's plan for the same model, target and importance;
    // the heat map shows them; the knot's rknot carries them; the same choice as a tuning gives them again.
    void targetBpwQuantizesWithThePlannedTypes() {
        const ModelConfig config = k256_config();
        test::TinyModel tm = test::make_tiny_model(config, 31);
        const std::string model_path = m_dir.file("k256.gguf");
        QVERIFY(write_gguf(model_path, config, tm.tensors, test::byte_vocabulary()).is_ok());
        const std::string imatrix = m_dir.file("k256.imatrix.gguf");
        write_calibration(model_path, imatrix, {});
        auto model = open_shared(model_path);

        ui::JobRunner runner;
        ui::QuantizePanel panel(&runner);
        panel.setModel(model);
        QCOMPARE(panel.targetBpw(), 0.0);  // off by default
        // The range of gkq quantize --target-bpw: [0, 32], 0 off.
        QVERIFY(!panel.setTargetBpw(-1.0));
        QVERIFY(!panel.setTargetBpw(32.5));
        QVERIFY(!panel.setTargetBpw(std::nan("")));
        QCOMPARE(panel.targetBpw(), 0.0);
        QVERIFY(panel.setTargetBpw(5.0));

        // A base preset that stores no blocks, or a Method override, is refused as the CLI refuses it.
        panel.setPreset(QStringLiteral("lowrank-q4"));
        QVERIFY(!panel.runButton()->isEnabled());
        QVERIFY2(panel.quantizeUnavailableReason().contains(QStringLiteral(
                     "needs a block-type base preset (a k-quant mixture, q8_0 or q4_0), not lowrank-q4")),
                 qPrintable(panel.quantizeUnavailableReason()));
        QCOMPARE(panel.startQuantize(), quint64(0));
        panel.setPreset(QStringLiteral("q4_k_m"));
        QVERIFY(panel.setOverride(QStringLiteral("method"), QStringLiteral("q8_0")));
        QVERIFY(!panel.runButton()->isEnabled());
        QVERIFY(panel.quantizeUnavailableReason().contains(QStringLiteral("set Method back to preset")));
        QVERIFY(panel.setOverride(QStringLiteral("method"), QString()));
        QVERIFY(panel.runButton()->isEnabled());

        ui::CalibrationFiles* calib = panel.calibrationFiles();
        QVERIFY(calib->setFile(Kind::Importance, QString::fromStdString(imatrix)) != 0);
        QCOMPARE(waitLoaded(calib, Kind::Importance), QString::fromStdString(imatrix));

        QSignalSpy quantized(&panel, &ui::QuantizePanel::quantized);
        QVERIFY(panel.startQuantize() != 0);
        QVERIFY(quantized.wait(180000));
        QVERIFY(panel.lastPlan().has_value());

        auto importance = load_model_importance(imatrix, *model);
        QVERIFY(static_cast<bool>(importance));
        auto plan = plan_target_bpw(*model, 5.0, importance->by_tensor, 1);
        QVERIFY2(static_cast<bool>(plan), plan.message().c_str());
        QVERIFY(plan->weighted && panel.lastPlan()->weighted);
        const std::map<std::string, Method> chosen = planned_methods(*plan);  // by tensor name
        std::set<Method> used;
        for (const auto& [name, method] : chosen) used.insert(method);
        QVERIFY2(used.size() >= 2, "the budget lies between two types: the plan mixes them");
        QCOMPARE(panel.lastPlan()->tensors.size(), plan->tensors.size());
        for (const BpwPlanTensor& t : panel.lastPlan()->tensors)
            QCOMPARE(t.candidates[t.chosen].method, chosen.at(t.name));
        expect_planned_methods(*panel.lastReport(), chosen);
        if (QTest::currentTestFailed()) return;
        // The command is the CLI's: the plan's overrides, then the imatrix.
        QuantizeOptions o;
        o.preset = "q4_k_m";
        o.per_layer = plan->overrides;
        o.importance_command = importance->command;
        QCOMPARE(panel.lastReport()->command, quantize_command(o));
        QVERIFY2(panel.totalsText().contains(QStringLiteral("Target 5.000 bits per weight")),
                 qPrintable(panel.totalsText()));

        // The heat map's Method measure shows each projection's chosen type.
        panel.measureCombo()->setCurrentIndex(panel.measureCombo()->findText(QStringLiteral("Method")));
        ui::LayerRoleModel* grid = panel.layerRoleModel();
        for (const auto& [name, method] : chosen) {
            const QModelIndex cell = grid->indexOfTensor(QString::fromStdString(name));
            QVERIFY2(cell.isValid(), name.c_str());
            QCOMPARE(cell.data(Qt::DisplayRole).toString(), ui::methodText(method));
            QCOMPARE(
                cell.data(ui::LayerRoleModel::MethodRole).toString(),
                QString::fromLatin1(method_name(method).data(), static_cast<qsizetype>(method_name(method).size())));
        }

        // The Tuning view's new rknot of that knot (gkq rknot encode) carries the types.
        ui::RknotEditor editor(&runner, &panel);
        editor.setModel(model);
        QSignalSpy encoded(&editor, &ui::RknotEditor::encoded);
        QVERIFY(editor.newFromKnot(panel.lastKnotPath(), QString::fromStdString(model_path), true) != 0);
        QVERIFY(encoded.wait(120000));
        const Rknot& r = editor.treeModel()->rknot();
        size_t in_rknot = 0;
        for (const RknotLayer& l : r.layers) {
            auto it = chosen.find(l.tensor);
            if (it == chosen.end()) continue;
            ++in_rknot;
            QCOMPARE(l.method, std::string(method_name(it->second)));
        }
        QCOMPARE(in_rknot, chosen.size());

        // A tuning with the same choice (the plan's overrides; an rknot's rknot_layer_overrides refuses the k-quant
        // methods today, as `gkq quantize --tuning` does): refused while the target would choose the types again, as
        // the CLI refuses --target-bpw with --tuning; with the target off, the same types.
        QCOMPARE(panel.startQuantizeWithTuning(plan->overrides, QStringLiteral("the plan")), quint64(0));
        QVERIFY2(panel.statusText().contains(QStringLiteral("set the target to off")), qPrintable(panel.statusText()));
        QVERIFY(panel.setTargetBpw(0.0));
        QVERIFY(panel.startQuantizeWithTuning(plan->overrides, QStringLiteral("the plan")) != 0);
        QVERIFY(quantized.wait(180000));
        QVERIFY(!panel.lastPlan().has_value());
        expect_planned_methods(*panel.lastReport(), chosen);
        if (QTest::currentTestFailed()) return;

        // A target below what the cheapest types need fails in the job with the engine's message.
        QVERIFY(panel.setTargetBpw(1.0));
        QSignalSpy error(&panel, &ui::QuantizePanel::errorOccurred);
        QVERIFY(panel.startQuantize() != 0);
        QVERIFY(error.wait(180000));
        QVERIFY2(panel.statusText().contains(QStringLiteral("below what the cheapest types need")),
                 qPrintable(panel.statusText()));
        QVERIFY(panel.runButton()->isEnabled());

        if (qgetenv("GKQ_CLI").isEmpty()) QSKIP("GKQ_CLI is not set (run through ctest): the CLI half is not checked");
        auto c = test::run_gkq_as<std::string>({"quantize", QString::fromStdString(model_path), "-o",
                                                QString::fromStdString(m_dir.file("k256-cli.knot")), "--target-bpw",
                                                "5", "--imatrix", QString::fromStdString(imatrix), "--json"});
        QVERIFY2(c.code == 0, c.err.c_str());
        const nlohmann::json j = nlohmann::json::parse(c.out);
        QCOMPARE(j["command"].get<std::string>(), quantize_command(o));
        for (const auto& t : j["target_bpw"]["tensors"])
            QCOMPARE(t["chosen"].get<std::string>(), std::string(method_name(chosen.at(t["name"].get<std::string>()))));
    }

    // A sensitivity text weights the target's choice by each matrix's measured effect on the output, as
    // `gkq quantize --target-bpw --sensitivity-text` does: the panel's plan is the engine's with the same probe (types
    // and measured KLDs), token_embd and output are chosen too, and the text is refused without a target.
    void sensitivityTextWeightsTheTargetsChoice() {
        const ModelConfig config = k256_config();
        test::TinyModel tm = test::make_tiny_model(config, 37);
        const std::string model_path = m_dir.file("k256-sens.gguf");
        QVERIFY(write_gguf(model_path, config, tm.tensors, test::byte_vocabulary()).is_ok());
        const std::string text_path = m_dir.file("sensitivity.txt");
        std::string text;
        for (int i = 0; i < 12; ++i) text += "The quick brown fox jumps over the lazy dog " + std::to_string(i) + ". ";
        test::write_file(text_path, std::string_view(text));
        auto model = open_shared(model_path);

        ui::JobRunner runner;
        ui::QuantizePanel panel(&runner);
        panel.setModel(model);
        panel.setPreset(QStringLiteral("q4_k_m"));
        QVERIFY(!panel.setSensitivityText(QString::fromStdString(m_dir.file("missing.txt"))));
        QVERIFY(panel.sensitivityText().isEmpty());
        QVERIFY(panel.setSensitivityText(QString::fromStdString(text_path)));
        QVERIFY(!panel.runButton()->isEnabled());  // the target is off
        QVERIFY2(panel.quantizeUnavailableReason().contains(QStringLiteral("set a target, or clear the text")),
                 qPrintable(panel.quantizeUnavailableReason()));
        QCOMPARE(panel.startQuantize(), quint64(0));
        QVERIFY(panel.setTargetBpw(5.0));
        QVERIFY(panel.runButton()->isEnabled());

        QSignalSpy quantized(&panel, &ui::QuantizePanel::quantized);
        QVERIFY(panel.startQuantize() != 0);
        QVERIFY(quantized.wait(300000));
        QVERIFY(panel.lastPlan().has_value());
        const BpwPlan& shown = *panel.lastPlan();
        QVERIFY(shown.output_measured);
        QVERIFY2(panel.totalsText().contains(QStringLiteral("measured effect on the output")),
                 qPrintable(panel.totalsText()));

        OutputProbeRequest request;
        request.text_path = text_path;
        auto probe = make_output_probe(*model, request);
        QVERIFY2(static_cast<bool>(probe), probe.message().c_str());
        auto plan = plan_target_bpw(*model, 5.0, {}, 0, {}, *probe);
        QVERIFY2(static_cast<bool>(plan), plan.message().c_str());
        QCOMPARE(shown.tensors.size(), plan->tensors.size());
        bool embeddings = false;
        for (size_t i = 0; i < plan->tensors.size(); ++i) {
            const BpwPlanTensor& a = shown.tensors[i];
            const BpwPlanTensor& b = plan->tensors[i];
            QCOMPARE(a.name, b.name);
            QCOMPARE(a.candidates[a.chosen].method, b.candidates[b.chosen].method);
            QCOMPARE(a.probe_kld, b.probe_kld);
            QVERIFY2(a.probe_kld >= 0.0, a.name.c_str());
            embeddings = embeddings || a.name == "token_embd.weight" || a.name == "output.weight";
        }
        QVERIFY2(embeddings, "token_embd and output are in the measured plan");
        expect_planned_methods(*panel.lastReport(), planned_methods(*plan));
        if (QTest::currentTestFailed()) return;

        QVERIFY(panel.setSensitivityText(QString()));  // cleared: the plan is the unmeasured one again
        QVERIFY(panel.startQuantize() != 0);
        QVERIFY(quantized.wait(300000));
        QVERIFY(panel.lastPlan().has_value() && !panel.lastPlan()->output_measured);
    }
};

QTEST_MAIN(TestQuantizeCalibration)
#include "test_quantize_calibration.moc"
