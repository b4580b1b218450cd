// Opening a knot in the workbench, offscreen: the demo model quantized by the core into a temporary knot opens
// through MainWindow::openModel (and by drag and drop) as the knot itself — its Weights, nothing decoded into a file
// beside it or in a scratch folder — with the knot's names in its order, each record read_f32 decoding to exactly
// what the core decodes, the Overview and browser showing each record's method and stored bytes, the spectra of the
// decoded records, and the overview saying what the knot records (preset, bytes, bits per weight). Quantize encodes
// the knot again (as the core does from the knot), Saturation profiles it. A truncated knot fails naming the file. The
// Overview names the tokenizer of a model, a knot and a GGUF.
#include "gkq/codec.h"
#include "gkq/knot.h"
#include "gkq/model_file.h"
#include "gkq/quantize.h"
#include "gkq/spectrum.h"
#include "gkq/tokenizer.h"
#include "models/display_format.h"
#include "models/model_tree_model.h"
#include "models/spectrum_store.h"
#include "models/tensor_table_model.h"
#include "test_support.h"
#include "tiny_model.h"
#include "widgets/main_window.h"
#include "widgets/model_browser.h"
#include "widgets/quantize_panel.h"
#include "widgets/saturation_panel.h"
#include "widgets/spectrum_panel.h"

#include <QApplication>
#include <QDirIterator>
#include <QLabel>
#include <QMimeData>
#include <QSettings>
#include <QSignalSpy>
#include <QTabWidget>
#include <QtTest>
#include <cmath>
#include <cstring>
#include <map>

using namespace gkq;
using ui::MainWindow;

class TestWorkbenchKnot : public QObject {
    Q_OBJECT
    test::TempDir m_dir;
    QString m_demo;
    QString m_knot;     // alone in its folder
    QString m_scratch;  // $TMPDIR of the workbench: its scratch folders
    std::optional<QuantizeReport> m_report;

    // Every file under `dir`, recursively (empty folders are not files).
    static QStringList filesUnder(const QString& dir) {
        QStringList out;
        QDirIterator it(dir, QDir::Files | QDir::Hidden | QDir::System, QDirIterator::Subdirectories);
        while (it.hasNext()) out << it.next();
        return out;
    }

    static bool open(MainWindow& w, const QString& path) {
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        w.openModel(path);
        return loaded.wait(120000);
    }

private slots:
    void initTestCase() {
        QCoreApplication::setOrganizationName(QStringLiteral("gkq-tests"));
        QCoreApplication::setApplicationName(QStringLiteral("test_workbench_knot"));
        QSettings().clear();
        m_demo = MainWindow::demoModelPath();
        if (m_demo.isEmpty()) QSKIP("needs the bundled demo model (resources/demo)");
        auto model = ModelFile::open(m_demo.toStdString());
        QVERIFY2(model.is_ok(), model.message().c_str());
        QuantizeOptions options;
        options.preset = "lowrank-q4";
        QVERIFY(QDir().mkpath(QString::fromStdString(m_dir.file("knot"))));
        m_scratch = QString::fromStdString(m_dir.file("tmp"));
        QVERIFY(QDir().mkpath(m_scratch));
        qputenv("TMPDIR", m_scratch.toLocal8Bit());  // the workbench's QTemporaryDirs go here
        QCOMPARE(QDir::tempPath(), QDir(m_scratch).canonicalPath());
        m_knot = QString::fromStdString(m_dir.file("knot/demo.knot"));
        auto report = quantize_model(*model, options, m_knot.toStdString());
        QVERIFY2(report.is_ok(), report.message().c_str());
        m_report = std::move(report).value();
    }

