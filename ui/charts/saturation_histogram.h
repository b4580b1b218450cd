// SaturationHistogram: the core's activation-frequency histogram (kSaturationHistogramBins bins, edges of
// saturation_histogram_bin) as a Qt Charts bar chart — one bar per bin, the values exactly the core's counts of
// neurons (one block's, or the sum over all blocks). Bin labels name the core's edges. The bars lie horizontal, one
// bin a row from "0" at the top: each label has the chart's width beside it, where eight upright bars would share
// a narrow view's width and shorten every label to "≤0....".
#pragma once

#include <QChartView>
#include <QStringList>
#include <cstdint>
#include <vector>

class QBarCategoryAxis;
class QValueAxis;

namespace gkq::ui {

class SaturationHistogram : public QChartView {
    Q_OBJECT
public:
    explicit SaturationHistogram(QWidget* parent = nullptr);

    // counts: (kSaturationHistogramBins) neurons per bin; `what` names them in the series ("layer 2", "all layers").
    void setCounts(const std::vector<uint64_t>& counts, const QString& what);
    void clear();
    // The bar heights as shown (for tests: they must equal the core's histogram).
    std::vector<uint64_t> counts() const { return m_counts; }
    static QStringList binLabels();

private:
    std::vector<uint64_t> m_counts;
};

}  // namespace gkq::ui
