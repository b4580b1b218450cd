#include "charts/layer_role_heat_map.h"

#include "models/display_format.h"
#include "models/layer_role_model.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QStringList>
#include <QToolTip>
#include <algorithm>

namespace gkq::ui {

LayerRoleHeatMap::LayerRoleHeatMap(QWidget* parent) : QWidget(parent) {}

void LayerRoleHeatMap::setModel(LayerRoleModel* model) {
    if (m_model) disconnect(m_model, nullptr, this, nullptr);
    m_model = model;
    if (m_model) {
        connect(m_model, &QAbstractItemModel::modelReset, this, &QWidget::updateGeometry);  // rows: minimum height
        connect(m_model, &QAbstractItemModel::modelReset, this, qOverload<>(&QWidget::update));
        connect(m_model, &QAbstractItemModel::dataChanged, this, qOverload<>(&QWidget::update));
    }
    updateGeometry();
    update();
}

int LayerRoleHeatMap::minimumRowHeight() const {
    return (fontMetrics().height() + 1) / 2;
}

QSize LayerRoleHeatMap::minimumSizeHint() const {
    const int rows = m_model ? m_model->rowCount() : 0;
    const int top = fontMetrics().height() + 6;  // as plotRect()
    return {360, std::max(200, top + rows * minimumRowHeight() + legendHeight() + 6 + 1)};
}

int LayerRoleHeatMap::legendHeight() const {
    return fontMetrics().height() * 2 + 12;
}

QRect LayerRoleHeatMap::plotRect() const {
    const QFontMetrics fm = fontMetrics();
    const int labelWidth = fm.horizontalAdvance(tr("outside blocks"));
    const int top = fm.height() + 6;  // column labels
    const int left = labelWidth + 10;
    return {left, top, std::max(10, width() - left - 8), std::max(10, height() - top - legendHeight() - 6)};
}

QRect LayerRoleHeatMap::cellRect(int row, int column) const {
    if (!m_model || row < 0 || column < 0 || row >= m_model->rowCount() || column >= m_model->columnCount()) return {};
    const QRect plot = plotRect();
    const double w = static_cast<double>(plot.width()) / m_model->columnCount();
    const double h = static_cast<double>(plot.height()) / m_model->rowCount();
    const int x0 = plot.left() + static_cast<int>(column * w);
    const int x1 = plot.left() + static_cast<int>((column + 1) * w);
    const int y0 = plot.top() + static_cast<int>(row * h);
    const int y1 = plot.top() + static_cast<int>((row + 1) * h);
    return {x0, y0, std::max(1, x1 - x0), std::max(1, y1 - y0)};
}

std::pair<int, int> LayerRoleHeatMap::cellAt(const QPoint& pos) const {
    if (!m_model || m_model->rowCount() == 0) return {-1, -1};
    const QRect plot = plotRect();
    if (!plot.contains(pos)) return {-1, -1};
    const int column = std::min(m_model->columnCount() - 1,
                                (pos.x() - plot.left()) * m_model->columnCount() / std::max(1, plot.width()));
    const int row =
        std::min(m_model->rowCount() - 1, (pos.y() - plot.top()) * m_model->rowCount() / std::max(1, plot.height()));
    return {row, column};
}

QString LayerRoleHeatMap::legendText() const {
    if (!m_model || m_model->rowCount() == 0) return {};
    if (m_model->measure() == LayerRoleModel::Measure::Method) {
        QStringList names;
        for (Method m : m_model->methodsPresent()) names << methodText(m);
        return names.join(QStringLiteral(", "));
    }
    const auto range = m_model->scaleRange();
    if (!range) return tr("no cell has a measured value");
    const bool bpw = m_model->measure() == LayerRoleModel::Measure::BitsPerWeight;
    const QString what = bpw                   ? tr("bits per weight")
                         : m_model->logScale() ? tr("log10 relative error")
                                               : tr("relative error");
    return tr("%1 .. %2 %3").arg(formatNumber(range->first), formatNumber(range->second), what);
}

bool LayerRoleHeatMap::event(QEvent* event) {
    if (event->type() == QEvent::ToolTip && m_model) {
        auto* help = static_cast<QHelpEvent*>(event);
        const auto [row, column] = cellAt(help->pos());
        const QString tip = row >= 0 ? m_model->index(row, column).data(Qt::ToolTipRole).toString() : QString();
        if (tip.isEmpty())
            QToolTip::hideText();
        else
            QToolTip::showText(help->globalPos(), tip, this, cellRect(row, column));
        return true;
    }
    return QWidget::event(event);
}

void LayerRoleHeatMap::mousePressEvent(QMouseEvent* event) {
    const auto [row, column] = cellAt(event->position().toPoint());
    if (row >= 0 && event->button() == Qt::LeftButton) {
        const QString name = m_model->index(row, column).data(LayerRoleModel::NameRole).toString();
        if (!name.isEmpty()) emit tensorClicked(name);
    }
    QWidget::mousePressEvent(event);
}

void LayerRoleHeatMap::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.fillRect(rect(), palette().window());
    const QRect plot = plotRect();
    if (!m_model || m_model->rowCount() == 0) {
        p.setPen(palette().text().color());
        p.drawText(plot, Qt::AlignCenter, tr("No quantization yet: quantize the model, or open a knot"));
        return;
    }
    const QFontMetrics fm = fontMetrics();
    const int rows = m_model->rowCount();
    const int columns = m_model->columnCount();
    // Row labels a line high, centred on their row: every `stride`-th row (and the last) where rows are lower.
    const int rowHeight = std::max(1, cellRect(0, 0).height());
    const int stride = std::max(1, (fm.height() + rowHeight - 1) / rowHeight);
    for (int c = 0; c < columns; ++c) {
        const QRect cell = cellRect(0, c);
        p.setPen(palette().text().color());
        p.drawText(QRect(cell.left(), 0, cell.width(), plot.top() - 2), Qt::AlignHCenter | Qt::AlignBottom,
                   fm.elidedText(m_model->headerData(c, Qt::Horizontal).toString(), Qt::ElideRight, cell.width()));
    }
    for (int r = 0; r < rows; ++r) {
        const QRect first = cellRect(r, 0);
        p.setPen(palette().text().color());
        if (r % stride == 0 ? r + stride <= rows - 1 || r == rows - 1 : r == rows - 1)
            p.drawText(QRect(0, first.center().y() - fm.height() / 2, plot.left() - 5, fm.height()),
                       Qt::AlignRight | Qt::AlignVCenter, m_model->headerData(r, Qt::Vertical).toString());
        for (int c = 0; c < columns; ++c) {
            const QRect cell = cellRect(r, c).adjusted(0, 0, -1, -1);
            const QModelIndex index = m_model->index(r, c);
            const QVariant brush = index.data(Qt::BackgroundRole);
            if (brush.isValid()) {
                const QColor colour = brush.value<QBrush>().color();
                p.fillRect(cell, colour);
                const QString text = index.data(Qt::DisplayRole).toString();
                if (!text.isEmpty() && fm.horizontalAdvance(text) + 4 <= cell.width() && fm.height() <= cell.height()) {
                    p.setPen(colour.lightnessF() > 0.55 ? Qt::black : Qt::white);
                    p.drawText(cell, Qt::AlignCenter, text);
                }
            } else {  // empty: the role is missing or its value was not measured
                p.setPen(palette().mid().color());
                p.drawRect(cell);
            }
        }
    }
    // legend
    p.setPen(palette().text().color());
    const int ly = plot.bottom() + 8;
    if (m_model->measure() == LayerRoleModel::Measure::Method) {
        int x = plot.left();
        const int box = fm.height() - 4;
        for (Method m : m_model->methodsPresent()) {
            const QString name = methodText(m);
            const int w = box + 4 + fm.horizontalAdvance(name) + 12;
            if (x + w > width() && x > plot.left()) break;  // what does not fit stays in legendText() and the tooltips
            p.fillRect(QRect(x, ly + 2, box, box), LayerRoleModel::methodColor(m));
            p.drawText(QRect(x + box + 4, ly, w, fm.height()), Qt::AlignLeft | Qt::AlignVCenter, name);
            x += w;
        }
        return;
    }
    const auto range = m_model->scaleRange();
    if (!range) {
        p.drawText(QRect(plot.left(), ly, plot.width(), fm.height()), Qt::AlignLeft, legendText());
        return;
    }
    const QRect bar(plot.left() + plot.width() / 4, ly, plot.width() / 2, fm.height() - 4);
    for (int x = 0; x < bar.width(); ++x) {
        p.setPen(LayerRoleModel::scaleColor(static_cast<double>(x) / std::max(1, bar.width() - 1)));
        p.drawLine(bar.left() + x, bar.top(), bar.left() + x, bar.bottom());
    }
    p.setPen(palette().text().color());
    p.drawText(QRect(plot.left(), ly - 2, bar.left() - plot.left() - 4, fm.height()), Qt::AlignRight,
               formatNumber(range->first));
    p.drawText(QRect(bar.right() + 4, ly - 2, plot.width(), fm.height()), Qt::AlignLeft, formatNumber(range->second));
    const QString what = m_model->measure() == LayerRoleModel::Measure::BitsPerWeight ? tr("bits per weight")
                         : m_model->logScale()                                        ? tr("log10 relative error")
                                                                                      : tr("relative error");
    p.drawText(QRect(plot.left(), ly + fm.height(), plot.width(), fm.height()), Qt::AlignHCenter, what);
}

}  // namespace gkq::ui
