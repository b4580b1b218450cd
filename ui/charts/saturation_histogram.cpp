#include "charts/saturation_histogram.h"

#include "gkq/saturation.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QFontMetrics>
#include <QHorizontalBarSeries>
#include <QValueAxis>
#include <algorithm>

namespace gkq::ui {

SaturationHistogram::SaturationHistogram(QWidget* parent) : QChartView(parent) {
    auto* chart = new QChart();
    chart->setTitle(tr("Saturation frequency"));
    chart->legend()->hide();  // one series, named in the title: its height goes to the bins' rows
    setChart(chart);
    setRenderHint(QPainter::Antialiasing);
    // High enough for a line of text a bin (a lower row shortens its label to "..."), besides the title and the
    // counts' axis.
    const int line = QFontMetrics(chart->font()).height();
    setMinimumHeight(kSaturationHistogramBins * (line + 8) + 7 * line);
}

QStringList SaturationHistogram::binLabels() {
    // The upper edges of saturation_histogram_bin (gkq/saturation.h); bin 0 is "never saturated".
    static_assert(kSaturationHistogramBins == 8, "labels follow the core's bins");
    return {QStringLiteral("0"),    QStringLiteral("≤0.001"), QStringLiteral("≤0.01"), QStringLiteral("≤0.05"),
            QStringLiteral("≤0.1"), QStringLiteral("≤0.2"),   QStringLiteral("≤0.5"),  QStringLiteral("≤1")};
}

void SaturationHistogram::clear() {
    m_counts.clear();
    QChart* c = chart();
    c->removeAllSeries();
    for (QAbstractAxis* axis : c->axes()) {
        c->removeAxis(axis);
        delete axis;
    }
}

void SaturationHistogram::setCounts(const std::vector<uint64_t>& counts, const QString& what) {
    clear();
    m_counts = counts;
    QChart* c = chart();
    c->setTitle(tr("Saturation frequency: %1").arg(what));
    auto* set = new QBarSet(tr("neurons (%1)").arg(what));
    uint64_t most = 1;
    for (uint64_t n : counts) {
        set->append(static_cast<qreal>(n));
        most = std::max(most, n);
    }
    auto* series = new QHorizontalBarSeries();
    series->setName(set->label());
    series->append(set);
    series->setLabelsVisible(true);
    series->setLabelsPosition(QAbstractBarSeries::LabelsOutsideEnd);
    series->setLabelsPrecision(12);  // counts print whole, never as 1.2e+03
    c->addSeries(series);
    auto* bins = new QBarCategoryAxis();
    bins->append(binLabels().mid(0, static_cast<qsizetype>(counts.size())));
    bins->setTitleText(tr("fraction of tokens"));
    bins->setReverse(true);  // the first bin at the top
    auto* neurons = new QValueAxis();
    neurons->setTitleText(tr("neurons"));
    neurons->setLabelFormat(QStringLiteral("%d"));
    neurons->setRange(0.0, static_cast<double>(most) * 1.15);  // room for the value labels beside the bars
    neurons->applyNiceNumbers();
    c->addAxis(bins, Qt::AlignLeft);
    c->addAxis(neurons, Qt::AlignBottom);
    series->attachAxis(bins);
    series->attachAxis(neurons);
}

}  // namespace gkq::ui
