// The workbench's exports against data loss, offscreen: Export knot and Export model refuse a file that is one of
// the inputs (the open model, through a symlink too, or the knot being exported) with a message box and leave it
// untouched; the chart exports of the Spectrum and Compare tabs and Saturation's Save masks the same; the quantize
// runs' scratch folder (run-N.knot) carries the process id, goes away with the panel, and one left by a dead process is
// removed by the next start.
#include "gkq/model_file.h"
#include "gkq/saturation.h"
#include "jobs/job_runner.h"
#include "jobs/scratch_dir.h"
#include "test_support.h"
#include "tiny_model.h"
#include "widgets/compare_panel.h"
#include "widgets/quantize_panel.h"
#include "widgets/saturation_panel.h"
#include "widgets/spectrum_panel.h"

#include <QApplication>
#include <QMessageBox>
#include <QSignalSpy>
#include <QtTest>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

using namespace gkq;
namespace fs = std::filesystem;

class TestExportGuard : public QObject {
    Q_OBJECT

    static QMessageBox* refusal(QWidget* w) {
        for (QMessageBox* b : w->findChildren<QMessageBox*>(QStringLiteral("exportRefused")))
            if (b->isVisible()) return b;
        return nullptr;
    }

private slots:
    void exportsRefuseTheirInputs() {
        test::TempDir dir;
        const std::string model_path = test::write_tiny_gguf(dir.file("m.gguf"), false, 1, test::tiny_vocabulary());
        const auto before = test::read_file(model_path);
        fs::create_symlink(model_path, dir.file("link.knot"));
        auto model = ModelFile::open(model_path);
        QVERIFY2(model.is_ok(), model.message().c_str());
        auto shared = std::make_shared<const ModelFile>(std::move(model).value());

        ui::JobRunner runner;
        ui::QuantizePanel panel(&runner);
        panel.setModel(shared);
        QSignalSpy quantized(&panel, &ui::QuantizePanel::quantized);
        QVERIFY(panel.startQuantize() != 0);
        QVERIFY(quantized.wait(60000));
        const QString knot = panel.lastKnotPath();
        QVERIFY(QFileInfo(knot).fileName().startsWith(QStringLiteral("run-")));

        for (const QString& target :
             {QString::fromStdString(model_path), QString::fromStdString(dir.file("link.knot"))}) {
            QCOMPARE(panel.exportKnot(target), quint64(0));
            QMessageBox* box = refusal(&panel);
            QVERIFY(box != nullptr);
            QVERIFY2(
                box->text().contains(QStringLiteral("this output is the input ") + QString::fromStdString(model_path)),
                qPrintable(box->text()));
            box->close();
            QCoreApplication::processEvents();
            QCOMPARE(panel.exportReconstructed(target), quint64(0));
            QVERIFY(refusal(&panel) != nullptr);
            refusal(&panel)->close();
            QCoreApplication::processEvents();
        }
        QCOMPARE(panel.exportKnot(knot), quint64(0));  // the scratch knot onto itself
        QVERIFY(refusal(&panel)->text().contains(QStringLiteral("this output is the input ") + knot));
        QVERIFY(test::read_file(model_path) == before);
        // another name is exported as before
        QSignalSpy exported(&panel, &ui::QuantizePanel::exported);
        QVERIFY(panel.exportKnot(QString::fromStdString(dir.file("out.knot"))) != 0);
        QVERIFY(exported.wait(30000));

        ui::SpectrumPanel spectrum(&runner);
        spectrum.setModel(shared);
        QString error;
        QVERIFY(!spectrum.exportPng(QString::fromStdString(model_path), &error));
        QVERIFY2(error.contains(QStringLiteral("this output is the input")), qPrintable(error));
        QVERIFY(refusal(&spectrum) != nullptr);
        QVERIFY(test::read_file(model_path) == before);

        // Compare's CSV / PNG / SVG exports and Saturation's "Save masks": the model, and the evaluation text
        const std::string text_path = dir.file("text.txt");
        test::write_file(text_path, "Once upon a time");
        const auto text_before = test::read_file(text_path);
        ui::ComparePanel compare(&runner);
        compare.setModel(shared);
        compare.setTextPath(QString::fromStdString(text_path));
        QVERIFY(!compare.exportCsv(QString::fromStdString(model_path)));
        QVERIFY(refusal(&compare) != nullptr);
        refusal(&compare)->close();
        QVERIFY(!compare.exportPng(QString::fromStdString(text_path)));
        QVERIFY(refusal(&compare) != nullptr);
        refusal(&compare)->close();
        QVERIFY(!compare.exportSvg(QString::fromStdString(dir.file("link.knot")), &error));
        QVERIFY2(error.contains(QStringLiteral("this output is the input")), qPrintable(error));
        QVERIFY(compare.exportCsv(QString::fromStdString(dir.file("compare.csv"))));  // another name is written
        QVERIFY(test::read_file(text_path) == text_before);

        // masks loaded from a file, then saved over the calibration text: refused
        const SaturationProfile p = test::small_saturation_profile();
        const std::string masks_path = dir.file("masks.json");
        QVERIFY(write_saturation_profile(masks_path, p).is_ok());
        ui::SaturationPanel saturation(&runner);
        saturation.setTextPath(QString::fromStdString(text_path));
        QVERIFY(saturation.loadMasks(QString::fromStdString(masks_path)));
        QVERIFY(!saturation.saveMasks(QString::fromStdString(text_path)));
        QVERIFY(refusal(&saturation) != nullptr);
        QVERIFY(test::read_file(text_path) == text_before);
        QVERIFY(saturation.saveMasks(QString::fromStdString(dir.file("masks2.json"))));
    }

