// SpectrumHeatMap: normalized spectra of one role across all layers as an image — one row per layer, the
// column is the relative index i / n, the colour log10(s_i / s_1) from 0 (bright) down to the smallest value
// present (dark), rounded down to a tenth and clamped to [kMinFloorLog10, -0.1].
// Spectra of different lengths share the relative index axis. Row labels are thinned to every k-th row where rows are
// shorter than a line of text.
#pragma once

#include <QImage>
#include <QStringList>
#include <QWidget>
#include <vector>

namespace gkq::ui {

class SpectrumHeatMap : public QWidget {
    Q_OBJECT
public:
    explicit SpectrumHeatMap(QWidget* parent = nullptr);

    void setSpectra(const QString& title, const QStringList& rowLabels,
                    const std::vector<std::vector<double>>& spectra);
    int rowCount() const { return static_cast<int>(m_labels.size()); }
    QSize minimumSizeHint() const override { return {320, 160}; }

    // Rows per drawn label at the last paint (1: every row labelled; k: every k-th, so labels never overlap).
    int labelStride() const { return m_labelStride; }

    static constexpr double kMinFloorLog10 = -8.0;
    double floorLog10() const { return m_floor; }

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    QString m_title;
    QStringList m_labels;
    QImage m_image;  // (layers, kColumns)
    double m_floor = -1.0;
    int m_labelStride = 1;
};

}  // namespace gkq::ui
