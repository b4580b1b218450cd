// SVG export of the Compare (Pareto) and spectrum charts, offscreen: the file is written whole (no temporary left
// beside it), parses as XML with an <svg> root, carries the chart's title, each series with its exact point count
// and the axis titles; a failed write names the file.
#include "charts/chart_export.h"
#include "charts/pareto_chart.h"
#include "charts/spectrum_chart.h"
#include "jobs/job_runner.h"
#include "test_support.h"
#include "widgets/compare_panel.h"

#include <QChart>
#include <QDir>
#include <QFile>
#include <QImage>
#include <QXmlStreamReader>
#include <QtTest>

using namespace gkq;

class TestChartExport : public QObject {
    Q_OBJECT
    test::TempDir m_dir;

    struct Svg {
        bool wellFormed = false;
        QString root;
        QString title;
        QString desc;
        QStringList texts;  // every <text> element's characters
    };

    static Svg readSvg(const QString& path) {
        Svg out;
        QFile f(path);
        if (!f.open(QIODevice::ReadOnly)) return out;
        QXmlStreamReader xml(&f);
        QString current;
        while (!xml.atEnd()) {
            xml.readNext();
            if (xml.isStartElement()) {
                if (out.root.isEmpty()) out.root = xml.name().toString();
                current = xml.name().toString();
            } else if (xml.isCharacters() && !xml.isWhitespace()) {
                if (current == QLatin1String("title"))
                    out.title += xml.text();
                else if (current == QLatin1String("desc"))
                    out.desc += xml.text();
                else if (current == QLatin1String("text") || current == QLatin1String("tspan"))
                    out.texts << xml.text().toString();
            }
        }
        out.wellFormed = !xml.hasError();
        return out;
    }

private slots:
    void paretoChartFromTheComparePanel() {
        ui::JobRunner runner;
        ui::ComparePanel panel(&runner);
        panel.resize(1200, 800);
        panel.show();  // laid out: the chart gets its share of the window, so no title is elided
        std::vector<ui::ComparePoint> points(2);
        points[0].preset = QStringLiteral("q8_0");
        points[0].bitsPerWeight = 8.5;
        points[0].meanKld = 0.001;
        points[1].preset = QStringLiteral("lowrank-q4");
        points[1].bitsPerWeight = 4.5;
        points[1].meanKld = 0.03;
        panel.chart()->setPoints(points);  // both lie on the Pareto front
        QCOMPARE(ui::ParetoChart::paretoFront(points).size(), size_t{2});

        const QString path = QDir(QString::fromStdString(m_dir.path())).filePath(QStringLiteral("pareto.svg"));
        QString error;
        QVERIFY2(panel.exportSvg(path, &error), qPrintable(error));
        const Svg svg = readSvg(path);
        QVERIFY(svg.wellFormed);
        QCOMPARE(svg.root, QStringLiteral("svg"));
        QCOMPARE(svg.title, QStringLiteral("Bits per weight against mean KLD"));
        QVERIFY2(svg.desc.contains(QStringLiteral("Pareto front (2 points)")), qPrintable(svg.desc));
        QVERIFY(svg.desc.contains(QStringLiteral("q8_0: 8.50 bpw, KLD 0.001 (1 points)")));
        QVERIFY(svg.desc.contains(QStringLiteral("bits per weight (whole knot file)")));
        QVERIFY(svg.desc.contains(QStringLiteral("mean KLD (log)")));
        QCOMPARE(svg.desc, ui::chartSummary(panel.chart()->chart()));
        // Text stays text: the axis titles are drawn as SVG text, not pixels.
        QVERIFY2(svg.texts.join(QLatin1Char('|')).contains(QStringLiteral("mean KLD (log)")),
                 qPrintable(svg.texts.join(QLatin1Char('|'))));
        // Written atomically: only the file itself is left in the folder.
        const QStringList left =
            QDir(QString::fromStdString(m_dir.path())).entryList({QStringLiteral("pareto.svg*")}, QDir::Files);
        QCOMPARE(left, QStringList{QStringLiteral("pareto.svg")});

        // The PNG export still works beside it.
        const QString png = QDir(QString::fromStdString(m_dir.path())).filePath(QStringLiteral("pareto.png"));
        QVERIFY(panel.exportPng(png));
        QVERIFY(!QImage(png).isNull());
    }

    void spectrumChart() {
        ui::SpectrumChart chart;
        chart.resize(800, 500);
        std::vector<double> values;
        for (int i = 0; i < 48; ++i) values.push_back(100.0 / (1.0 + i));
        chart.setCurves({{QStringLiteral("layer 1 ffn_up"), values}});
        chart.setRank(5);
        const QString path = QDir(QString::fromStdString(m_dir.path())).filePath(QStringLiteral("spectrum.svg"));
        QString error;
        QVERIFY2(ui::exportChartSvg(&chart, path, &error), qPrintable(error));
        const Svg svg = readSvg(path);
        QVERIFY(svg.wellFormed);
        QCOMPARE(svg.root, QStringLiteral("svg"));
        QCOMPARE(svg.title, QStringLiteral("Singular values"));
        QVERIFY2(svg.desc.contains(QStringLiteral("layer 1 ffn_up (48 points)")), qPrintable(svg.desc));
        QVERIFY(svg.desc.contains(QStringLiteral("singular value s_i (log)")));
        QVERIFY(svg.desc.contains(QStringLiteral("index i")));
        QVERIFY(svg.desc.contains(QStringLiteral("cumulative energy")));
    }

    void aFailedWriteNamesTheFile() {
        ui::ParetoChart chart;
        const QString path = QStringLiteral("/nonexistent-gkq-dir/chart.svg");
        QString error;
        QVERIFY(!ui::exportChartSvg(&chart, path, &error));
        QVERIFY2(error.contains(path), qPrintable(error));
        QVERIFY(!QFileInfo::exists(path));
    }
};

QTEST_MAIN(TestChartExport)
#include "test_chart_export.moc"
