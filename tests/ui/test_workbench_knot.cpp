// Opening a knot in the workbench, offscreen: the demo model quantized by the core into a temporary knot opens
// through MainWindow::openModel (and by drag and drop) as its decoded tensors — the knot's names, in its order,
// holding exactly the values the core decodes — with the overview saying it is a knot and what the knot records
// (preset, bytes, bits per weight); the views that need the original say so. A truncated knot fails naming the file.
#include "gkq/codec.h"
#include "gkq/knot.h"
#include "gkq/quantize.h"
#include "models/spectrum_store.h"
#include "models/tensor_table_model.h"
#include "test_support.h"
#include "widgets/main_window.h"
#include "widgets/quantize_panel.h"
#include "widgets/saturation_panel.h"
#include "widgets/spectrum_panel.h"

#include <QApplication>
#include <QMimeData>
#include <QSettings>
#include <QSignalSpy>
#include <QTabWidget>
#include <QtTest>
#include <cstring>

using namespace gkq;
using ui::MainWindow;

class TestWorkbenchKnot : public QObject {
    Q_OBJECT
    test::TempDir m_dir;
    QString m_demo;
    QString m_knot;
    std::optional<QuantizeReport> m_report;

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
        m_knot = QString::fromStdString(m_dir.file("demo.knot"));
        auto report = quantize_model(*model, options, m_knot.toStdString());
        QVERIFY2(report.is_ok(), report.message().c_str());
        m_report = std::move(report).value();
    }

    void opensAKnotAsItsDecodedTensors() {
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

        // The knot's tensors, by its names and in its order, holding what the core decodes from each record.
        const auto& tensors = w.model()->tensors();
        QCOMPARE(tensors.size(), knot->n_records());
        QCOMPARE(w.tensorModel()->rowCount(), static_cast<int>(knot->n_records()));
        for (size_t i = 0; i < tensors.size(); ++i) {
            QCOMPARE(tensors[i].name, knot->entries()[i].name);
            QCOMPARE(tensors[i].shape, knot->entries()[i].shape);
        }
        const int64_t up = knot->find("model.layers.1.mlp.up_proj.weight");
        QVERIFY(up >= 0);
        QVERIFY(knot->entries()[static_cast<size_t>(up)].method != Method::F32);  // a lossy record
        auto record = knot->read(static_cast<size_t>(up));
        QVERIFY(record.is_ok());
        auto decoded = decode_tensor(*record);
        QVERIFY(decoded.is_ok());
        const Tensor& shown = tensors[static_cast<size_t>(up)];
        QCOMPARE(shown.dtype, DType::F32);
        QCOMPARE(shown.n_bytes, decoded->size() * sizeof(float));
        QVERIFY(std::memcmp(shown.data, decoded->data(), shown.n_bytes) == 0);

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

        // Quantize (with its Evaluate) and Compare need the original: off, and the window says why.
        const QString notice = w.knotNotice();
        QVERIFY(notice.contains(QStringLiteral("original")));
        QVERIFY(notice.contains(m_knot));
        QVERIFY(!w.tabs()->isTabEnabled(MainWindow::QuantizeTab));
        QVERIFY(!w.tabs()->isTabEnabled(MainWindow::CompareTab));
        QCOMPARE(w.tabs()->tabToolTip(MainWindow::QuantizeTab), notice);
        QVERIFY(w.tabs()->isTabEnabled(MainWindow::SaturationTab));

        // The spectra are those of the decoded weights (a rank-r matrix has r non-negligible singular values).
        QVERIFY(analyzed.count() > 0 || analyzed.wait(120000));
        QVERIFY(!w.spectrumPanel()->store()->isEmpty());

        // Saturation profiles the decoded knot; this knot carries no vocabulary (the demo keeps its tokenizer.bin
        // beside the model), so the panel asks for a tokenizer, naming the knot, and runs once one is chosen.
        ui::SaturationPanel* saturation = w.saturationPanel();
        saturation->setMaxTokens(200);
        QSignalSpy errors(saturation, &ui::SaturationPanel::errorOccurred);
        QSignalSpy profiled(saturation, &ui::SaturationPanel::profiled);
        QVERIFY(saturation->startProfile() != 0);
        QTRY_COMPARE_WITH_TIMEOUT(errors.count(), 1, 60000);
        QVERIFY2(saturation->errorText().contains(m_knot + QStringLiteral(": no vocabulary")),
                 qPrintable(saturation->errorText()));
        saturation->setTokenizerPath(QDir(m_demo).filePath(QStringLiteral("tokenizer.bin")));
        QVERIFY(saturation->startProfile() != 0);
        QVERIFY(profiled.wait(120000));
        const ModelConfig& c = w.model()->config();
        QCOMPARE(saturation->masksImage().size(), QSize(static_cast<int>(c.hidden_dim), static_cast<int>(c.n_layers)));
        QCOMPARE(saturation->currentProfile()->n_tokens, int64_t{200});
        QVERIFY(saturation->summaryText().contains(QStringLiteral("--tokenizer")));

        // Reopening a model file turns everything back on.
        QVERIFY(open(w, m_demo));
        QVERIFY(!w.knot().has_value());
        QVERIFY(w.knotNotice().isEmpty());
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
