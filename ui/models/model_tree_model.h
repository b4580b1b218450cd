// ModelTreeModel: the open model's tensors as a tree — one group for the tensors outside the blocks, then one per
// transformer layer — with role, shape, type, parameters and bytes per tensor (and sums per group).
// Holds a snapshot of value types copied from the Weights (a model file or a knot), so it never points into a closed
// file. The Name column shows a tensor's short name (shortTensorName, gkq/arch.h: "blk.3.ffn_up"), its tooltip the
// stored one. Qt::UserRole on any column of a tensor row is its stored name (empty for groups); RawRole gives
// unformatted numbers (and the stored name in the Name column).
#pragma once

#include "gkq/weights.h"

#include <QAbstractItemModel>
#include <vector>

namespace gkq::ui {

class ModelTreeModel : public QAbstractItemModel {
    Q_OBJECT
public:
    enum Column { Name, Role, Shape, Type, Params, Bytes, ColumnCount };
    static constexpr int NameRole = Qt::UserRole;
    static constexpr int RawRole = Qt::UserRole + 1;

    explicit ModelTreeModel(QObject* parent = nullptr);

    void setWeights(const Weights& weights);
    void clear();
    // Index (column 0) of the tensor named `name`, invalid when absent.
    QModelIndex indexOfTensor(const QString& name) const;

    QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
    QModelIndex parent(const QModelIndex& child) const override;
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    struct Item {
        QString name;       // as stored
        QString shortName;  // shown in the tree
        QString role;
        QString shape;
        QString type;
        qint64 params = 0;
        quint64 bytes = 0;
    };
    struct Group {
        Item summary;
        std::vector<Item> tensors;
    };
    QVariant itemData(const Item& item, bool isTensor, int column, int role) const;

    std::vector<Group> m_groups;
};

}  // namespace gkq::ui
