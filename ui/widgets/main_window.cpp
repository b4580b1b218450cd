#include "widgets/main_window.h"

#include "models/tensor_table_model.h"

#include <QApplication>
#include <QFileDialog>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QSettings>
#include <QSortFilterProxyModel>
#include <QStatusBar>
#include <QTableView>
#include <QVBoxLayout>

namespace gkq::ui {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
    setWindowTitle(tr("GKQ Workbench"));
    m_tensorModel = new TensorTableModel(this);
    m_proxy = new QSortFilterProxyModel(this);
    m_proxy->setSourceModel(m_tensorModel);
    m_proxy->setFilterKeyColumn(-1);
    m_proxy->setFilterCaseSensitivity(Qt::CaseInsensitive);

    auto* central = new QWidget(this);
    auto* layout = new QVBoxLayout(central);
    m_summary = new QLabel(tr("No model open. Use File > Open (Ctrl+O)."), central);
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_summary->setWordWrap(true);
    auto* filter = new QLineEdit(central);
    filter->setPlaceholderText(tr("Filter tensors (name, role, type...)"));
    filter->setClearButtonEnabled(true);
    connect(filter, &QLineEdit::textChanged, m_proxy, &QSortFilterProxyModel::setFilterFixedString);
    m_table = new QTableView(central);
    m_table->setModel(m_proxy);
    m_table->setSortingEnabled(false);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->horizontalHeader()->setStretchLastSection(true);
    m_table->verticalHeader()->hide();
    layout->addWidget(m_summary);
    layout->addWidget(filter);
    layout->addWidget(m_table);
    setCentralWidget(central);

    QMenu* file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&Open..."), QKeySequence::Open, this, &MainWindow::openDialog);
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, qApp, &QApplication::closeAllWindows);

    QSettings settings;
    if (!restoreGeometry(settings.value("mainWindow/geometry").toByteArray())) resize(1100, 700);
    statusBar()->showMessage(tr("Ready"));
}

MainWindow::~MainWindow() {
    QSettings settings;
    settings.setValue("mainWindow/geometry", saveGeometry());
}

void MainWindow::openDialog() {
    QSettings settings;
    const QString path = QFileDialog::getOpenFileName(
        this, tr("Open model"), settings.value("lastDir").toString(),
        tr("Models (*.safetensors *.gguf *.bin *.json);;All files (*)"));
    if (path.isEmpty()) return;
    settings.setValue("lastDir", QFileInfo(path).absolutePath());
    openModel(path);
}

bool MainWindow::openModel(const QString& path) {
    auto opened = ModelFile::open(path.toStdString());
    if (!opened) {
        showError(QString::fromStdString(opened.message()));
        return false;
    }
    m_tensorModel->clear();
    m_model.emplace(std::move(opened).value());
    m_tensorModel->setModelFile(*m_model);
    const ModelConfig& c = m_model->config();
    m_summary->setText(tr("<b>%1</b> — %2<br>dim %3, hidden %4, %5 layers, %6 heads (%7 kv), vocab %8, context %9; "
                          "%10 tensors, %11 parameters, %12 bytes")
                           .arg(path.toHtmlEscaped(), QString::fromStdString(m_model->format_detail()))
                           .arg(c.dim).arg(c.hidden_dim).arg(c.n_layers).arg(c.n_heads).arg(c.n_kv_heads)
                           .arg(c.vocab_size).arg(c.context_length)
                           .arg(m_model->tensors().size())
                           .arg(QLocale().toString(static_cast<qlonglong>(m_model->n_params())))
                           .arg(QLocale().toString(static_cast<qulonglong>(m_model->n_tensor_bytes()))));
    m_table->resizeColumnsToContents();
    setWindowTitle(tr("%1 — GKQ Workbench").arg(QFileInfo(path).fileName()));
    statusBar()->showMessage(tr("Opened %1").arg(path));
    m_lastError.clear();
    return true;
}

void MainWindow::showError(const QString& message) {
    m_lastError = message;
    statusBar()->showMessage(message);
    if (QGuiApplication::platformName() != QLatin1String("offscreen"))
        QMessageBox::warning(this, tr("GKQ Workbench"), message);
}

}  // namespace gkq::ui
