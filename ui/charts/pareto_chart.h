// ParetoChart: bits per weight (x) against mean KLD (y, log) for the presets of a Compare run, one labelled point
// each, with the Pareto front (no other point has both fewer bits and a lower KLD) joined by a line.
#pragma once

#include "models/compare_result_model.h"

#include <QChartView>
#include <QString>
#include <vector>

class QLogValueAxis;
class QValueAxis;

namespace gkq::ui {

class ParetoChart : public QChartView {
    Q_OBJECT
public:
    explicit ParetoChart(QWidget* parent = nullptr);
    void setPoints(const std::vector<ComparePoint>& points);
    // Indices of the points on the Pareto front, by increasing bits per weight.
    static std::vector<size_t> paretoFront(const std::vector<ComparePoint>& points);
    // The label drawn beside each point (by index): points whose names would overlap on the chart (closer than half
    // their names' width across, at about 1.1 % of the x span a character, and 6 % of the log-y span up or down)
    // share one label, "a, b", drawn at the first of them; the others get none, so neighbouring presets do not print
    // their names over each other. Points without a KLD > 0 get none.
    static std::vector<QString> pointLabels(const std::vector<ComparePoint>& points);

private:
    QValueAxis* m_x = nullptr;     // bits per weight
    QLogValueAxis* m_y = nullptr;  // mean KLD
};

}  // namespace gkq::ui
