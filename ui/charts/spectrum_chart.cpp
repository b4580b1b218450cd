#include "charts/spectrum_chart.h"

#include "charts/chart_style.h"
#include "gkq/spectrum.h"

#include <QChart>
#include <QColor>
#include <QFont>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QPen>
#include <QValueAxis>
#include <algorithm>
#include <cmath>
#include <limits>

namespace gkq::ui {

SpectrumChart::SpectrumChart(QWidget* parent) : QChartView(parent) {
    auto* chart = new QChart();
    chart->setTitle(tr("Singular values"));
    // A column beside the plot, one entry a line: a row below it splits the chart's width between the entries and
    // shortens each overlay's name to "layer 0 att...", the same for every role of a layer.
    chart->legend()->setAlignment(Qt::AlignRight);
    QFont legendFont = chart->legend()->font();  // a column at most 0.4 of the chart wide: a point smaller
    legendFont.setPointSizeF(legendFont.pointSizeF() - 1.0);
    chart->legend()->setFont(legendFont);
    chart->legend()->setShowToolTips(true);  // an entry the legend had to shorten shows in full on hover
    setChart(chart);                         // the view owns the chart
    setRenderHint(QPainter::Antialiasing);
    m_x = new QValueAxis(chart);
    m_x->setTitleText(tr("index i"));
    m_x->setLabelFormat("%d");
    m_y = new QLogValueAxis(chart);
    m_y->setTitleText(tr("singular value s_i (log)"));
    m_y->setLabelFormat("%.3g");
    m_energyAxis = new QValueAxis(chart);
    m_energyAxis->setRange(0.0, 1.0);
    m_energyAxis->setTitleText(tr("cumulative energy"));
    chart->addAxis(m_x, Qt::AlignBottom);
    chart->addAxis(m_y, Qt::AlignLeft);
    chart->addAxis(m_energyAxis, Qt::AlignRight);
}

int SpectrumChart::seriesCount() const {
    return static_cast<int>(chart()->series().size());
}

void SpectrumChart::setNormalized(bool normalized) {
    m_normalized = normalized;
    m_y->setTitleText(valueAxisTitle());
}

QString SpectrumChart::valueAxisTitle() const {
    return m_normalized ? tr("s_i / s_1 (log)") : tr("singular value s_i (log)");
}

void SpectrumChart::setCurves(const std::vector<Curve>& curves) {
    QChart* c = chart();
    c->removeAllSeries();
    m_marker = nullptr;
    double xMax = 1.0;
    double lo = std::numeric_limits<double>::infinity();
    double hi = 0.0;
    int nSeries = 0;
    std::vector<QColor> colors;
    for (const Curve& curve : curves) {
        auto* series = new QLineSeries();
        series->setName(curve.name);
        colors.push_back(seriesColor(nSeries++));
        series->setColor(colors.back());
        // Normalized: over s_1, the first value of a descending spectrum (one division per value, nothing else, so
        // a point is the value as the core gave it divided by the core's s_1).
        const double scale = m_normalized && !curve.values.empty() && curve.values[0] > 0.0 ? curve.values[0] : 1.0;
        QList<QPointF> points;
        points.reserve(static_cast<qsizetype>(curve.values.size()));
        for (size_t i = 0; i < curve.values.size(); ++i) {
            const double v = curve.values[i] / scale;  // exact when scale is 1
            if (!(v > 0.0)) continue;                  // a log axis cannot show zeros
            points.append(QPointF(static_cast<double>(i + 1), v));
            lo = std::min(lo, v);
            hi = std::max(hi, v);
        }
        series->replace(points);
        c->addSeries(series);
        series->attachAxis(m_x);
        series->attachAxis(m_y);
        xMax = std::max(xMax, static_cast<double>(curve.values.size()));
    }
    for (size_t k = 0; k < curves.size(); ++k) {
        const Curve& curve = curves[k];
        if (curve.values.empty() || (k > 0 && curve.energyName.isEmpty())) continue;
        const auto& s = curve.values;
        const std::vector<double> energy = cumulative_energy(s.data(), static_cast<int64_t>(s.size()));
        auto* series = new QLineSeries();
        // curves[0]'s, the selected tensor's, unless the curve names its own
        series->setName(curve.energyName.isEmpty() ? tr("cumulative energy") : curve.energyName);
        QList<QPointF> points;
        for (size_t i = 0; i < energy.size(); ++i) points.append(QPointF(static_cast<double>(i + 1), energy[i]));
        series->replace(points);
        QPen pen(Qt::DashLine);
        pen.setColor(k == 0 ? referenceLineColor() : colors[k]);
        series->setPen(pen);
        c->addSeries(series);
        series->attachAxis(m_x);
        series->attachAxis(m_energyAxis);
    }
    if (!curves.empty() && !curves[0].values.empty()) {
        m_marker = new QLineSeries();
        m_marker->setName(tr("rank k"));
        QPen mp(Qt::black);  // not a palette colour: no curve shares it
        mp.setWidth(2);
        m_marker->setPen(mp);
        c->addSeries(m_marker);
        m_marker->attachAxis(m_x);
        m_marker->attachAxis(m_energyAxis);
    }
    // Ranks from 1; ticks on round multiples (50, 100, ...), not at fifths of the range.
    m_x->setRange(1.0, xMax);
    m_x->setTickType(QValueAxis::TicksDynamic);
    m_x->setTickAnchor(0.0);
    m_x->setTickInterval(std::max(1.0, niceRange(0.0, xMax, 7).step));
    if (hi > 0.0) {
        m_yMin = std::pow(10.0, std::floor(std::log10(lo)));
        m_yMax = std::pow(10.0, std::ceil(std::log10(hi)));
        if (m_yMax <= m_yMin) m_yMax = m_yMin * 10.0;
        m_y->setRange(m_yMin, m_yMax);
    }
}

void SpectrumChart::setRank(int64_t k) {
    if (!m_marker) return;
    m_marker->replace(QList<QPointF>{QPointF(static_cast<double>(k), 0.0), QPointF(static_cast<double>(k), 1.0)});
}

}  // namespace gkq::ui
