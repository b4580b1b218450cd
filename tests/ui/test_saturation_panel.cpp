// The Saturation view, offscreen: profile the demo model on the first tokens of its held-out text through the panel
// (a JobRunner job) and check every number it shows against gkq::profile_saturation run directly here; re-derive
// the masks for another minimum frequency without a model run; change T (a new job); Cancel; masks files written
// by the core load back identically, and a corrupt one is refused with an error naming the file.
#include "charts/saturation_histogram.h"
#include "gkq/model_file.h"
#include "gkq/saturation.h"
#include "gkq/tokenizer.h"
#include "gkq/transformer.h"
#include "jobs/job_runner.h"
#include "test_support.h"
#include "tiny_model.h"
#include "widgets/main_window.h"
#include "widgets/saturation_panel.h"

#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableWidget>
#include <QtTest>
#include <cstdio>
#include <fstream>
#include <sstream>

using namespace gkq;

class TestSaturationPanel : public QObject {
    Q_OBJECT
    static constexpr int kTokens = 300;  // a short text: the demo profiles it in well under a second
    test::TempDir m_dir;
    QString m_demo;
    QString m_text;
    std::shared_ptr<const ModelFile> m_model;

    // What the panel should show: the core's profile of the same tokens, computed here without the panel.
    std::vector<SaturationProfile> direct(const std::vector<double>& thresholds, double minFrequency) {
        auto tokenizer =
            Tokenizer::load_llama2c(QDir(m_demo).filePath("tokenizer.bin").toStdString(), m_model->config().vocab_size);
        if (!tokenizer) return {};
        std::ifstream in(m_text.toStdString(), std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        std::vector<int32_t> tokens = tokenizer->encode(ss.str(), true, false);
        tokens.resize(kTokens);
        auto t = Transformer::load(*m_model);
        if (!t) return {};
        SaturationOptions o;
        o.thresholds = thresholds;
        o.min_frequency = minFrequency;
        auto p = profile_saturation(*t, tokens, o);
        return p ? std::move(p).value() : std::vector<SaturationProfile>{};
    }

    // Every number the panel shows equals `expected`'s.
    static void checkShows(ui::SaturationPanel& panel, const SaturationProfile& expected) {
        QVERIFY(panel.currentProfile().has_value());
        const SaturationProfile& got = *panel.currentProfile();
        QCOMPARE(got.n_tokens, expected.n_tokens);
        QCOMPARE(got.threshold, expected.threshold);
        QCOMPARE(got.min_frequency, expected.min_frequency);
        QCOMPARE(got.layers.size(), expected.layers.size());
        std::vector<uint64_t> sum(kSaturationHistogramBins, 0);
        int64_t hot = 0;
        for (size_t l = 0; l < expected.layers.size(); ++l) {
            const LayerSaturation& e = expected.layers[l];
            QCOMPARE(got.layers[l].counts, e.counts);
            QCOMPARE(got.layers[l].hot, e.hot);
            QCOMPARE(got.layers[l].histogram, e.histogram);
            QCOMPARE(got.layers[l].scale, e.scale);
            const int row = static_cast<int>(l);
            QCOMPARE(panel.layerTable()->item(row, 3)->data(Qt::DisplayRole).toLongLong(), e.hot_count());
            QCOMPARE(panel.layerTable()->item(row, 5)->data(Qt::DisplayRole).toLongLong(),
                     e.neuron_count - e.hot_count());
            QCOMPARE(panel.layerTable()->item(row, 4)->text(),
                     QString::number(100.0 * double(e.hot_count()) / double(e.neuron_count), 'f', 2));
            for (size_t b = 0; b < sum.size(); ++b) sum[b] += e.histogram[b];
            hot += e.hot_count();
        }
        QCOMPARE(panel.histogram()->counts(), sum);  // "all layers" is the sum of the core's histograms
        QVERIFY2(panel.histogramText().contains(QStringLiteral("0: %1, ≤0.001: %2,").arg(sum[0]).arg(sum[1])),
                 qPrintable(panel.histogramText()));
        QVERIFY2(panel.summaryText().contains(QStringLiteral("Hot: %1 of").arg(hot)), qPrintable(panel.summaryText()));
    }

private slots:
    void initTestCase() {
        QCoreApplication::setOrganizationName(QStringLiteral("gkq-tests"));
        QCoreApplication::setApplicationName(QStringLiteral("test_saturation_panel"));
        QSettings().clear();
        m_demo = ui::MainWindow::demoModelPath();
        if (m_demo.isEmpty()) QSKIP("needs the bundled demo model (resources/demo)");
        m_text = QDir(m_demo).filePath(QStringLiteral("heldout.txt"));
        auto m = ModelFile::open(m_demo.toStdString());
        QVERIFY2(m.is_ok(), m.message().c_str());
        m_model = std::make_shared<ModelFile>(std::move(m).value());
    }

    void profilesExactlyAsTheCore() {
        ui::JobRunner runner;
        ui::SaturationPanel panel(&runner);
        panel.resize(1200, 800);
        panel.setModel(m_model);
        QCOMPARE(panel.textPath(), m_text);   // heldout.txt beside the model is the default
        QCOMPARE(panel.minFrequency(), 0.1);  // the default (test_workbench_steady)
        QVERIFY(panel.setMinFrequency(0.0));  // hot when it saturated once: the core's own default
        panel.setMaxTokens(kTokens);
        QSignalSpy profiled(&panel, &ui::SaturationPanel::profiled);
        QSignalSpy progress(&runner, &ui::JobRunner::progressChanged);
        QVERIFY(panel.startProfile() != 0);
        QVERIFY(panel.cancelButton()->isEnabled());
        QVERIFY(profiled.wait(120000));
        QVERIFY(progress.count() > 0);
        QVERIFY2(panel.errorText().isEmpty(), qPrintable(panel.errorText()));

        const auto expected = direct({1.0}, 0.0);
        QCOMPARE(expected.size(), size_t{1});
        checkShows(panel, expected[0]);
        const ModelConfig& c = m_model->config();
        QCOMPARE(panel.masksImage().size(), QSize(static_cast<int>(c.hidden_dim), static_cast<int>(c.n_layers)));
        const LayerSaturation& l0 = expected[0].layers[0];
        // Per-layer histogram.
        panel.setHistogramLayer(2);
        QCOMPARE(panel.histogram()->counts(), expected[0].layers[2].histogram);
        panel.setHistogramLayer(-1);
        QVERIFY(panel.summaryText().contains(QStringLiteral("--max-tokens %1").arg(kTokens)));

        // Another minimum frequency: re-derived from the stored counts, no job; equal to a fresh core run with it.
        QVERIFY(panel.setMinFrequency(0.01));
        QVERIFY(!runner.isBusy());
        const auto atOnePercent = direct({1.0, 2.0}, 0.01);
        QCOMPARE(atOnePercent.size(), size_t{2});
        checkShows(panel, atOnePercent[0]);
        QVERIFY(atOnePercent[0].layers[0].hot_count() < l0.hot_count());  // the rule bites on this text
        // Hot and cold neurons are told apart in the image.
        const LayerSaturation& m0 = atOnePercent[0].layers[0];
        int hotNeuron = -1, coldNeuron = -1;
        for (size_t j = 0; j < m0.hot.size(); ++j) (m0.hot[j] ? hotNeuron : coldNeuron) = static_cast<int>(j);
        QVERIFY(hotNeuron >= 0 && coldNeuron >= 0);
        QVERIFY(panel.masksImage().pixel(hotNeuron, 0) != panel.masksImage().pixel(coldNeuron, 0));
        std::printf("layer 0 at T = 1 on %d tokens: %lld hot neurons when frequency > 0, %lld when > 0.01, of %lld\n",
                    kTokens, static_cast<long long>(l0.hot_count()), static_cast<long long>(m0.hot_count()),
                    static_cast<long long>(m0.neuron_count));
        QVERIFY(!panel.setMinFrequency(1.0));  // out of [0, 1)
        QVERIFY(panel.errorText().contains(QStringLiteral("min_frequency")));
        QCOMPARE(panel.currentProfile()->min_frequency, 0.01);  // the shown masks are unchanged

        // Another T needs a new pass: the control starts a job, whose result is the core's at T = 2.
        QVERIFY(panel.setThreshold(2.0) != 0);
        QVERIFY(panel.isRunning());
        QVERIFY(profiled.wait(120000));
        checkShows(panel, atOnePercent[1]);
        QCOMPARE(panel.setThreshold(2.0), quint64{0});  // unchanged T: nothing to run

        // Masks files: what the core writes loads back identically.
        const QString masks = QString::fromStdString(m_dir.file("masks.json"));
        QVERIFY(panel.saveMasks(masks));
        ui::SaturationPanel other(&runner);
        QSignalSpy loaded(&other, &ui::SaturationPanel::masksLoaded);
        QVERIFY2(other.loadMasks(masks), qPrintable(other.errorText()));
        QCOMPARE(loaded.count(), 1);
        checkShows(other, atOnePercent[1]);
        QCOMPARE(other.masksImage(), panel.masksImage());
    }

    void cancelStopsAProfile() {
        ui::JobRunner runner;
        ui::SaturationPanel panel(&runner);
        panel.setModel(m_model);
        panel.setMaxTokens(0);  // the whole text
        QSignalSpy cancelled(&panel, &ui::SaturationPanel::profileCancelled);
        QSignalSpy profiled(&panel, &ui::SaturationPanel::profiled);
        QVERIFY(panel.startProfile() != 0);
        QVERIFY(!panel.profileButton()->isEnabled());
        panel.cancelButton()->click();
        QTRY_COMPARE_WITH_TIMEOUT(cancelled.count(), 1, 60000);
        QCOMPARE(profiled.count(), 0);
        QVERIFY(!panel.currentProfile().has_value());
        QVERIFY(!panel.isRunning());
        QVERIFY(panel.profileButton()->isEnabled());
        QVERIFY(!panel.cancelButton()->isEnabled());
    }

    void corruptMasksFilesAreRefusedByName() {
        ui::JobRunner runner;
        ui::SaturationPanel panel(&runner);
        QSignalSpy errors(&panel, &ui::SaturationPanel::errorOccurred);
        const std::string garbage = m_dir.file("garbage-masks.json");
        test::write_file(garbage, std::string("{\"format\": \"gkq-saturation-masks\", \"version\": 1, \"layers\": ["));
        QVERIFY(!panel.loadMasks(QString::fromStdString(garbage)));
        QVERIFY2(panel.errorText().contains(QString::fromStdString(garbage)), qPrintable(panel.errorText()));
        QCOMPARE(errors.count(), 1);
        QVERIFY(!panel.currentProfile().has_value());

        // A well-formed file whose mask does not match its recorded hash.
        const SaturationProfile p = test::small_saturation_profile();
        const std::string good = m_dir.file("good-masks.json");
        QVERIFY(write_saturation_profile(good, p).is_ok());
        std::ifstream in(good);
        std::stringstream ss;
        ss << in.rdbuf();
        std::string text = ss.str();
        const size_t at = text.find("\"hot_count\": 2");
        QVERIFY(at != std::string::npos);
        text.replace(at, 14, "\"hot_count\": 3");
        const std::string tampered = m_dir.file("tampered-masks.json");
        test::write_file(tampered, text);
        QVERIFY(!panel.loadMasks(QString::fromStdString(tampered)));
        QVERIFY2(panel.errorText().contains(QString::fromStdString(tampered)), qPrintable(panel.errorText()));
        QVERIFY(panel.errorText().contains(QStringLiteral("hot_count")));
        QVERIFY(panel.loadMasks(QString::fromStdString(good)));
        QCOMPARE(panel.masksImage().size(), QSize(3, 1));
    }

    void isATabOfTheMainWindow() {
        ui::MainWindow w;
        QCOMPARE(w.tabs()->widget(ui::MainWindow::SaturationTab), static_cast<QWidget*>(w.saturationPanel()));
        QCOMPARE(w.tabs()->tabText(ui::MainWindow::SaturationTab), QStringLiteral("Saturation"));
    }
};

QTEST_MAIN(TestSaturationPanel)
#include "test_saturation_panel.moc"
