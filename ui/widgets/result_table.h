// ResultTable: how the workbench shows a table of measured rows (the tensor table, the quantize and compare
// results): a filter box over every column; every column sortable by its raw value (the model's sort role, so
// numbers sort as numbers) with the file's order until a header is clicked; an optional totals row that sums the
// rows the filter keeps and stays last whatever the order; Home / End go to the first / last row.
// The source model is not changed: the view shows the sorted rows, then the totals row (a one-row model).
#pragma once

#include <QStringList>
#include <QWidget>
#include <functional>

class QAbstractItemModel;
class QConcatenateTablesProxyModel;
class QLineEdit;
class QSortFilterProxyModel;
class QStandardItemModel;
class QTableView;

namespace gkq::ui {

class ResultTable : public QWidget {
    Q_OBJECT
public:
    // The totals row's cells (one per column; empty where a sum means nothing) from the rows the filter keeps.
    using TotalsFn = std::function<QStringList(const QAbstractItemModel& visible)>;

    explicit ResultTable(QWidget* parent = nullptr);

    void setSourceModel(QAbstractItemModel* model, int sortRole);
    void setTotals(TotalsFn totals);
    QTableView* view() const { return m_view; }
    QSortFilterProxyModel* proxy() const { return m_proxy; }  // sorted and filtered rows
    QLineEdit* filterEdit() const { return m_filter; }
    // The totals row's text in `column` (empty without a totals function).
    QString totalsText(int column) const;
    bool hasTotalsRow() const;

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    void updateTotals();

    QLineEdit* m_filter = nullptr;
    QTableView* m_view = nullptr;
    QSortFilterProxyModel* m_proxy = nullptr;
    QStandardItemModel* m_totalsModel = nullptr;
    QConcatenateTablesProxyModel* m_concat = nullptr;
    TotalsFn m_totals;
};

// "Total (3 tensors)", "Total (1 tensor)".
QString totalsLabel(int nTensors);
// Sums of `role` over the rows of `model` in `column`.
double columnSum(const QAbstractItemModel& model, int column, int role);

}  // namespace gkq::ui
