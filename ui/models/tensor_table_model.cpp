#include "models/tensor_table_model.h"

#include "gkq/knot.h"
#include "gkq/model_file.h"

#include <QLocale>

namespace gkq::ui {

QString storedTypeName(const Weights& weights, size_t i) {
    if (const auto* file = dynamic_cast<const ModelFile*>(&weights))
        return QString::fromStdString(file->tensors()[i].type_name);
    if (const auto* knot = dynamic_cast<const KnotFile*>(&weights))
        return QString::fromLatin1(method_name(knot->entries()[i].method).data());
    return QString::fromLatin1(dtype_name(weights.tensor_info(i).dtype).data());
}

TensorTableModel::TensorTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void TensorTableModel::setWeights(const Weights& weights) {
    beginResetModel();
    m_rows.clear();
    m_rows.reserve(weights.n_tensors());
    const bool modelFile = dynamic_cast<const ModelFile*>(&weights) != nullptr;
    for (size_t i = 0; i < weights.n_tensors(); ++i) {
        const TensorInfo& t = weights.tensor_info(i);
        Row r;
        r.name = QString::fromUtf8(t.name.data(), static_cast<qsizetype>(t.name.size()));
        r.role = QString::fromLatin1(role_name(t.role).data(), static_cast<qsizetype>(role_name(t.role).size()));
        r.layer = t.layer;
        r.shape = QString::fromStdString(shape_to_string(t.shape));
        r.type = !modelFile || t.dtype == DType::Other || t.dtype == DType::Q8_G
                     ? storedTypeName(weights, i)
                     : QString::fromLatin1(dtype_name(t.dtype).data());
        r.params = t.n_elements();
        r.bytes = weights.stored_bytes(i);
        m_rows.push_back(std::move(r));
    }
    endResetModel();
}

void TensorTableModel::clear() {
    beginResetModel();
    m_rows.clear();
    endResetModel();
}

int TensorTableModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

int TensorTableModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant TensorTableModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= static_cast<int>(m_rows.size()) || index.column() >= ColumnCount) return {};
    const Row& r = m_rows[static_cast<size_t>(index.row())];
    if (role == Qt::DisplayRole) {
        switch (index.column()) {
            case Name: return r.name;
            case Role: return r.role;
            case Layer: return r.layer >= 0 ? QVariant(r.layer) : QVariant(QStringLiteral("-"));
            case Shape: return r.shape;
            case Type: return r.type;
            case Params: return QLocale().toString(r.params);
            case Bytes: return QLocale().toString(r.bytes);
            default: return {};
        }
    }
    if (role == Qt::UserRole) {  // raw values for sorting and tests
        switch (index.column()) {
            case Layer: return r.layer;
            case Params: return r.params;
            case Bytes: return r.bytes;
            default: return data(index, Qt::DisplayRole);
        }
    }
    if (role == Qt::TextAlignmentRole &&
        (index.column() == Params || index.column() == Bytes || index.column() == Layer))
        return QVariant(Qt::AlignRight | Qt::AlignVCenter);
    return {};
}

QVariant TensorTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
        case Name: return tr("Name");
        case Role: return tr("Role");
        case Layer: return tr("Layer");
        case Shape: return tr("Shape");
        case Type: return tr("Type");
        case Params: return tr("Parameters");
        case Bytes: return tr("Bytes");
        default: return {};
    }
}

}  // namespace gkq::ui
