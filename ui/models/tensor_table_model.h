// TensorTableModel: the tensors of an open model or knot as a table (name, role, layer, shape, type, parameters,
// bytes as stored). Holds a snapshot of value types copied from the Weights, so it never points into a closed file.
// A matrix stored in another type than most matrices is a fallback: highlighted, its reason in the tooltip
// (f16 because its row length is not a multiple of the common type's block size); another type for no such
// reason is only noted in the tooltip.
#pragma once

#include "gkq/weights.h"

#include <QString>

#include <QAbstractTableModel>
#include <vector>

namespace gkq::ui {

// How tensor i is stored, as its source names it: a model file's type ("F32", "Q4_K", "q8_g64"), a knot record's
// method ("lowrank", "q4_0"), else the dtype.
QString storedTypeName(const Weights& weights, size_t i);

class TensorTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Name, Role, Layer, Shape, Type, Params, Bytes, ColumnCount };

    explicit TensorTableModel(QObject* parent = nullptr);

    void setWeights(const Weights& weights);
    void clear();
    bool isFallback(int row) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    struct Row {
        QString name;
        QString role;
        int layer = -1;
        QString shape;
        QString type;
        qint64 params = 0;
        quint64 bytes = 0;
        bool matrix = false;  // a 2-D matrix a transformer multiplies with
        int64_t cols = 0;
        QString fallback;  // why this matrix could not be in the common type (row length); empty otherwise
        QString note;      // another type than most matrices, for no such reason
    };
    void markFallbacks();
    std::vector<Row> m_rows;
};

}  // namespace gkq::ui
