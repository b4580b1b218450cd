// LiveSeriesChart: one quantity against time (seconds since a start), the last `window` seconds, for the Serve
// panel's requests/s, latency and cache hit rate. The y axis fits the values shown with round ticks, shrinking
// again as large values scroll out, and never past an upper bound where the quantity has one (a rate: 100 %);
// a missing value (no requests in an interval: no latency) leaves a gap rather than a made-up point.
#pragma once

#include <QChartView>
#include <QString>

class QLineSeries;
class QValueAxis;

namespace gkq::ui {

class LiveSeriesChart : public QChartView {
    Q_OBJECT
public:
    LiveSeriesChart(const QString& title, const QString& unit, QWidget* parent = nullptr);

    void append(double seconds, double value);
    void appendGap(double seconds);  // no value for this interval
    void clear();
    int pointCount() const;  // points across all segments
    double lastValue() const { return m_last; }
    void setWindowSeconds(double seconds) { m_window = seconds; }
    // The most the quantity can be (100 for a percentage); 0: none.
    void setUpperBound(double upper);
    double yAxisMax() const;

private:
    QLineSeries* newSegment();
    void trim(double now);
    void rescale();

    QValueAxis* m_x = nullptr;
    QValueAxis* m_y = nullptr;
    QLineSeries* m_current = nullptr;  // the segment values are appended to (null after a gap)
    double m_window = 120.0;
    double m_upper = 0.0;
    double m_last = 0.0;
};

}  // namespace gkq::ui