    void opensAKnotAsItsOwnWeights() {
        auto knot = KnotFile::open(m_knot.toStdString());
        QVERIFY2(knot.is_ok(), knot.message().c_str());
        MainWindow w;
        w.resize(1280, 800);
        w.show();
        QSignalSpy analyzed(w.spectrumPanel(), &ui::SpectrumPanel::analyzed);
        QVERIFY(open(w, m_knot));
        QVERIFY2(w.lastError().isEmpty(), qPrintable(w.lastError()));
        QCOMPARE(w.modelPath(), m_knot);
        QVERIFY(w.knot().has_value());
        QVERIFY(analyzed.count() > 0 || analyzed.wait(120000));
        QVERIFY(!w.spectrumPanel()->store()->isEmpty());

        // The knot itself, read in place: beside it only the spectra cache (docs/spectrum-cache.md), nothing in the
        // scratch folders (no decoded model), once it is open and every matrix's spectrum has been computed from its
        // records.
        QStringList beside = filesUnder(QFileInfo(m_knot).absolutePath());
        beside.sort();
        const QString knotFile = QFileInfo(m_knot).absoluteFilePath();
        QCOMPARE(beside, (QStringList{knotFile, knotFile + QStringLiteral(".gkq-spectra")}));
        QCOMPARE(filesUnder(m_scratch), QStringList{});
        const Weights& weights = *w.model();
        QCOMPARE(weights.kind(), std::string_view("on-disk"));
        QCOMPARE(weights.label(), m_knot.toStdString());

        // The knot's tensors, by its names and in its order, holding what the core decodes from each record.
        QCOMPARE(weights.n_tensors(), knot->n_records());
        QCOMPARE(w.tensorModel()->rowCount(), static_cast<int>(knot->n_records()));
        for (size_t i = 0; i < weights.n_tensors(); ++i) {
            QCOMPARE(weights.tensor_info(i).name, knot->entries()[i].name);
            QCOMPARE(weights.tensor_info(i).shape, knot->entries()[i].shape);
            QCOMPARE(weights.tensor_info(i).dtype, knot->entries()[i].dtype);
        }
        const std::string upName = "model.layers.1.mlp.up_proj.weight";
        const int64_t up = knot->find(upName);
        QVERIFY(up >= 0);
        const KnotEntry& upEntry = knot->entries()[static_cast<size_t>(up)];
        QCOMPARE(upEntry.method, Method::LowRankResidual);  // a lossy record: factors plus Q4_0 blocks
        auto record = knot->read(static_cast<size_t>(up));
        QVERIFY(record.is_ok());
        auto decoded = decode_tensor(*record);
        QVERIFY(decoded.is_ok());
        auto shown = weights.read_f32(static_cast<size_t>(up));
        QVERIFY2(shown.is_ok(), shown.message().c_str());
        QCOMPARE(shown->size(), decoded->size());
        QVERIFY(std::memcmp(shown->data(), decoded->data(), decoded->size() * sizeof(float)) == 0);

        // Overview and browser: each record's own method and stored bytes, not a decoded float32 copy's.
        const QString upQ = QString::fromStdString(upName);
        std::map<QString, int> tableMethods;
        for (int row = 0; row < w.tensorModel()->rowCount(); ++row) {
            const auto cell = [&](int column, int role = Qt::DisplayRole) {
                return w.tensorModel()->data(w.tensorModel()->index(row, column), role);
            };
            const KnotEntry& e = knot->entries()[static_cast<size_t>(row)];
            QCOMPARE(cell(ui::TensorTableModel::Name).toString(), QString::fromStdString(e.name));
            QCOMPARE(cell(ui::TensorTableModel::Type).toString(), QString::fromLatin1(method_name(e.method).data()));
            QCOMPARE(cell(ui::TensorTableModel::Bytes, Qt::UserRole).toULongLong(), e.record_bytes);
            ++tableMethods[cell(ui::TensorTableModel::Type).toString()];
        }
        QCOMPARE(tableMethods.size(), size_t{2});  // lowrank-q4: every matrix low rank plus residual, the norms f32
        QCOMPARE(tableMethods[QStringLiteral("f32")] + tableMethods[QStringLiteral("lowrank+residual")],
                 static_cast<int>(knot->n_records()));
        ui::ModelTreeModel* tree = w.browser()->treeModel();
        const QModelIndex upItem = tree->indexOfTensor(upQ);
        QVERIFY(upItem.isValid());
        QCOMPARE(tree->data(upItem.siblingAtColumn(ui::ModelTreeModel::Type)).toString(),
                 QStringLiteral("lowrank+residual"));
        QCOMPARE(
            tree->data(upItem.siblingAtColumn(ui::ModelTreeModel::Bytes), ui::ModelTreeModel::RawRole).toULongLong(),
            upEntry.record_bytes);

        // Spectrum: the singular values of the decoded record.
        const auto spectrum = w.spectrumPanel()->store()->find(upQ);
        QVERIFY(spectrum != nullptr);
        std::vector<double> expected;
        QVERIFY(singular_values(decoded->data(), upEntry.rows(), upEntry.cols(), expected).is_ok());
        QCOMPARE(spectrum->singular_values.size(), expected.size());
        for (size_t i = 0; i < expected.size(); ++i)
            QVERIFY2(
                std::fabs(spectrum->singular_values[i] - expected[i]) <= 1e-9 * expected[0],
                qPrintable(QStringLiteral("s%1: %2 vs %3").arg(i).arg(spectrum->singular_values[i]).arg(expected[i])));

        // What the knot records about itself, exactly.
        const ui::KnotSummary& k = *w.knot();
        QCOMPARE(k.preset, std::string("lowrank-q4"));
        QCOMPARE(k.file_bytes, m_report->file_bytes);
        QCOMPARE(k.file_bytes, knot->file_bytes());
        QCOMPARE(k.n_params, m_report->n_params);
        QCOMPARE(k.bitsPerWeight(), m_report->bits_per_weight());
        QCOMPARE(k.n_records, knot->n_records());
        QVERIFY(w.windowTitle().contains(QStringLiteral("knot")));
        QVERIFY(w.windowTitle().contains(QString::number(m_report->bits_per_weight(), 'f', 3)));

        // Quantize and Compare work on the knot and say what they measure against: the knot, not its original.
        const QString notice = w.knotNotice();
        QVERIFY(notice.contains(QStringLiteral("original")));
        QVERIFY(notice.contains(m_knot));
        QVERIFY(w.tabs()->isTabEnabled(MainWindow::QuantizeTab));
        QVERIFY(w.tabs()->isTabEnabled(MainWindow::CompareTab));
        QCOMPARE(w.tabs()->tabToolTip(MainWindow::QuantizeTab), notice);
        QCOMPARE(w.tabs()->tabToolTip(MainWindow::CompareTab), notice);

        // Quantize from the open knot: the knot's records decoded and encoded again, byte for byte what the core
        // writes from the knot with the same options (and the core refuses without allow_requantize).
        ui::QuantizePanel* quantize = w.quantizePanel();
        quantize->setPreset(QStringLiteral("q8_0"));
        QSignalSpy quantized(quantize, &ui::QuantizePanel::quantized);
        QVERIFY(quantize->startQuantize() != 0);
        QVERIFY(quantized.wait(120000));
        QuantizeOptions again;
        again.preset = "q8_0";
        again.producer = "gkq-workbench";
        const std::string direct = m_dir.file("direct-q8_0.knot");
        auto refused = quantize_model(*knot, again, direct);
        QVERIFY(!refused.is_ok());
        QVERIFY2(refused.message().find(m_knot.toStdString() + ": tensor ") == 0 &&
                     refused.message().find("already quantized (lowrank+residual)") != std::string::npos,
                 refused.message().c_str());
        again.allow_requantize = true;
        auto written = quantize_model(*knot, again, direct);
        QVERIFY2(written.is_ok(), written.message().c_str());
        QCOMPARE(test::read_file(quantize->lastKnotPath().toStdString()), test::read_file(direct));
        auto requantized = KnotFile::open(direct);
        QVERIFY(requantized.is_ok());
        QCOMPARE(requantized->n_records(), knot->n_records());
        const MetaValue* source = requantized->header().metadata.find("gkq.source_format");
        QVERIFY(source != nullptr && source->as_string() != nullptr && *source->as_string() == "knot");

        // Saturation profiles the knot; this knot carries no vocabulary (the demo keeps its tokenizer.bin beside the
        // model), so the panel asks for a tokenizer, naming the knot, and runs once one is chosen.
        ui::SaturationPanel* saturation = w.saturationPanel();
        saturation->setMaxTokens(200);
        QSignalSpy errors(saturation, &ui::SaturationPanel::errorOccurred);
        QSignalSpy profiled(saturation, &ui::SaturationPanel::profiled);
        QVERIFY(saturation->startProfile() != 0);
        QTRY_COMPARE_WITH_TIMEOUT(errors.count(), 1, 60000);
        QVERIFY2(saturation->errorText().contains(m_knot + QStringLiteral(" has no vocabulary")),
                 qPrintable(saturation->errorText()));
        saturation->setTokenizerPath(QDir(m_demo).filePath(QStringLiteral("tokenizer.bin")));
        QVERIFY(saturation->startProfile() != 0);
        QVERIFY(profiled.wait(120000));
        const ModelConfig& c = weights.config();
        QCOMPARE(saturation->masksImage().size(), QSize(static_cast<int>(c.hidden_dim), static_cast<int>(c.n_layers)));
        QCOMPARE(saturation->currentProfile()->n_tokens, int64_t{200});
        QVERIFY(saturation->summaryText().contains(QStringLiteral("--tokenizer")));

        // Reopening a model file: no notice.
        QVERIFY(open(w, m_demo));
        QVERIFY(!w.knot().has_value());
        QVERIFY(w.knotNotice().isEmpty());
        QCOMPARE(w.model()->kind(), std::string_view("model-file"));
        QVERIFY(w.tabs()->isTabEnabled(MainWindow::QuantizeTab));
        QVERIFY(w.tabs()->isTabEnabled(MainWindow::CompareTab));
    }

