#include "charts/chart_export.h"

#include "gkq/atomic_file.h"

#include <QAbstractAxis>
#include <QAbstractBarSeries>
#include <QBarSet>
#include <QBuffer>
#include <QChart>
#include <QChartView>
#include <QCoreApplication>
#include <QGraphicsLayout>
#include <QPainter>
#include <QSvgGenerator>
#include <QXYSeries>
#include <string_view>

namespace gkq::ui {

namespace {
bool writeAtomic(const QString& path, const QByteArray& bytes, QString* error) {
    const Status s =
        write_file_atomic(path.toStdString(), std::string_view(bytes.constData(), static_cast<size_t>(bytes.size())));
    if (s.is_ok()) return true;
    if (error) *error = QString::fromStdString(s.message());
    return false;
}
}  // namespace

QString chartSummary(const QChart* chart) {
    QStringList series;
    for (QAbstractSeries* s : chart->series()) {
        qsizetype n = 0;
        if (auto* xy = qobject_cast<QXYSeries*>(s))
            n = xy->count();
        else if (auto* bars = qobject_cast<QAbstractBarSeries*>(s))
            for (const QBarSet* set : bars->barSets()) n += set->count();
        series << QStringLiteral("%1 (%2 points)").arg(s->name()).arg(n);
    }
    QStringList axes;
    for (const QAbstractAxis* a : chart->axes())
        if (!a->titleText().isEmpty()) axes << a->titleText();
    return QStringLiteral("series: %1; axes: %2")
        .arg(series.join(QStringLiteral("; ")), axes.join(QStringLiteral("; ")));
}

// A chart lays itself out on posted events; a chart changed just before export (no event loop turn since) would
// otherwise render with the old layout.
static void settle(QChartView* view) {
    QCoreApplication::sendPostedEvents(view->chart(), QEvent::LayoutRequest);
    if (QGraphicsLayout* layout = view->chart()->layout()) layout->activate();
    QCoreApplication::sendPostedEvents(view->scene());
    QCoreApplication::sendPostedEvents(view->chart());
}

bool exportChartSvg(QChartView* view, const QString& path, QString* error) {
    settle(view);
    QByteArray bytes;
    QBuffer buffer(&bytes);
    buffer.open(QIODevice::WriteOnly);
    QSvgGenerator svg;
    svg.setOutputDevice(&buffer);
    svg.setSize(view->size());
    svg.setViewBox(QRect(QPoint(0, 0), view->size()));
    svg.setTitle(view->chart()->title());
    svg.setDescription(chartSummary(view->chart()));
    QPainter painter;
    if (!painter.begin(&svg)) {
        if (error) *error = QStringLiteral("%1: cannot render the chart as SVG").arg(path);
        return false;
    }
    view->render(&painter);
    painter.end();
    return writeAtomic(path, bytes, error);
}

bool exportChartPng(QChartView* view, const QString& path, QString* error) {
    settle(view);
    QByteArray bytes;
    QBuffer buffer(&bytes);
    buffer.open(QIODevice::WriteOnly);
    if (!view->grab().save(&buffer, "PNG")) {
        if (error) *error = QStringLiteral("%1: cannot render the chart as PNG").arg(path);
        return false;
    }
    return writeAtomic(path, bytes, error);
}

}  // namespace gkq::ui
