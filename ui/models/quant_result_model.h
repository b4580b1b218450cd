// QuantResultModel: one row per tensor of a QuantizeReport (method, rank, bits, bytes, bits per weight counting
// the whole knot record, relative error) as measured by the core, in the one number format (display_format.h).
// Highlighted: a tensor whose requested method could not be used (the codec's fallback, its reason in the
// tooltip), and a bits-per-weight above twice the rows' overall (bytes over weights of all rows).
// RawRole gives the unformatted numbers, ElementsRole a row's weight count.
// Grouped by layer or by role (a 7-8 B model has 291 tensors in 32 layers), a row is a group: its tensors' methods,
// summed bytes, bits per weight as their bytes over their weights, and the largest relative error among them (the
// report keeps no norms, so no exact error of the group as a whole).
#pragma once

#include "gkq/quantize.h"

#include <QAbstractTableModel>
#include <QColor>
#include <vector>

namespace gkq::ui {

class QuantResultModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Name, Method, Rank, Bits, Bytes, Bpw, RelError, ColumnCount };
    enum class GroupBy { Tensor, Layer, Role };
    static constexpr int RawRole = Qt::UserRole + 1;
    static constexpr int ElementsRole = Qt::UserRole + 2;
    static constexpr int TensorsRole = Qt::UserRole + 3;  // how many tensors a row stands for

    explicit QuantResultModel(QObject* parent = nullptr);

    void setReport(const QuantizeReport& report);
    void clear();
    void setGroupBy(GroupBy by);
    GroupBy groupBy() const { return m_groupBy; }
    bool isFallback(int row) const;
    bool isOutlier(int row) const;
    double overallBitsPerWeight() const { return m_overallBpw; }
    static QColor fallbackColor();
    static QColor outlierColor();

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    struct Row {
        QString name;
        QString method;
        int rank = 0;
        QString bits;
        quint64 bytes = 0;
        double bpw = 0.0;
        double relError = 0.0;
        qint64 elements = 0;
        QString fallback;  // why the requested method was not used; empty when it was
        int layer = -1;    // -1: not in a layer
        QString role;
        int nTensors = 1;
    };
    void regroup();
    std::vector<Row> m_tensors;  // one per tensor of the report
    std::vector<Row> m_rows;     // as shown: the tensors, or their groups
    GroupBy m_groupBy = GroupBy::Tensor;
    double m_overallBpw = 0.0;
};

}  // namespace gkq::ui
