#include "charts/spectrum_heat_map.h"

#include "charts/chart_style.h"

#include <QPainter>
#include <algorithm>
#include <cmath>

namespace gkq::ui {

namespace {
constexpr int kColumns = 256;

}  // namespace

SpectrumHeatMap::SpectrumHeatMap(QWidget* parent) : QWidget(parent) {}

void SpectrumHeatMap::setSpectra(const QString& title, const QStringList& rowLabels,
                                 const std::vector<std::vector<double>>& spectra) {
    m_title = title;
    m_labels = rowLabels;
    const int rows = static_cast<int>(spectra.size());
    m_image = rows > 0 ? QImage(kColumns, rows, QImage::Format_RGB32) : QImage();
    double lowest = 0.0;
    for (const auto& s : spectra)
        if (!s.empty() && s[0] > 0.0 && s.back() > 0.0)
            lowest = std::min(lowest, std::log10(s.back() / s[0]));
        else if (!s.empty() && s[0] > 0.0)
            lowest = kMinFloorLog10;
    m_floor = std::clamp(std::floor(lowest * 10.0) / 10.0, kMinFloorLog10, -0.1);
    for (int r = 0; r < rows; ++r) {
        const auto& s = spectra[static_cast<size_t>(r)];
        for (int c = 0; c < kColumns; ++c) {
            double t = 0.0;
            if (!s.empty() && s[0] > 0.0) {
                const auto i = static_cast<size_t>(static_cast<double>(c) / kColumns * static_cast<double>(s.size()));
                const double rel = s[std::min(i, s.size() - 1)] / s[0];
                const double lg = rel > 0.0 ? std::log10(rel) : m_floor;
                t = 1.0 - std::clamp(lg, m_floor, 0.0) / m_floor;
            }
            m_image.setPixel(c, r, heatColor(t).rgb());
        }
    }
    update();
}

void SpectrumHeatMap::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.fillRect(rect(), palette().window());
    const QFontMetrics fm = fontMetrics();
    int labelWidth = 0;
    for (const QString& l : m_labels) labelWidth = std::max(labelWidth, fm.horizontalAdvance(l));
    const int top = fm.height() + 6;
    const int bottom = fm.height() * 2 + 26;
    const QRect plot(labelWidth + 10, top, std::max(10, width() - labelWidth - 20),
                     std::max(10, height() - top - bottom));
    p.drawText(QRect(0, 0, width(), top), Qt::AlignCenter, m_title);
    if (m_image.isNull()) {
        p.drawText(plot, Qt::AlignCenter, tr("No spectra yet: analyze the model"));
        return;
    }
    p.drawImage(plot, m_image);
    p.setPen(palette().text().color());
    // Every label where the rows are taller than a line of text; else every k-th row's, so none overlap (a 32-layer
    // model in a short view: "layer 0", "layer 4", ...).
    const double rowH = static_cast<double>(plot.height()) / m_labels.size();
    m_labelStride = std::max(1, static_cast<int>(std::ceil(fm.height() / std::max(rowH, 1e-9))));
    for (int r = 0; r < m_labels.size(); r += m_labelStride) {
        const int centre = plot.top() + static_cast<int>((r + 0.5) * rowH);
        p.drawText(QRect(0, centre - fm.height() / 2, labelWidth + 5, fm.height()), Qt::AlignRight | Qt::AlignVCenter,
                   m_labels[r]);
    }
    const int y = plot.bottom() + 4;
    p.drawText(QRect(plot.left(), y, plot.width(), fm.height()), Qt::AlignLeft, QStringLiteral("i/n = 0"));
    p.drawText(QRect(plot.left(), y, plot.width(), fm.height()), Qt::AlignRight, QStringLiteral("1"));
    p.drawText(QRect(plot.left(), y, plot.width(), fm.height()), Qt::AlignHCenter, tr("relative index i / n"));
    // colour legend
    const int ly = y + fm.height() + 4;
    const QRect bar(plot.left() + plot.width() / 4, ly, plot.width() / 2, 10);
    for (int x = 0; x < bar.width(); ++x) {
        p.setPen(QColor(heatColor(static_cast<double>(x) / bar.width())));
        p.drawLine(bar.left() + x, bar.top(), bar.left() + x, bar.bottom());
    }
    p.setPen(palette().text().color());
    p.drawText(QRect(plot.left(), ly - 2, bar.left() - plot.left() - 4, fm.height()), Qt::AlignRight,
               QStringLiteral("log10(s_i/s_1) <= %1").arg(m_floor));
    p.drawText(QRect(bar.right() + 4, ly - 2, plot.width(), fm.height()), Qt::AlignLeft, QStringLiteral("0"));
}

}  // namespace gkq::ui
