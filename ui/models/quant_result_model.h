// QuantResultModel: one row per tensor of a QuantizeReport (method, rank, bits, bytes, bits per weight counting
// the whole knot record, relative error) as measured by the core; it adds nothing of its own.
// RawRole gives the unformatted numbers.
#pragma once

#include "gkq/quantize.h"

#include <QAbstractTableModel>
#include <vector>

namespace gkq::ui {

class QuantResultModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Name, Method, Rank, Bits, Bytes, Bpw, RelError, ColumnCount };
    static constexpr int RawRole = Qt::UserRole + 1;

    explicit QuantResultModel(QObject* parent = nullptr);

    void setReport(const QuantizeReport& report);
    void clear();

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    struct Row {
        QString name;
        QString method;
        int rank = 0;
        QString bits;
        quint64 bytes = 0;
        double bpw = 0.0;
        double relError = 0.0;
    };
    std::vector<Row> m_rows;
};

}  // namespace gkq::ui
