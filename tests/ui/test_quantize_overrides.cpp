// The Quantize view's override controls come from the override table (gkq/quantize_fields.h): one control per row,
// each accepting the row's example and giving the options and recorded command the command line gives, refusing
// what the row refuses; and the command a workbench run records is accepted by `gkq quantize` as it stands.
#include "cli_run.h"
#include "gkq/model_file.h"
#include "gkq/quantize.h"
#include "gkq/quantize_fields.h"
#include "jobs/job_runner.h"
#include "test_support.h"
#include "tiny_model.h"
#include "widgets/quantize_panel.h"

#include <QSignalSpy>
#include <QtTest>
#include <nlohmann/json.hpp>

using namespace gkq;

class TestQuantizeOverrides : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { QCoreApplication::setOrganizationName(QStringLiteral("gkq-tests")); }

    void everyRowHasAControl() {
        ui::JobRunner runner;
        ui::QuantizePanel panel(&runner);
        panel.setPreset(QStringLiteral("lowrank-q4"));
        QStringList flags;
        for (const OverrideField& f : override_fields()) {
            const QString flag = QString::fromUtf8(f.flag.data(), static_cast<qsizetype>(f.flag.size()));
            const QString example = QString::fromUtf8(f.example.data(), static_cast<qsizetype>(f.example.size()));
            flags << flag;
            QWidget* control = panel.findChild<QWidget*>(QStringLiteral("override-") + flag);
            QVERIFY2(control != nullptr, qPrintable(flag));
            QVERIFY(
                control->toolTip().contains(QString::fromUtf8(f.help.data(), static_cast<qsizetype>(f.help.size()))));
            QVERIFY(panel.options().global.empty());
            QVERIFY2(panel.setOverride(flag, example), qPrintable(flag + QLatin1Char(' ') + example));
            const QuantizeOptions o = panel.options();
            QCOMPARE(f.get(o.global).value_or(""), std::string(f.example));
            QCOMPARE(quantize_command(o),
                     "quantize --preset lowrank-q4 --" + std::string(f.flag) + " " + std::string(f.example));
            QVERIFY(panel.setOverride(flag, QString()));
            QVERIFY(panel.options().global.empty());
        }
        QCOMPARE(panel.overrideFlags(), flags);
        QVERIFY(!panel.setOverride(QStringLiteral("bits"), QStringLiteral("3")));
        QVERIFY(!panel.setOverride(QStringLiteral("rank"), QStringLiteral("x")));
        QVERIFY(!panel.setOverride(QStringLiteral("residual"), QStringLiteral("q2")));
        QVERIFY(!panel.setOverride(QStringLiteral("frob"), QStringLiteral("1")));
        QVERIFY(panel.options().global.empty());
    }

    void recordedCommandRunsOnTheCommandLine() {
        test::TempDir dir;
        const std::string model_path = test::write_tiny_gguf(dir.file("tiny.gguf"), true, 5, test::tiny_vocabulary());
        auto model = ModelFile::open(model_path);
        QVERIFY(model);
        ui::JobRunner runner;
        ui::QuantizePanel panel(&runner);
        panel.setModel(std::make_shared<const ModelFile>(std::move(*model)));
        panel.setPreset(QStringLiteral("svd-energy"));
        for (const auto& [flag, value] : {std::pair{"rank", "3"},
                                          {"bits", "4"},
                                          {"residual", "q4_0"},
                                          {"energy", "0.95"},
                                          {"sigma-quantized", "on"}})
            QVERIFY(panel.setOverride(QString::fromLatin1(flag), QString::fromLatin1(value)));
        QSignalSpy quantized(&panel, &ui::QuantizePanel::quantized);
        QVERIFY(panel.startQuantize() != 0);
        QVERIFY(quantized.wait(120000));
        const std::string command = panel.lastReport()->command;
        QCOMPARE(command, std::string("quantize --preset svd-energy --rank 3 --energy 0.95 --bits 4 --sigma-quantized "
                                      "on --residual q4_0"));
        if (qgetenv("GKQ_CLI").isEmpty()) QSKIP("GKQ_CLI is not set (run through ctest): the CLI half is not checked");
        QStringList words = QString::fromStdString(command).split(QLatin1Char(' '), Qt::SkipEmptyParts);
        QCOMPARE(words.takeFirst(), QStringLiteral("quantize"));
        auto r = test::run_gkq_as<std::string>(QStringList{"quantize", QString::fromStdString(model_path), "-o",
                                                           QString::fromStdString(dir.file("cli.knot")), "--json"} +
                                               words);
        QVERIFY2(r.code == 0, r.err.c_str());
        QCOMPARE(nlohmann::json::parse(r.out)["command"].get<std::string>(), command);
    }
};

QTEST_MAIN(TestQuantizeOverrides)
#include "test_quantize_overrides.moc"
