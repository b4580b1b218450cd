#include "widgets/result_table.h"

#include <QConcatenateTablesProxyModel>
#include <QEvent>
#include <QHeaderView>
#include <QKeyEvent>
#include <QLineEdit>
#include <QSortFilterProxyModel>
#include <QStandardItemModel>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>

namespace gkq::ui {

ResultTable::ResultTable(QWidget* parent) : QWidget(parent) {
    m_filter = new QLineEdit(this);
    m_filter->setPlaceholderText(tr("Filter rows (any column)"));
    m_filter->setClearButtonEnabled(true);
    m_proxy = new QSortFilterProxyModel(this);
    m_proxy->setFilterKeyColumn(-1);
    m_proxy->setFilterCaseSensitivity(Qt::CaseInsensitive);
    m_proxy->setDynamicSortFilter(true);
    m_totalsModel = new QStandardItemModel(this);
    m_concat = new QConcatenateTablesProxyModel(this);
    connect(m_filter, &QLineEdit::textChanged, m_proxy, &QSortFilterProxyModel::setFilterFixedString);

    m_view = new QTableView(this);
    m_view->verticalHeader()->hide();
    m_view->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_view->setAlternatingRowColors(true);
    QHeaderView* header = m_view->horizontalHeader();
    header->setSectionsClickable(true);
    header->setSortIndicatorShown(true);
    header->setSortIndicator(-1, Qt::AscendingOrder);  // the file's order until a header is clicked
    // The view's model is the concatenation (sorted rows, then totals): sorting goes to the sorting proxy.
    connect(header, &QHeaderView::sortIndicatorChanged, m_proxy,
            [this](int column, Qt::SortOrder order) { m_proxy->sort(column, order); });
    m_view->installEventFilter(this);

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_filter);
    layout->addWidget(m_view, 1);
}

void ResultTable::setSourceModel(QAbstractItemModel* model, int sortRole) {
    m_proxy->setSourceModel(model);
    m_proxy->setSortRole(sortRole);
    m_concat->addSourceModel(m_proxy);
    m_view->setModel(m_concat);
    connect(m_proxy, &QAbstractItemModel::modelReset, this, &ResultTable::updateTotals);
    connect(m_proxy, &QAbstractItemModel::layoutChanged, this, &ResultTable::updateTotals);
    connect(m_proxy, &QAbstractItemModel::rowsInserted, this, &ResultTable::updateTotals);
    connect(m_proxy, &QAbstractItemModel::rowsRemoved, this, &ResultTable::updateTotals);
    connect(m_proxy, &QAbstractItemModel::dataChanged, this, &ResultTable::updateTotals);
}

void ResultTable::setTotals(TotalsFn totals) {
    m_totals = std::move(totals);
    updateTotals();
}

bool ResultTable::hasTotalsRow() const {
    return m_totalsModel->rowCount() > 0;
}

QString ResultTable::totalsText(int column) const {
    if (!hasTotalsRow() || column >= m_totalsModel->columnCount()) return {};
    return m_totalsModel->index(0, column).data().toString();
}

void ResultTable::updateTotals() {
    const bool attached = m_concat->sourceModels().contains(m_totalsModel);
    if (!m_totals || m_proxy->sourceModel() == nullptr || m_proxy->rowCount() == 0) {
        if (attached) m_concat->removeSourceModel(m_totalsModel);
        m_totalsModel->clear();
        return;
    }
    const QStringList cells = m_totals(*m_proxy);
    const int columns = m_proxy->columnCount();
    if (m_totalsModel->columnCount() != columns || m_totalsModel->rowCount() != 1) {
        if (attached) m_concat->removeSourceModel(m_totalsModel);
        m_totalsModel->clear();
        m_totalsModel->setRowCount(1);
        m_totalsModel->setColumnCount(columns);
    }
    QFont bold = font();
    bold.setBold(true);
    for (int c = 0; c < columns; ++c) {
        auto* item = new QStandardItem(cells.value(c));
        item->setFont(bold);
        item->setEditable(false);
        item->setSelectable(false);
        item->setTextAlignment(m_proxy->sourceModel()->index(0, c).data(Qt::TextAlignmentRole).value<Qt::Alignment>());
        m_totalsModel->setItem(0, c, item);
    }
    if (!m_concat->sourceModels().contains(m_totalsModel)) m_concat->addSourceModel(m_totalsModel);
}

bool ResultTable::eventFilter(QObject* watched, QEvent* event) {
    if (watched == m_view && event->type() == QEvent::KeyPress) {
        const auto* key = static_cast<QKeyEvent*>(event);
        if ((key->key() == Qt::Key_Home || key->key() == Qt::Key_End) && m_proxy->rowCount() > 0) {
            const int row = key->key() == Qt::Key_Home ? 0 : m_proxy->rowCount() - 1;  // the last measured row
            const int column = std::max(0, m_view->currentIndex().column());
            const QModelIndex target = m_concat->index(row, column);
            m_view->setCurrentIndex(target);
            m_view->scrollTo(target);
            return true;
        }
    }
    return QWidget::eventFilter(watched, event);
}

QString totalsLabel(int nTensors) {
    return nTensors == 1 ? ResultTable::tr("Total (1 tensor)") : ResultTable::tr("Total (%1 tensors)").arg(nTensors);
}

double columnSum(const QAbstractItemModel& model, int column, int role) {
    double sum = 0.0;
    for (int r = 0; r < model.rowCount(); ++r) sum += model.index(r, column).data(role).toDouble();
    return sum;
}

}  // namespace gkq::ui
