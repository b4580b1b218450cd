// What every workbench chart shares: a qualitative palette in which each series has its own colour (and the
// colours reserved for overlays' roles are not reused: the Pareto front and reference lines are grey), and axis
// ranges with round tick values that hold every point (a rate axis never runs past its bound, e.g. 100 %).
#pragma once

#include <QColor>

namespace gkq::ui {

// The i-th series colour: 10 distinct hues (Tableau 10), then the same hues darker.
QColor seriesColor(int i);
// A continuous value's colour at t in [0, 1]: a perceptually ordered dark-blue -> teal -> yellow ramp (viridis end
// points), shared by the heat maps; t outside [0, 1] (or not finite) is clamped.
QColor heatColor(double t);
// Lines that are not data series (the Pareto front, cumulative energy).
QColor referenceLineColor();

struct NiceRange {
    double min = 0.0;
    double max = 1.0;
    double step = 1.0;
    int tickCount() const;  // ticks from min to max, both included
};
// The smallest range with a round step (1, 2 or 5 times a power of ten) and at most `maxTicks` ticks that holds
// [lo, hi]; clipped to `upper` when the data cannot exceed it (a rate), the step kept.
NiceRange niceRange(double lo, double hi, int maxTicks = 6, double upper = 0.0);

}  // namespace gkq::ui