    void scratchFoldersDoNotOutliveTheirProcess() {
        // The panel's folder: named with this process's id, removed with the panel.
        QString scratch;
        {
            ui::JobRunner runner;
            ui::QuantizePanel panel(&runner);
            test::TempDir dir;
            auto model = ModelFile::open(test::write_tiny_gguf(dir.file("m.gguf"), false));
            panel.setModel(std::make_shared<const ModelFile>(std::move(model).value()));
            QSignalSpy quantized(&panel, &ui::QuantizePanel::quantized);
            QVERIFY(panel.startQuantize() != 0);
            QVERIFY(quantized.wait(60000));
            scratch = QFileInfo(panel.lastKnotPath()).absolutePath();
            QVERIFY2(QFileInfo(scratch).fileName().startsWith(ui::scratchPrefix() + QString::number(getpid()) + "-"),
                     qPrintable(scratch));
            QVERIFY(QFileInfo::exists(panel.lastKnotPath()));
        }
        QVERIFY(!QFileInfo::exists(scratch));
        // One a killed workbench left (its pid runs nothing now) goes at the next start; a live one stays.
        const pid_t gone = fork();
        if (gone == 0) _exit(0);
        QCOMPARE(waitpid(gone, nullptr, 0), gone);
        const QString stale = QDir::tempPath() + "/" + ui::scratchPrefix() + QString::number(gone) + "-abcdef";
        const QString live = QDir::tempPath() + "/" + ui::scratchPrefix() + QString::number(getppid()) + "-abcdef";
        for (const QString& d : {stale, live}) {
            QVERIFY(QDir().mkpath(d));
            test::write_file((d + "/run-1.knot").toStdString(), std::string_view("partial"));
        }
        QVERIFY(ui::removeStaleScratch() >= 1);
        QVERIFY(!QFileInfo::exists(stale));
        QVERIFY(QFileInfo::exists(live + "/run-1.knot"));
        QDir(live).removeRecursively();
    }
};

QTEST_MAIN(TestExportGuard)
#include "test_export_guard.moc"