    void droppingAKnotOpensIt() {
        MainWindow w;
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        QMimeData mime;
        mime.setUrls({QUrl::fromLocalFile(m_knot)});
        QDragEnterEvent enter(QPoint(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(&w, &enter);
        QVERIFY(enter.isAccepted());
        QDropEvent drop(QPointF(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(&w, &drop);
        QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 120000);
        QVERIFY(w.knot().has_value());
        QCOMPARE(w.recentFiles().value(0), QFileInfo(m_knot).absoluteFilePath());
    }

    // The Overview names the tokenizer the commands run the model with, as gkq inspect does: the demo model's
    // tokenizer.bin (sentencepiece-style, its size and special ids), a GGUF's vocabulary with its fill-in-the-middle
    // ids, and why a knot has none.
    void overviewShowsTheTokenizer() {
        auto demo = ModelFile::open(m_demo.toStdString());
        QVERIFY2(demo.is_ok(), demo.message().c_str());
        auto tok = tokenizer_for_model(m_demo.toStdString(), demo->vocabulary(), demo->config().vocab_size);
        QVERIFY2(tok.is_ok(), tok.message().c_str());
        QCOMPARE(int(tok->family()), int(TokenizerFamily::Spm));
        const QString line = QStringLiteral(
                                 "tokenizer <b>spm</b>, %1 tokens, bos %2, eos %3, eot none, generation "
                                 "ends at %3")
                                 .arg(ui::formatCount(static_cast<qint64>(tok->vocab_size())))
                                 .arg(tok->bos_id())
                                 .arg(tok->eos_id());
        MainWindow w;
        QVERIFY(!w.overviewSummary()->text().contains(QStringLiteral("tokenizer")));
        QVERIFY(open(w, m_demo));
        QVERIFY2(w.overviewSummary()->text().contains(line), qPrintable(w.overviewSummary()->text()));
        // the knot quantize_model() wrote holds no vocabulary (gkq quantize stores the one it finds), and nothing
        // beside it is one
        QVERIFY(open(w, m_knot));
        QVERIFY2(w.overviewSummary()->text().contains(QStringLiteral("<br>tokenizer none: ") + m_knot +
                                                      QStringLiteral(" has no vocabulary")),
                 qPrintable(w.overviewSummary()->text()));
        const std::string sp = "\xE2\x96\x81";
        const Vocabulary fim = test::tiny_vocabulary(
            {sp + "a", "ab", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "de", "ef", "fg", "gh", "hi"});
        QVERIFY(QDir().mkpath(QString::fromStdString(m_dir.file("gguf"))));
        const QString gguf = QString::fromStdString(test::write_tiny_gguf(m_dir.file("gguf/fim.gguf"), true, 3, fim));
        QVERIFY(open(w, gguf));
        QVERIFY2(w.overviewSummary()->text().contains(QStringLiteral(
                     "tokenizer <b>spm</b>, 40 tokens, bos 1, eos 2, eot none, fim pre 32 suf 33 mid 34, generation "
                     "ends at 2")),
                 qPrintable(w.overviewSummary()->text()));
    }

    void aTruncatedKnotFailsNamingTheFile() {
        const std::vector<uint8_t> bytes = test::read_file(m_knot.toStdString());
        const QString bad = QString::fromStdString(m_dir.file("truncated.knot"));
        test::write_file(bad.toStdString(), std::vector<uint8_t>(bytes.begin(), bytes.begin() + bytes.size() / 2));
        MainWindow w;
        QVERIFY(open(w, m_demo));
        QSignalSpy failed(&w, &MainWindow::loadFailed);
        w.openModel(bad);
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 60000);
        QVERIFY2(failed.at(0).at(0).toString().contains(bad), qPrintable(failed.at(0).at(0).toString()));
        QVERIFY(w.lastError().contains(bad));
        QCOMPARE(w.modelPath(), m_demo);  // the open model stays
        QVERIFY(!w.knot().has_value());
    }
};

QTEST_MAIN(TestWorkbenchKnot)
#include "test_workbench_knot.moc"
