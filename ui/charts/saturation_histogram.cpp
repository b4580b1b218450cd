#include "charts/saturation_histogram.h"

#include "gkq/saturation.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QValueAxis>
#include <algorithm>

namespace gkq::ui {

SaturationHistogram::SaturationHistogram(QWidget* parent) : QChartView(parent) {
    auto* chart = new QChart();
    chart->setTitle(tr("Neurons by saturation frequency"));
    chart->legend()->setAlignment(Qt::AlignBottom);
    setChart(chart);
    setRenderHint(QPainter::Antialiasing);
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
    auto* set = new QBarSet(tr("neurons (%1)").arg(what));
    uint64_t most = 1;
    for (uint64_t n : counts) {
        set->append(static_cast<qreal>(n));
        most = std::max(most, n);
    }
    auto* series = new QBarSeries();
    series->setName(set->label());
    series->append(set);
    series->setLabelsVisible(true);
    series->setLabelsPosition(QAbstractBarSeries::LabelsOutsideEnd);
    series->setLabelsPrecision(12);  // counts print whole, never as 1.2e+03
    c->addSeries(series);
    auto* x = new QBarCategoryAxis();
    x->append(binLabels().mid(0, static_cast<qsizetype>(counts.size())));
    x->setTitleText(tr("saturation frequency (fraction of tokens)"));
    auto* y = new QValueAxis();
    y->setTitleText(tr("neurons"));
    y->setLabelFormat(QStringLiteral("%d"));
    y->setRange(0.0, static_cast<double>(most) * 1.15);  // room for the value labels above the bars
    y->applyNiceNumbers();
    c->addAxis(x, Qt::AlignBottom);
    c->addAxis(y, Qt::AlignLeft);
    series->attachAxis(x);
    series->attachAxis(y);
}

}  // namespace gkq::ui
