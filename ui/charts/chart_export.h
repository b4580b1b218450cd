// Chart export: a QChartView written as SVG (QSvgGenerator, vector: text stays text) or PNG, atomically through the
// core's write_file_atomic (temporary file + rename), so a failed export never leaves a partial file. The SVG's
// <title> is the chart's title and its <desc> is chartSummary(): every series with its exact point count and every
// axis title, so a reader (or a test) can tell what was plotted without rasterizing it.
#pragma once

#include <QString>

class QChart;
class QChartView;

namespace gkq::ui {

// "series: NAME (N points); ...; axes: TITLE; TITLE" — counts are the series' own (QXYSeries::count(), the bar
// sets' values for bar series).
QString chartSummary(const QChart* chart);

// Both return false with `error` naming the file on failure.
bool exportChartSvg(QChartView* view, const QString& path, QString* error = nullptr);
bool exportChartPng(QChartView* view, const QString& path, QString* error = nullptr);

}  // namespace gkq::ui
