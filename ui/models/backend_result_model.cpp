#include "models/backend_result_model.h"

#include "models/display_format.h"

namespace gkq::ui {

QString reconstructBackendName(ReconstructBackend b) {
    switch (b) {
        case ReconstructBackend::CpuRef: return QStringLiteral("cpu-ref");
        case ReconstructBackend::CpuSimd: return QStringLiteral("cpu-simd");
        case ReconstructBackend::Cuda: return QStringLiteral("cuda");
        case ReconstructBackend::Wasm: return QStringLiteral("wasm");
    }
    return {};
}

BackendResultModel::BackendResultModel(QObject* parent) : QAbstractTableModel(parent) {}

void BackendResultModel::setRows(std::vector<BackendResultRow> rows) {
    beginResetModel();
    m_rows = std::move(rows);
    endResetModel();
}

void BackendResultModel::clear() {
    setRows({});
}

const BackendResultRow* BackendResultModel::find(const QString& tensor, ReconstructBackend backend) const {
    const int r = rowOf(tensor, backend);
    return r < 0 ? nullptr : &m_rows[static_cast<size_t>(r)];
}

int BackendResultModel::rowOf(const QString& tensor, ReconstructBackend backend) const {
    int all = -1;
    for (size_t i = 0; i < m_rows.size(); ++i) {
        if (m_rows[i].backend != backend) continue;
        if (m_rows[i].tensor == tensor) return static_cast<int>(i);
        if (m_rows[i].tensor.isEmpty()) all = static_cast<int>(i);
    }
    return all;
}

int BackendResultModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

int BackendResultModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant BackendResultModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
    const BackendResultRow& r = m_rows[static_cast<size_t>(index.row())];
    const bool ran = r.ran();
    if (role == RawRole) {
        switch (index.column()) {
            case Tensor: return r.tensor;
            case Backend: return reconstructBackendName(r.backend);
            case Device: return r.device;
            case MedianMs: return ran ? QVariant(1e3 * r.seconds) : QVariant();
            case GbPerS: return ran ? QVariant(r.gbPerS) : QVariant();
            case MaxAbsError: return ran ? QVariant(r.maxAbsError) : QVariant();
            case RelError: return ran ? QVariant(r.relError) : QVariant();
            case BitsDiffering: return ran && r.bitsDiffering >= 0 ? QVariant(r.bitsDiffering) : QVariant();
            case Status: return ran ? QStringLiteral("ok") : (r.unavailable.isEmpty() ? r.error : r.unavailable);
        }
        return {};
    }
    if (role == Qt::ToolTipRole && index.column() == Status && !ran)
        return r.unavailable.isEmpty() ? r.error : r.unavailable;
    if (role == Qt::TextAlignmentRole && index.column() >= MedianMs && index.column() <= BitsDiffering)
        return QVariant(Qt::AlignRight | Qt::AlignVCenter);
    if (role != Qt::DisplayRole) return {};
    switch (index.column()) {
        case Tensor:
            if (r.tensor.isEmpty()) return r.tensors == 1 ? tr("the tensor") : tr("all %1 tensors").arg(r.tensors);
            return QStringLiteral("%1 (%2)").arg(r.tensor, r.shape);
        case Backend: return reconstructBackendName(r.backend);
        case Device:  // short, so the numbers stay in view; the last column (Status) says why in full
            return ran ? r.device : (r.unavailable.isEmpty() ? tr("failed (see Status)") : tr("not run (see Status)"));
        case MedianMs: return ran ? formatNumber(1e3 * r.seconds) : QString();
        case GbPerS: return ran ? formatNumber(r.gbPerS) : QString();
        case MaxAbsError: return ran ? formatNumber(r.maxAbsError) : QString();
        case RelError: return ran ? formatNumber(r.relError) : QString();
        case BitsDiffering:
            if (!ran) return QString();
            return r.bitsDiffering < 0 ? tr("(reference)")
                                       : tr("%1 of %2")
                                             .arg(formatCount(static_cast<qint64>(r.bitsDiffering)),
                                                  formatCount(static_cast<qint64>(r.elements)));
        case Status: return ran ? tr("ok") : (r.unavailable.isEmpty() ? tr("failed: %1").arg(r.error) : r.unavailable);
    }
    return {};
}

QVariant BackendResultModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
        case Tensor: return tr("Tensor");
        case Backend: return tr("Backend");
        case Device: return tr("Device");
        case MedianMs: return tr("Median ms");
        case GbPerS: return tr("GB/s out");
        case MaxAbsError: return tr("Max abs error");
        case RelError: return tr("Rel. error");
        case BitsDiffering: return tr("Bits ≠ cpu-ref");
        case Status: return tr("Status");
    }
    return {};
}

}  // namespace gkq::ui
