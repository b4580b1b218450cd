#include "charts/pareto_chart.h"

#include "charts/chart_style.h"

#include <QChart>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QPen>
#include <QScatterSeries>
#include <QValueAxis>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace gkq::ui {

ParetoChart::ParetoChart(QWidget* parent) : QChartView(parent) {
    auto* chart = new QChart();
    chart->setTitle(tr("Bits per weight against mean KLD"));
    // One pair of axes for the chart's life: setPoints runs once per measured preset, and axes deleted and made again
    // each time left the old ones' tick labels drawn under the new ones (Qt 6.4, seen offscreen).
    m_x = new QValueAxis(chart);
    m_x->setTitleText(tr("bits per weight (whole knot file)"));
    m_y = new QLogValueAxis(chart);
    m_y->setTitleText(tr("mean KLD (log)"));
    m_y->setLabelFormat("%.2g");
    chart->addAxis(m_x, Qt::AlignBottom);
    chart->addAxis(m_y, Qt::AlignLeft);
    setChart(chart);
    setRenderHint(QPainter::Antialiasing);
}

std::vector<size_t> ParetoChart::paretoFront(const std::vector<ComparePoint>& points) {
    std::vector<size_t> order(points.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return points[a].bitsPerWeight < points[b].bitsPerWeight ||
               (points[a].bitsPerWeight == points[b].bitsPerWeight && points[a].meanKld < points[b].meanKld);
    });
    std::vector<size_t> front;
    double best = std::numeric_limits<double>::infinity();
    for (size_t i : order)
        if (points[i].meanKld < best) {
            front.push_back(i);
            best = points[i].meanKld;
        }
    return front;
}

namespace {
// The axes setPoints draws: x from 0 to a round bound over the largest bits per weight, y over whole decades.
struct AxisSpans {
    double x = 1.0;        // bits per weight
    double decades = 1.0;  // log10 of mean KLD
};
AxisSpans axisSpans(const std::vector<ComparePoint>& points) {
    double xMax = 1.0, yMin = 0.0, yMax = 0.0;
    bool any = false;
    for (const ComparePoint& p : points) {
        if (!(p.meanKld > 0.0)) continue;
        xMax = std::max(xMax, p.bitsPerWeight);
        yMin = any ? std::min(yMin, p.meanKld) : p.meanKld;
        yMax = any ? std::max(yMax, p.meanKld) : p.meanKld;
        any = true;
    }
    AxisSpans spans;
    spans.x = niceRange(0.0, xMax * 1.05, 8).max;
    if (any) spans.decades = std::max(1.0, std::ceil(std::log10(yMax)) - std::floor(std::log10(yMin)));
    return spans;
}
}  // namespace

std::vector<QString> ParetoChart::pointLabels(const std::vector<ComparePoint>& points) {
    const AxisSpans spans = axisSpans(points);
    std::vector<QString> labels(points.size());
    std::vector<int> owner(points.size(), -1);  // the point whose label a point joined
    for (size_t i = 0; i < points.size(); ++i) {
        if (!(points[i].meanKld > 0.0)) continue;
        for (size_t j = 0; j < i && owner[i] < 0; ++j) {
            if (!(points[j].meanKld > 0.0) || owner[j] >= 0) continue;
            // Apart by less than half their names' width across (a character is about 1.1 % of the plot's width at
            // the Compare view's size) and a line of text up or down (about 6 % of its height).
            const double dx = std::abs(points[i].bitsPerWeight - points[j].bitsPerWeight) / spans.x;
            const double dy = std::abs(std::log10(points[i].meanKld) - std::log10(points[j].meanKld)) / spans.decades;
            const double halfWidths =
                0.011 * 0.5 * static_cast<double>(points[i].preset.size() + points[j].preset.size());
            if (dx < halfWidths && dy < 0.06) owner[i] = static_cast<int>(j);
        }
        // A label format is the literal text but for @xPoint / @yPoint; a preset name has no '@'.
        const QString name = QString(points[i].preset).replace(QLatin1Char('@'), QLatin1Char('_'));
        if (owner[i] < 0)
            labels[i] = name;
        else
            labels[static_cast<size_t>(owner[i])] += QStringLiteral(", ") + name;
    }
    return labels;
}

void ParetoChart::setPoints(const std::vector<ComparePoint>& points) {
    QChart* c = chart();
    c->removeAllSeries();
    QValueAxis* x = m_x;
    QLogValueAxis* y = m_y;
    double xMax = 1.0, yMin = 1e-3, yMax = 1.0;
    bool any = false;
    int nSeries = 0;
    const std::vector<QString> labels = pointLabels(points);
    for (size_t i = 0; i < points.size(); ++i) {
        const ComparePoint& p = points[i];
        if (!(p.meanKld > 0.0)) continue;  // a log axis cannot show 0
        auto* s = new QScatterSeries();
        s->setColor(seriesColor(nSeries++));  // each preset its own colour; the front is grey
        s->setBorderColor(s->color().darker(130));
        s->setName(QStringLiteral("%1: %2 bpw, KLD %3")
                       .arg(p.preset)
                       .arg(p.bitsPerWeight, 0, 'f', 2)
                       .arg(p.meanKld, 0, 'g', 3));
        s->setMarkerSize(12);
        // The preset's name beside its point: where points overlap, their colours alone do not say which is which,
        // so the first of them carries all their names and the others none.
        s->setPointLabelsFormat(labels[i]);
        s->setPointLabelsVisible(!labels[i].isEmpty());
        s->setPointLabelsClipping(false);  // a point at the plot's edge keeps its whole name
        s->append(p.bitsPerWeight, p.meanKld);
        c->addSeries(s);
        s->attachAxis(x);
        s->attachAxis(y);
        xMax = std::max(xMax, p.bitsPerWeight);
        yMin = any ? std::min(yMin, p.meanKld) : p.meanKld;
        yMax = any ? std::max(yMax, p.meanKld) : p.meanKld;
        any = true;
    }
    auto* front = new QLineSeries();
    front->setName(tr("Pareto front"));
    QPen frontPen(referenceLineColor());
    frontPen.setStyle(Qt::DashLine);
    frontPen.setWidth(2);
    front->setPen(frontPen);
    for (size_t i : paretoFront(points))
        if (points[i].meanKld > 0.0) front->append(points[i].bitsPerWeight, points[i].meanKld);
    c->addSeries(front);
    front->attachAxis(x);
    front->attachAxis(y);
    const NiceRange xr = niceRange(0.0, xMax * 1.05, 8);  // round ticks, a margin so no marker is cut
    x->setRange(xr.min, xr.max);
    x->setTickCount(xr.tickCount());
    x->setLabelFormat(xr.step < 1.0 ? QStringLiteral("%.1f") : QStringLiteral("%.0f"));
    if (any) {
        const double lo = std::pow(10.0, std::floor(std::log10(yMin)));
        double hi = std::pow(10.0, std::ceil(std::log10(yMax)));
        if (hi <= lo) hi = lo * 10.0;
        y->setRange(lo, hi);
    }
    c->legend()->setAlignment(Qt::AlignRight);
}

}  // namespace gkq::ui
