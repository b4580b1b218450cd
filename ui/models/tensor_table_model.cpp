#include "models/tensor_table_model.h"

#include "gkq/knot.h"
#include "gkq/model_file.h"
#include "gkq/type_traits.h"
#include "models/display_format.h"

#include <QBrush>
#include <QColor>
#include <QLocale>
#include <algorithm>
#include <map>

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
        r.matrix = role_is_matrix(t.role) && t.n_dims() == 2;
        r.cols = t.cols();
        m_rows.push_back(std::move(r));
    }
    markFallbacks();
    endResetModel();
}

void TensorTableModel::markFallbacks() {
    // The type most matrices are stored in; a matrix stored otherwise is a fallback (llama.cpp keeps a tensor in
    // a wider type when its rows do not split into the quantized type's blocks).
    std::map<QString, int> count;
    for (const Row& r : m_rows)
        if (r.matrix) ++count[r.type];
    if (count.size() < 2) return;
    QString common = count.begin()->first;
    for (const auto& [type, n] : count)
        if (n > count[common]) common = type;
    int64_t block = 1;  // the common type's values per block, from the type table
    for (const TypeTraits& t : type_table()) {
        const auto name = [](std::string_view v) {
            return QString::fromLatin1(v.data(), static_cast<qsizetype>(v.size()));
        };
        if (common.compare(name(t.name), Qt::CaseInsensitive) == 0 ||
            common.compare(name(t.ggml_name), Qt::CaseInsensitive) == 0)
            block = std::max<int64_t>(1, t.block_elements);
    }
    for (Row& r : m_rows) {
        if (!r.matrix || r.type == common) continue;
        if (block > 1 && r.cols % block != 0)
            r.fallback = tr("stored %1: its row length %2 is not a multiple of %3's block of %4 (most matrices are %3)")
                             .arg(r.type)
                             .arg(r.cols)
                             .arg(common)
                             .arg(block);
        else  // a deliberate mix (llama.cpp's q4_k_m keeps some matrices in q6_k): said, not highlighted
            r.note = tr("stored %1 while most matrices are %2").arg(r.type, common);
    }
}

bool TensorTableModel::isFallback(int row) const {
    return row >= 0 && row < rowCount() && !m_rows[static_cast<size_t>(row)].fallback.isEmpty();
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
            case Params: return formatCount(r.params);
            case Bytes: return formatCount(r.bytes);
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
    if (!r.fallback.isEmpty()) {
        if (role == Qt::BackgroundRole) return QBrush(QColor(255, 224, 178));  // light orange: a fallback
        if (role == Qt::ForegroundRole) return QBrush(Qt::black);
        if (role == Qt::ToolTipRole) return r.fallback;
    }
    if (role == Qt::ToolTipRole && !r.note.isEmpty()) return r.note;
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
