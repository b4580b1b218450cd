#include "models/quant_result_model.h"

#include <QLocale>

namespace gkq::ui {

QuantResultModel::QuantResultModel(QObject* parent) : QAbstractTableModel(parent) {}

void QuantResultModel::setReport(const QuantizeReport& report) {
    beginResetModel();
    m_rows.clear();
    m_rows.reserve(report.tensors.size());
    for (const QuantizedTensor& q : report.tensors) {
        const TensorReport& c = q.codec;
        Row r;
        r.name = QString::fromStdString(c.name);
        const std::string_view m = method_name(c.method);
        r.method = QString::fromLatin1(m.data(), static_cast<qsizetype>(m.size()));
        r.rank = c.rank;
        if (c.factor_bits > 0 && c.residual_bits > 0)
            r.bits = tr("%1 + %2").arg(c.factor_bits).arg(c.residual_bits);
        else if (c.factor_bits > 0)
            r.bits = QString::number(c.factor_bits);
        else if (c.residual_bits > 0)
            r.bits = QString::number(c.residual_bits);
        else
            r.bits = QStringLiteral("-");
        r.bytes = q.bytes_on_disk();
        r.bpw = q.bits_per_weight();
        r.relError = c.rel_error;
        m_rows.push_back(std::move(r));
    }
    endResetModel();
}

void QuantResultModel::clear() {
    beginResetModel();
    m_rows.clear();
    endResetModel();
}

int QuantResultModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

int QuantResultModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant QuantResultModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
    const Row& r = m_rows[static_cast<size_t>(index.row())];
    if (role == RawRole) {
        switch (index.column()) {
            case Name: return r.name;
            case Method: return r.method;
            case Rank: return r.rank;
            case Bits: return r.bits;
            case Bytes: return r.bytes;
            case Bpw: return r.bpw;
            case RelError: return r.relError;
            default: return {};
        }
    }
    if (role == Qt::DisplayRole) {
        switch (index.column()) {
            case Name: return r.name;
            case Method: return r.method;
            case Rank: return r.rank > 0 ? QString::number(r.rank) : QStringLiteral("-");
            case Bits: return r.bits;
            case Bytes: return QLocale().toString(r.bytes);
            case Bpw: return QString::number(r.bpw, 'f', 3);
            case RelError: return QString::number(r.relError, 'g', 4);
            default: return {};
        }
    }
    if (role == Qt::TextAlignmentRole && index.column() >= Rank) return QVariant(Qt::AlignRight | Qt::AlignVCenter);
    return {};
}

QVariant QuantResultModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
        case Name: return tr("Tensor");
        case Method: return tr("Method");
        case Rank: return tr("Rank");
        case Bits: return tr("Bits");
        case Bytes: return tr("Bytes in knot");
        case Bpw: return tr("Bits/weight");
        case RelError: return tr("Rel. error");
        default: return {};
    }
}

}  // namespace gkq::ui
