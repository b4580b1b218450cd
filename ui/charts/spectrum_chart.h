// SpectrumChart: singular values against their index on a log axis, for one or several tensors (overlay), with
// the first tensor's cumulative energy on a second (linear, 0..1) axis and a vertical marker at the chosen rank.
// A curve may bring its own cumulative energy (Curve::energyName; the Spectrum view's W L curve does). Normalized,
// every curve is divided by its own largest value (the axis title says s_i / s_1), so spectra of different
// scales (W and W L) compare by shape on one axis; the energy curves are scale-free either way.
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
        // Non-empty: this curve's cumulative energy is drawn too, under this name (curves[0] always has one:
        // "cumulative energy" unless named here).
        QString energyName = {};
    };

    explicit SpectrumChart(QWidget* parent = nullptr);

    // curves[0] is the primary tensor: its energy curve and the rank marker follow it.
    void setCurves(const std::vector<Curve>& curves);
    void setRank(int64_t k);
    int seriesCount() const;
    // Each curve divided by its first (largest) value from the next setCurves on; the y axis title says which.
    void setNormalized(bool normalized);
    bool isNormalized() const { return m_normalized; }
    QString valueAxisTitle() const;

private:
    QLineSeries* m_marker = nullptr;
    QValueAxis* m_x = nullptr;
    QLogValueAxis* m_y = nullptr;
    QValueAxis* m_energyAxis = nullptr;
    double m_yMin = 1.0;
    double m_yMax = 10.0;
    bool m_normalized = false;
};

}  // namespace gkq::ui
