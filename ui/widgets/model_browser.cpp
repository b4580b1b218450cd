#include "widgets/model_browser.h"

#include "models/model_tree_model.h"

#include <QHeaderView>
#include <QLineEdit>
#include <QSortFilterProxyModel>
#include <QTreeView>
#include <QVBoxLayout>

namespace gkq::ui {

ModelBrowser::ModelBrowser(QWidget* parent) : QWidget(parent) {
    m_model = new ModelTreeModel(this);
    m_proxy = new QSortFilterProxyModel(this);
    m_proxy->setSourceModel(m_model);
    m_proxy->setFilterKeyColumn(-1);
    m_proxy->setFilterCaseSensitivity(Qt::CaseInsensitive);
    m_proxy->setRecursiveFilteringEnabled(true);  // a matching tensor keeps its layer visible

    m_filter = new QLineEdit(this);
    m_filter->setPlaceholderText(tr("Filter tensors (name, role, type, shape...)"));
    m_filter->setClearButtonEnabled(true);
    connect(m_filter, &QLineEdit::textChanged, this, [this](const QString& text) {
        m_proxy->setFilterFixedString(text);
        if (!text.isEmpty()) m_tree->expandAll();
    });

    m_tree = new QTreeView(this);
    m_tree->setModel(m_proxy);
    m_tree->setUniformRowHeights(true);
    m_tree->setTextElideMode(Qt::ElideMiddle);  // the ends of tensor names are what tell them apart
    m_tree->setAlternatingRowColors(true);
    m_tree->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_tree->setSelectionMode(QAbstractItemView::SingleSelection);
    // Name keeps the width of its longest short name (the tree scrolls sideways instead of eliding it to "...");
    // the last column takes what is left.
    m_tree->header()->setStretchLastSection(true);
    m_tree->header()->setSectionResizeMode(QHeaderView::Interactive);
    m_tree->header()->setMinimumSectionSize(fontMetrics().horizontalAdvance(QStringLiteral("layer 00")));
    connect(m_tree->selectionModel(), &QItemSelectionModel::currentRowChanged, this, &ModelBrowser::onCurrentChanged);
    connect(m_model, &QAbstractItemModel::modelReset, this, [this] {
        m_selected.clear();
        expandAllLayers();
    });

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_filter);
    layout->addWidget(m_tree);
    // What a dock of this browser needs to show a layer's short names and their roles (the main window keeps it
    // at least this wide).
    setMinimumWidth(minimumUsableWidth());
}

int ModelBrowser::minimumUsableWidth() const {
    // A block tensor's short name and its role (about eighteen and eleven characters), their margins, the indentation.
    constexpr int kCharacters = 34;
    return fontMetrics().averageCharWidth() * kCharacters + 48;
}

QTreeView* ModelBrowser::treeView() const {
    return m_tree;
}

void ModelBrowser::setFilterText(const QString& text) {
    m_filter->setText(text);
}

void ModelBrowser::expandAllLayers() {
    m_tree->expandAll();
    for (int c = 0; c < ModelTreeModel::ColumnCount; ++c) m_tree->resizeColumnToContents(c);
}

bool ModelBrowser::selectTensor(const QString& name) {
    const QModelIndex proxyIndex = m_proxy->mapFromSource(m_model->indexOfTensor(name));
    if (!proxyIndex.isValid()) return false;
    m_tree->setCurrentIndex(proxyIndex);
    m_tree->scrollTo(proxyIndex);
    return true;
}

void ModelBrowser::onCurrentChanged() {
    const QString name = m_tree->currentIndex().data(ModelTreeModel::NameRole).toString();
    if (name.isEmpty() || name == m_selected) return;
    m_selected = name;
    emit tensorSelected(name);
}

}  // namespace gkq::ui
