// BackendResultModel: the Reconstruct panel's table — one row per (tensor, backend): median decode time, GB/s of
// output, max abs and relative error against the float64 reference, and how many output elements differ in their
// f32 bits from the CPU reference backend's. A backend that cannot run here has one row for all tensors (empty
// tensor, `tensors` set) with the reason in the Status column; one that could not run or failed on a tensor has
// that tensor's row with the reason or the error. RawRole gives the unformatted numbers.
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <vector>

namespace gkq::ui {

// Backends of the Reconstruct panel, in display order: the native ones of gkq::kernels, then WebAssembly (node).
enum class ReconstructBackend { CpuRef, CpuSimd, Cuda, Wasm };
QString reconstructBackendName(ReconstructBackend b);  // "cpu-ref", "cpu-simd", "cuda", "wasm"

struct BackendResultRow {
    QString tensor;   // empty: the row stands for every tensor of the run (a backend unavailable here)
    int tensors = 1;  // how many tensors the row stands for
    QString shape;    // "4096 x 11008"
    ReconstructBackend backend = ReconstructBackend::CpuRef;
    QString unavailable;  // non-empty: did not run, and why
    QString error;        // non-empty: ran and failed
    QString device;       // what ran it
    int threads = 1;
    qint64 elements = 0;
    double seconds = 0.0;  // median of the timed runs
    double gbPerS = 0.0;   // 4 * elements / seconds / 1e9
    double maxAbsError = 0.0;
    double relError = 0.0;
    qint64 bitsDiffering = -1;  // elements whose f32 bits differ from cpu-ref's; -1: not compared (cpu-ref itself)

    bool ran() const { return unavailable.isEmpty() && error.isEmpty(); }
};

class BackendResultModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column {
        Tensor,
        Backend,
        Device,
        MedianMs,
        GbPerS,
        MaxAbsError,
        RelError,
        BitsDiffering,
        Status,
        ColumnCount
    };
    static constexpr int RawRole = Qt::UserRole + 1;

    explicit BackendResultModel(QObject* parent = nullptr);

    void setRows(std::vector<BackendResultRow> rows);
    void clear();
    const std::vector<BackendResultRow>& rows() const { return m_rows; }
    // The row of `tensor` on `backend` (the backend's row for all tensors when it has none of its own), or nullptr.
    const BackendResultRow* find(const QString& tensor, ReconstructBackend backend) const;
    // -1 when absent; as find().
    int rowOf(const QString& tensor, ReconstructBackend backend) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::vector<BackendResultRow> m_rows;
};

}  // namespace gkq::ui
