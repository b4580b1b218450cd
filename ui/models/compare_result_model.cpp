#include "models/compare_result_model.h"

#include "models/display_format.h"

namespace gkq::ui {

CompareResultModel::CompareResultModel(QObject* parent) : QAbstractTableModel(parent) {}

void CompareResultModel::setPoints(std::vector<ComparePoint> points) {
    beginResetModel();
    m_points = std::move(points);
    endResetModel();
}

void CompareResultModel::addPoint(ComparePoint point) {
    const int row = static_cast<int>(m_points.size());
    beginInsertRows({}, row, row);
    m_points.push_back(std::move(point));
    endInsertRows();
}

QString CompareResultModel::toCsv() const {
    QString csv = QStringLiteral("preset,bits_per_weight,mean_kld,mean_kld_se,same_top,ppl_ratio,file_bytes,tokens\n");
    for (const ComparePoint& p : m_points)
        csv += QStringLiteral("%1,%2,%3,%4,%5,%6,%7,%8\n")
                   .arg(p.preset)
                   .arg(p.bitsPerWeight, 0, 'g', 17)
                   .arg(p.meanKld, 0, 'g', 17)
                   .arg(p.meanKldSe, 0, 'g', 17)
                   .arg(p.sameTop, 0, 'g', 17)
                   .arg(p.pplRatio, 0, 'g', 17)
                   .arg(p.fileBytes)
                   .arg(p.tokens);
    return csv;
}

int CompareResultModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(m_points.size());
}

int CompareResultModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant CompareResultModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
    const ComparePoint& p = m_points[static_cast<size_t>(index.row())];
    if (role == RawRole) {
        switch (index.column()) {
            case Preset: return p.preset;
            case Bpw: return p.bitsPerWeight;
            case MeanKld: return p.meanKld;
            case KldSe: return p.meanKldSe;
            case SameTop: return p.sameTop;
            case PplRatio: return p.pplRatio;
            case FileBytes: return p.fileBytes;
            default: return {};
        }
    }
    if (role == Qt::DisplayRole) {
        switch (index.column()) {
            case Preset: return p.preset;
            case Bpw: return formatNumber(p.bitsPerWeight);
            case MeanKld: return formatNumber(p.meanKld);
            case KldSe: return formatNumber(p.meanKldSe, 2);
            case SameTop: return QStringLiteral("%1 %").arg(formatNumber(100.0 * p.sameTop));
            case PplRatio: return formatNumber(p.pplRatio, 6);  // a ratio near 1: its digits after the point matter
            case FileBytes: return formatCount(p.fileBytes);
            default: return {};
        }
    }
    if (role == Qt::TextAlignmentRole && index.column() != Preset) return QVariant(Qt::AlignRight | Qt::AlignVCenter);
    return {};
}

QVariant CompareResultModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
        case Preset: return tr("Preset");
        case Bpw: return tr("Bits/weight");
        case MeanKld: return tr("Mean KLD");
        case KldSe: return tr("± SE");
        case SameTop: return tr("Same top token");
        case PplRatio: return tr("PPL ratio");
        case FileBytes: return tr("Knot bytes");
        default: return {};
    }
}

}  // namespace gkq::ui
