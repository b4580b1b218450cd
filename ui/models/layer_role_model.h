// LayerRoleModel: the matrices of a quantization (a QuantizeReport) or of an open knot (its records) as a grid —
// one row per transformer block (0 .. n-1) and a last row for the tensors outside the blocks, one column per matrix
// role (attn_q, attn_k, attn_v, attn_o, ffn_gate, ffn_up, ffn_down, then token_embd and output). A cell holds what
// was measured for that tensor: method, bits, bits per weight, and the relative and max-abs error when they were
// measured (a quantization measures them; a knot's records alone do not: no original to measure against). A
// (layer, role) the model lacks is an empty cell, never a zero.
// The measure (method, bits per weight, error) picks what a cell's text and colour say: a method its own colour
// (methodColor, every method of all_methods()), a number its place on the scale from the grid's smallest to its
// largest value, the error on a log10 scale when logScale is on. The tooltip lists every value of the cell.
#pragma once

#include "gkq/encoded_tensor.h"
#include "gkq/quantize.h"
#include "gkq/tensor.h"
#include "gkq/weights.h"

#include <QAbstractTableModel>
#include <QColor>
#include <QString>
#include <optional>
#include <vector>

namespace gkq::ui {

class LayerRoleModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum class Measure { Method, BitsPerWeight, RelError };
    // Raw values: the tensor's stored name, the method name, bits per weight and relative error (invalid when the
    // cell is empty or the value was not measured), and the colour scale position in [0, 1] of a numeric measure.
    static constexpr int NameRole = Qt::UserRole + 1;
    static constexpr int MethodRole = Qt::UserRole + 2;
    static constexpr int BpwRole = Qt::UserRole + 3;
    static constexpr int RelErrorRole = Qt::UserRole + 4;
    static constexpr int ScaleRole = Qt::UserRole + 5;

    explicit LayerRoleModel(QObject* parent = nullptr);

    // The columns' roles, in column order.
    static const std::vector<TensorRole>& columnRoles();
    // Each method's colour of the categorical scale (distinct for every method of all_methods()).
    static QColor methodColor(Method m);
    // A continuous value's colour at t in [0, 1] (dark blue .. yellow).
    static QColor scaleColor(double t);

    void setReport(const QuantizeReport& report, int nLayers);
    // The records of a knot (a KnotFile); other Weights give an empty grid.
    void setKnot(const Weights& knot);
    // Relative errors measured elsewhere for the grid's tensors (an rknot made with the source model): each named
    // tensor whose cell has no error yet takes it, `from` named in its tooltip. Returns how many cells took one.
    int setMeasuredErrors(const std::vector<std::pair<QString, double>>& errors, const QString& from);
    void clear();
    QString source() const { return m_source; }  // "quantization" / "knot records" / empty

    void setMeasure(Measure m);
    Measure measure() const { return m_measure; }
    void setLogScale(bool on);
    bool logScale() const { return m_log; }
    // The numeric measure's range over the filled cells (as shown: log10 when the log scale is on); nullopt when
    // the measure is the method or no cell has a value.
    std::optional<std::pair<double, double>> scaleRange() const;
    // The methods present in the grid, in code order (the categorical legend).
    std::vector<Method> methodsPresent() const;
    // The (row, column) of the tensor named `name`, invalid when it is in no cell.
    QModelIndex indexOfTensor(const QString& name) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    struct Cell {
        bool filled = false;
        QString name;
        Method method = Method::F32;
        QString bits;  // "4", "4 + 8", "-"
        double bpw = 0.0;
        QString bpwBasis;  // what the bits per weight count
        std::optional<double> relError;
        std::optional<double> maxAbs;
        QString errorSource;  // where relError was measured, when not by the quantization of this grid
        QString fallback;
    };
    void reset(int nLayers);
    Cell* cellFor(TensorRole role, int32_t layer);
    const Cell& cell(const QModelIndex& index) const;
    std::optional<double> shownValue(const Cell& c) const;
    QString toolTip(const Cell& c) const;

    int m_layers = 0;
    std::vector<Cell> m_cells;  // (m_layers + 1, columnRoles().size()) row-major
    QString m_source;
    Measure m_measure = Measure::Method;
    bool m_log = false;
};

QString methodText(Method m);
// "8 + q4_k": a low-rank record's factor bits and its residual's type (Other: none); "-" for neither.
QString factorBitsText(int factorBits, DType residual);

}  // namespace gkq::ui
