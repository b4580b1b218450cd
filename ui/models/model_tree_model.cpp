#include "models/model_tree_model.h"

#include "gkq/arch.h"
#include "models/display_format.h"
#include "models/tensor_table_model.h"

#include <QLocale>
#include <map>

namespace gkq::ui {

namespace {
// Group rows have internal id 0; a tensor row's internal id is its group's row + 1.
constexpr quintptr kGroupId = 0;
}  // namespace

ModelTreeModel::ModelTreeModel(QObject* parent) : QAbstractItemModel(parent) {}

void ModelTreeModel::setWeights(const Weights& weights) {
    beginResetModel();
    m_groups.clear();
    std::map<int32_t, Group> byLayer;  // -1 (outside the blocks) sorts first
    const ArchSpec& arch = arch_or_default(weights.config().architecture);
    for (size_t i = 0; i < weights.n_tensors(); ++i) {
        const TensorInfo& t = weights.tensor_info(i);
        Item item;
        item.name = QString::fromStdString(t.name);
        item.shortName = shortTensorName(arch, t.name);
        const std::string_view role = role_name(t.role);
        item.role = QString::fromLatin1(role.data(), static_cast<qsizetype>(role.size()));
        item.shape = QString::fromStdString(shape_to_string(t.shape));
        item.type = storedTypeName(weights, i);
        item.params = t.n_elements();
        item.bytes = weights.stored_bytes(i);
        Group& g = byLayer[t.layer];
        g.summary.params += item.params;
        g.summary.bytes += item.bytes;
        g.tensors.push_back(std::move(item));
    }
    for (auto& [layer, g] : byLayer) {
        g.summary.name = layer < 0 ? tr("model-wide") : tr("layer %1").arg(layer);
        g.summary.shortName = g.summary.name;
        g.summary.shape = tr("%n tensor(s)", nullptr, static_cast<int>(g.tensors.size()));
        m_groups.push_back(std::move(g));
    }
    endResetModel();
}

void ModelTreeModel::clear() {
    beginResetModel();
    m_groups.clear();
    endResetModel();
}

QModelIndex ModelTreeModel::indexOfTensor(const QString& name) const {
    for (size_t g = 0; g < m_groups.size(); ++g)
        for (size_t t = 0; t < m_groups[g].tensors.size(); ++t)
            if (m_groups[g].tensors[t].name == name)
                return createIndex(static_cast<int>(t), 0, static_cast<quintptr>(g + 1));
    return {};
}

QModelIndex ModelTreeModel::index(int row, int column, const QModelIndex& parent) const {
    if (!hasIndex(row, column, parent)) return {};
    if (!parent.isValid()) return createIndex(row, column, kGroupId);
    return createIndex(row, column, static_cast<quintptr>(parent.row() + 1));
}

QModelIndex ModelTreeModel::parent(const QModelIndex& child) const {
    if (!child.isValid() || child.internalId() == kGroupId) return {};
    return createIndex(static_cast<int>(child.internalId() - 1), 0, kGroupId);
}

int ModelTreeModel::rowCount(const QModelIndex& parent) const {
    if (!parent.isValid()) return static_cast<int>(m_groups.size());
    if (parent.internalId() != kGroupId || parent.column() != 0) return 0;
    return static_cast<int>(m_groups[static_cast<size_t>(parent.row())].tensors.size());
}

int ModelTreeModel::columnCount(const QModelIndex&) const {
    return ColumnCount;
}

QVariant ModelTreeModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
    if (index.internalId() == kGroupId)
        return itemData(m_groups[static_cast<size_t>(index.row())].summary, false, index.column(), role);
    const Group& g = m_groups[static_cast<size_t>(index.internalId() - 1)];
    return itemData(g.tensors[static_cast<size_t>(index.row())], true, index.column(), role);
}

QVariant ModelTreeModel::itemData(const Item& item, bool isTensor, int column, int role) const {
    if (role == NameRole) return isTensor ? item.name : QString();
    if (role == Qt::ToolTipRole && column == Name && isTensor) return item.name;  // the stored name, in full
    if (role == Qt::DisplayRole || role == RawRole) {
        const bool raw = role == RawRole;
        switch (column) {
            case Name: return raw ? item.name : item.shortName;
            case Role: return item.role;
            case Shape: return item.shape;
            case Type: return item.type;
            case Params: return raw ? QVariant(item.params) : QVariant(formatCount(item.params));
            case Bytes: return raw ? QVariant(item.bytes) : QVariant(formatCount(item.bytes));
            default: return {};
        }
    }
    if (role == Qt::TextAlignmentRole && (column == Params || column == Bytes))
        return QVariant(Qt::AlignRight | Qt::AlignVCenter);
    return {};
}

QVariant ModelTreeModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
        case Name: return tr("Name");
        case Role: return tr("Role");
        case Shape: return tr("Shape");
        case Type: return tr("Type");
        case Params: return tr("Parameters");
        case Bytes: return tr("Bytes");
        default: return {};
    }
}

}  // namespace gkq::ui
