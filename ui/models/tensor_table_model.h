// TensorTableModel: the tensors of an open model as a table (name, role, layer, shape, type, parameters,
// bytes). Holds a snapshot of value types copied from the ModelFile, so it never points into a closed file.
// A matrix stored in another type than most matrices is a fallback: highlighted, its reason in the tooltip
// (f16 because its row length is not a multiple of the common type's block size); another type for no such
// reason is only noted in the tooltip.
#pragma once

#include "gkq/model_file.h"

#include <QAbstractTableModel>
#include <vector>

namespace gkq::ui {

class TensorTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Name, Role, Layer, Shape, Type, Params, Bytes, ColumnCount };

    explicit TensorTableModel(QObject* parent = nullptr);

    void setModelFile(const ModelFile& file);
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
