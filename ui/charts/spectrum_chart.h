// SpectrumChart: singular values against their index on a log axis, for one or several tensors (overlay), with
// the first tensor's cumulative energy on a second (linear, 0..1) axis and a vertical marker at the chosen rank.
// The legend is a column to the right of the plot, so that every curve's name shows in full.
#pragma once

#include <QChartView>
#include <QString>
#include <vector>

class QLineSeries;
class QLogValueAxis;
class QValueAxis;

namespace gkq::ui {

class SpectrumChart : public QChartView {
    Q_OBJECT
public:
    struct Curve {
        QString name;
        std::vector<double> values;  // descending singular values
    };

    explicit SpectrumChart(QWidget* parent = nullptr);

    // curves[0] is the primary tensor: its energy curve and the rank marker follow it.
    void setCurves(const std::vector<Curve>& curves);
    void setRank(int64_t k);
    int seriesCount() const;

private:
    QLineSeries* m_marker = nullptr;
    QValueAxis* m_x = nullptr;
    QLogValueAxis* m_y = nullptr;
    QValueAxis* m_energyAxis = nullptr;
    double m_yMin = 1.0;
    double m_yMax = 10.0;
};

}  // namespace gkq::ui
