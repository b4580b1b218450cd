// ParetoChart: bits per weight (x) against mean KLD (y, log) for the presets of a Compare run, one labelled point
// each, with the Pareto front (no other point has both fewer bits and a lower KLD) joined by a line.
#pragma once

#include "models/compare_result_model.h"

#include <QChartView>
#include <vector>

namespace gkq::ui {

class ParetoChart : public QChartView {
    Q_OBJECT
public:
    explicit ParetoChart(QWidget* parent = nullptr);
    void setPoints(const std::vector<ComparePoint>& points);
    // Indices of the points on the Pareto front, by increasing bits per weight.
    static std::vector<size_t> paretoFront(const std::vector<ComparePoint>& points);
};

}  // namespace gkq::ui
