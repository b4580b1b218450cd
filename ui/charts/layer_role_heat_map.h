// LayerRoleHeatMap: a LayerRoleModel drawn as a grid of cells — the layers top to bottom (the row outside the
// blocks last), the matrix roles left to right, each cell in its BackgroundRole colour with its DisplayRole text
// where it fits; an empty cell (a role the model lacks, or a value not measured) only outlined. Below: the legend
// of the methods present (categorical measure) or a colour bar from the grid's smallest to largest value
// (numeric measures). A cell's tooltip is the model's; a click on a filled cell emits tensorClicked(name).
// However many layers, a cell is never lower than half a line of text (minimumSizeHint grows with the rows: a
// 32-layer model's grid asks for its height, and the Quantize view scrolls it on a small window); the row labels
// skip rows where they would overlap.
#pragma once

#include <QWidget>

class QAbstractItemModel;

namespace gkq::ui {

class LayerRoleModel;

class LayerRoleHeatMap : public QWidget {
    Q_OBJECT
public:
    explicit LayerRoleHeatMap(QWidget* parent = nullptr);

    void setModel(LayerRoleModel* model);
    LayerRoleModel* model() const { return m_model; }
    // Where cell (row, column) is drawn, in widget coordinates (empty when there is no such cell).
    QRect cellRect(int row, int column) const;
    // The cell at `pos` (row, column), or (-1, -1).
    std::pair<int, int> cellAt(const QPoint& pos) const;
    // The legend's text: the methods with their colours, or the colour bar's ends ("0.5 .. 8.5 bits per weight").
    QString legendText() const;
    QSize minimumSizeHint() const override;
    // The lowest a row of cells is drawn: half a line of the widget's font.
    int minimumRowHeight() const;

signals:
    void tensorClicked(const QString& name);

protected:
    bool event(QEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void paintEvent(QPaintEvent* event) override;

private:
    QRect plotRect() const;
    int legendHeight() const;

    LayerRoleModel* m_model = nullptr;
};

}  // namespace gkq::ui
