#include "charts/live_series_chart.h"

#include "charts/chart_style.h"

#include <QChart>
#include <QLineSeries>
#include <QValueAxis>
#include <algorithm>

namespace gkq::ui {

LiveSeriesChart::LiveSeriesChart(const QString& title, const QString& unit, QWidget* parent) : QChartView(parent) {
    auto* chart = new QChart();
    chart->setTitle(title);
    chart->legend()->hide();
    m_x = new QValueAxis(chart);
    m_x->setTitleText(tr("seconds since start"));
    m_x->setLabelFormat(QStringLiteral("%.0f"));
    m_x->setRange(0.0, m_window);
    // The time axis scrolls: ticks stay on round seconds (multiples of a round step of the window) as it moves.
    m_x->setTickType(QValueAxis::TicksDynamic);
    m_x->setTickAnchor(0.0);
    m_x->setTickInterval(niceRange(0.0, m_window, 7).step);
    m_y = new QValueAxis(chart);
    m_y->setTitleText(unit);
    m_y->setRange(0.0, 1.0);
    chart->addAxis(m_x, Qt::AlignBottom);
    chart->addAxis(m_y, Qt::AlignLeft);
    setChart(chart);
    setRenderHint(QPainter::Antialiasing);
    setMinimumHeight(180);
}

QLineSeries* LiveSeriesChart::newSegment() {
    auto* s = new QLineSeries(chart());
    s->setPointsVisible(true);  // a lone value between gaps is a point, not an invisible segment
    const QList<QAbstractSeries*> existing = chart()->series();
    if (!existing.isEmpty()) s->setPen(static_cast<QLineSeries*>(existing.first())->pen());
    chart()->addSeries(s);
    s->attachAxis(m_x);
    s->attachAxis(m_y);
    return s;
}

void LiveSeriesChart::append(double seconds, double value) {
    if (!m_current) m_current = newSegment();
    m_current->append(seconds, value);
    m_last = value;
    trim(seconds);
}

void LiveSeriesChart::appendGap(double seconds) {
    m_current = nullptr;
    trim(seconds);
}

void LiveSeriesChart::trim(double now) {
    const double from = std::max(0.0, now - m_window);
    m_x->setRange(from, std::max(m_window, now));
    m_x->setTickInterval(niceRange(0.0, m_window, 7).step);
    for (QAbstractSeries* a : chart()->series()) {
        auto* s = static_cast<QLineSeries*>(a);
        while (s->count() > 0 && s->at(0).x() < from) s->remove(0);
        if (s->count() == 0 && s != m_current) {
            chart()->removeSeries(s);
            s->deleteLater();
        }
    }
    rescale();
}

void LiveSeriesChart::rescale() {
    double hi = 0.0;
    for (QAbstractSeries* a : chart()->series()) {
        const auto* s = static_cast<QLineSeries*>(a);
        for (int i = 0; i < s->count(); ++i) hi = std::max(hi, s->at(i).y());
    }
    if (hi <= 0.0) hi = m_upper > 0.0 ? std::min(1.0, m_upper) : 1.0;
    const NiceRange r = niceRange(0.0, hi, 6, m_upper);
    m_y->setRange(r.min, r.max);
    m_y->setTickCount(r.tickCount());
    m_y->setLabelFormat(r.step < 1.0 ? QStringLiteral("%.2g") : QStringLiteral("%.0f"));
}

void LiveSeriesChart::setUpperBound(double upper) {
    m_upper = upper;
    rescale();
}

double LiveSeriesChart::yAxisMax() const {
    return m_y->max();
}

void LiveSeriesChart::clear() {
    chart()->removeAllSeries();
    m_current = nullptr;
    m_last = 0.0;
    rescale();
    m_x->setRange(0.0, m_window);
}

int LiveSeriesChart::pointCount() const {
    int n = 0;
    for (QAbstractSeries* a : chart()->series()) n += static_cast<QLineSeries*>(a)->count();
    return n;
}

}  // namespace gkq::ui
