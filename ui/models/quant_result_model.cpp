#include "models/quant_result_model.h"

#include "models/display_format.h"
#include "models/layer_role_model.h"

#include <QBrush>
#include <QColor>
#include <QStringList>

#include <algorithm>
#include <map>

namespace gkq::ui {

QuantResultModel::QuantResultModel(QObject* parent) : QAbstractTableModel(parent) {}

void QuantResultModel::setReport(const QuantizeReport& report) {
    beginResetModel();
    m_tensors.clear();
    m_tensors.reserve(report.tensors.size());
    for (const QuantizedTensor& q : report.tensors) {
        const TensorReport& c = q.codec;
        Row r;
        r.name = QString::fromStdString(c.name);
        const std::string_view m = method_name(c.method);
        r.method = QString::fromLatin1(m.data(), static_cast<qsizetype>(m.size()));
        r.rank = c.rank;
        r.bits = factorBitsText(c.factor_bits, c.residual_type);
        r.bytes = q.bytes_on_disk();
        r.bpw = q.bits_per_weight();
        r.relError = c.rel_error;
        r.elements = c.n_elements();
        r.fallback = QString::fromStdString(c.fallback);
        r.layer = c.layer;
        const std::string_view role = role_name(c.role);
        r.role = QString::fromLatin1(role.data(), static_cast<qsizetype>(role.size()));
        m_tensors.push_back(std::move(r));
    }
    // Outliers: bits per weight above twice the rows' overall (their bytes over their weights), typically a small
    // tensor (a norm) whose record header outweighs its data.
    double bytes = 0.0, elements = 0.0;
    for (const Row& r : m_tensors) {
        bytes += static_cast<double>(r.bytes);
        elements += static_cast<double>(r.elements);
    }
    m_overallBpw = elements > 0.0 ? 8.0 * bytes / elements : 0.0;
    regroup();
    endResetModel();
}

void QuantResultModel::setGroupBy(GroupBy by) {
    if (by == m_groupBy) return;
    beginResetModel();
    m_groupBy = by;
    regroup();
    endResetModel();
}

void QuantResultModel::regroup() {
    if (m_groupBy == GroupBy::Tensor) {
        m_rows = m_tensors;
        return;
    }
    m_rows.clear();
    std::map<QString, size_t> at;      // group label -> row
    std::vector<QStringList> methods;  // per row: its tensors' methods, each once, in order
    for (const Row& t : m_tensors) {
        const QString label = m_groupBy == GroupBy::Role ? t.role
                              : t.layer >= 0             ? tr("layer %1").arg(t.layer)
                                                         : tr("not in a layer");
        auto [it, added] = at.try_emplace(label, m_rows.size());
        if (added) {
            Row g;
            g.name = label;
            g.layer = m_groupBy == GroupBy::Layer ? t.layer : -1;
            g.role = m_groupBy == GroupBy::Role ? t.role : QString();
            g.nTensors = 0;
            g.bits = QStringLiteral("-");
            m_rows.push_back(std::move(g));
            methods.emplace_back();
        }
        Row& g = m_rows[it->second];
        ++g.nTensors;
        g.bytes += t.bytes;
        g.elements += t.elements;
        g.relError = std::max(g.relError, t.relError);
        if (!t.fallback.isEmpty())
            g.fallback +=
                (g.fallback.isEmpty() ? QString() : QStringLiteral("\n")) + t.name + QStringLiteral(": ") + t.fallback;
        if (!methods[it->second].contains(t.method)) methods[it->second] << t.method;
    }
    for (size_t i = 0; i < m_rows.size(); ++i) {
        Row& g = m_rows[i];
        g.method = methods[i].join(QStringLiteral(", "));
        g.bpw = g.elements > 0 ? 8.0 * static_cast<double>(g.bytes) / static_cast<double>(g.elements) : 0.0;
    }
}

void QuantResultModel::clear() {
    beginResetModel();
    m_tensors.clear();
    m_rows.clear();
    m_overallBpw = 0.0;
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
            case Name: return m_groupBy == GroupBy::Layer ? QVariant(r.layer) : QVariant(r.name);
            case Method: return r.method;
            case Rank: return r.rank;
            case Bits: return r.bits;
            case Bytes: return r.bytes;
            case Bpw: return r.bpw;
            case RelError: return r.relError;
            default: return {};
        }
    }
    if (role == ElementsRole) return QVariant::fromValue(r.elements);
    if (role == TensorsRole) return r.nTensors;
    if (role == Qt::DisplayRole) {
        switch (index.column()) {
            case Name:
                return m_groupBy == GroupBy::Tensor
                           ? r.name
                           : tr("%1 (%2)").arg(r.name, formatCount(static_cast<qint64>(r.nTensors)));
            case Method: return r.method;
            case Rank: return r.rank > 0 ? formatCount(static_cast<qint64>(r.rank)) : QStringLiteral("-");
            case Bits: return r.bits;
            case Bytes: return formatCount(r.bytes);
            case Bpw: return formatNumber(r.bpw);
            case RelError: return formatNumber(r.relError);
            default: return {};
        }
    }
    const bool outlier = isOutlier(index.row());
    if (role == Qt::BackgroundRole && !r.fallback.isEmpty()) return QBrush(fallbackColor());
    if (role == Qt::BackgroundRole && outlier && index.column() == Bpw) return QBrush(outlierColor());
    if (role == Qt::ForegroundRole && (!r.fallback.isEmpty() || (outlier && index.column() == Bpw)))
        return QBrush(Qt::black);  // on the light highlight, in a dark theme too
    if (role == Qt::ToolTipRole) {
        QStringList tips;
        if (m_groupBy != GroupBy::Tensor)
            tips
                << tr("%1 tensors; bits per weight: their bytes over their weights; rel. error: the largest among them")
                       .arg(r.nTensors);
        if (!r.fallback.isEmpty()) tips << tr("Fallback: %1").arg(r.fallback);
        if (outlier)
            tips << tr("%1 bits per weight, more than twice the table's %2 (a small tensor pays for its record)")
                        .arg(formatNumber(r.bpw), formatNumber(m_overallBpw));
        if (!tips.isEmpty()) return tips.join(QLatin1Char('\n'));
    }
    if (role == Qt::TextAlignmentRole && index.column() >= Rank) return QVariant(Qt::AlignRight | Qt::AlignVCenter);
    return {};
}

bool QuantResultModel::isFallback(int row) const {
    return row >= 0 && row < rowCount() && !m_rows[static_cast<size_t>(row)].fallback.isEmpty();
}

bool QuantResultModel::isOutlier(int row) const {
    return row >= 0 && row < rowCount() && m_overallBpw > 0.0 &&
           m_rows[static_cast<size_t>(row)].bpw > 2.0 * m_overallBpw;
}

QColor QuantResultModel::fallbackColor() {
    return QColor(255, 224, 178);  // light orange
}

QColor QuantResultModel::outlierColor() {
    return QColor(255, 205, 210);  // light red
}

QVariant QuantResultModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
        case Name:
            return m_groupBy == GroupBy::Layer ? tr("Layer") : m_groupBy == GroupBy::Role ? tr("Role") : tr("Tensor");
        case Method: return tr("Method");
        case Rank: return tr("Rank");
        case Bits: return tr("Bits");
        case Bytes: return tr("Bytes in knot");
        case Bpw: return tr("Bits/weight");
        case RelError: return m_groupBy == GroupBy::Tensor ? tr("Rel. error") : tr("Max rel. error");
        default: return {};
    }
}

}  // namespace gkq::ui
