#include "widgets/main_window.h"

#include "gkq/model_file.h"
#include "gkq/tokenizer.h"
#include "jobs/job_runner.h"
#include "models/display_format.h"
#include "models/layer_role_model.h"
#include "models/model_tree_model.h"
#include "models/rknot_tree_model.h"
#include "models/tensor_table_model.h"
#include "widgets/compare_panel.h"
#include "widgets/help_content.h"
#include "widgets/manual_window.h"
#include "widgets/model_browser.h"
#include "widgets/quantize_panel.h"
#include "widgets/reconstruct_panel.h"
#include "widgets/result_table.h"
#include "widgets/rknot_editor.h"
#include "widgets/saturation_panel.h"
#include "widgets/server_panel.h"
#include "widgets/spectrum_panel.h"

#include <QAbstractButton>
#include <QApplication>
#include <QCloseEvent>
#include <QDir>
#include <QDockWidget>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHeaderView>
#include <QKeySequence>
#include <QLabel>
#include <QLocale>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSortFilterProxyModel>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QToolButton>
#include <QVBoxLayout>

namespace gkq::ui {

namespace {
constexpr int kMaxRecentFiles = 8;
constexpr int kCentralMinWidth = 420;  // px: on a small screen the views give way before the model browser does
const QString kLoadKey = QStringLiteral("load");

// "tokenizer spm, 32000 tokens, bos 1, eos 2, eot none, generation ends at 2", as gkq inspect says it (EOM and the
// fill-in-the-middle ids where there are some); why there is none otherwise.
QString tokenizerLine(const TokenizerSummary& t) {
    if (t.family.empty()) return QObject::tr("tokenizer none: %1").arg(QString::fromStdString(t.error).toHtmlEscaped());
    auto id = [](int32_t v) { return v >= 0 ? QString::number(v) : QObject::tr("none"); };
    QString line = QObject::tr("tokenizer <b>%1</b>%2, %3 tokens, bos %4, eos %5, eot %6")
                       .arg(QString::fromStdString(t.family),
                            t.pre.empty() ? QString() : QStringLiteral(" (%1)").arg(QString::fromStdString(t.pre)),
                            formatCount(static_cast<qint64>(t.size)), id(t.bos), id(t.eos), id(t.special.eot));
    if (t.special.eom >= 0) line += QObject::tr(", eom %1").arg(t.special.eom);
    QString fim;
    for (const auto& [name, v] : {std::pair{"pre", t.special.fim_pre},
                                  {"suf", t.special.fim_suf},
                                  {"mid", t.special.fim_mid},
                                  {"pad", t.special.fim_pad},
                                  {"rep", t.special.fim_rep},
                                  {"sep", t.special.fim_sep}})
        if (v >= 0) fim += QStringLiteral(" %1 %2").arg(QLatin1String(name)).arg(v);
    if (!fim.isEmpty()) line += QObject::tr(", fim%1").arg(fim);
    QStringList ends;
    for (const int32_t e : t.eog) ends << QString::number(e);
    return line + QObject::tr(", generation ends at %1")
                      .arg(ends.isEmpty() ? QObject::tr("BOS only") : ends.join(QLatin1Char(' ')));
}

QString noModelSummary() {
    return QObject::tr("No model open. Use File > Open (Ctrl+O), or drop a model file here.");
}
}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
    removeStaleScratch();  // what a killed or crashed workbench left in $TMPDIR
    setWindowTitle(tr("GKQ Workbench"));
    setObjectName(QStringLiteral("gkqMainWindow"));
    setAcceptDrops(true);
    // A file dropped anywhere in the window opens, also on widgets that take drops themselves (a QChartView is a
    // QGraphicsView, which accepts and swallows them): the application filter sees the drag before they do.
    qApp->installEventFilter(this);
    m_runner = new JobRunner(this);

    // Overview: configuration summary and the flat tensor table.
    m_tensorModel = new TensorTableModel(this);
    auto* overview = new QWidget(this);
    auto* overviewLayout = new QVBoxLayout(overview);
    m_summary = new QLabel(noModelSummary(), overview);
    m_summary->setObjectName(QStringLiteral("overviewSummary"));
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_summary->setWordWrap(true);
    auto* tensorTable = new ResultTable(overview);
    tensorTable->setSourceModel(m_tensorModel, Qt::UserRole);  // raw numbers for the numeric columns
    tensorTable->setTotals([](const QAbstractItemModel& rows) {
        QStringList cells(TensorTableModel::ColumnCount);
        cells[TensorTableModel::Name] = totalsLabel(rows.rowCount());
        cells[TensorTableModel::Params] =
            formatCount(static_cast<qint64>(columnSum(rows, TensorTableModel::Params, Qt::UserRole)));
        cells[TensorTableModel::Bytes] =
            formatCount(static_cast<quint64>(columnSum(rows, TensorTableModel::Bytes, Qt::UserRole)));
        return cells;
    });
    m_tableProxy = tensorTable->proxy();
    m_table = tensorTable->view();
    m_table->horizontalHeader()->setStretchLastSection(true);
    overviewLayout->addWidget(m_summary);
    overviewLayout->addWidget(tensorTable, 1);

    m_spectrum = new SpectrumPanel(m_runner, this);
    m_quantize = new QuantizePanel(m_runner, this);
    m_tabs = new QTabWidget(this);
    m_tabs->addTab(overview, tr("Overview"));
    m_tabs->addTab(m_spectrum, tr("Spectrum"));
    m_tabs->addTab(m_quantize, tr("Quantize"));
    m_compare = new ComparePanel(m_runner, this);
    m_tabs->addTab(m_compare, tr("Compare"));
    m_saturation = new SaturationPanel(m_runner, this);
    m_tabs->addTab(m_saturation, tr("Saturation"));
    m_tuning = new RknotEditor(m_runner, m_quantize, this);
    m_tabs->addTab(m_tuning, tr("Tuning"));
    connect(m_tuning, &RknotEditor::titleChanged, this,
            [this](const QString& title) { m_tabs->setTabText(m_tabs->indexOf(m_tuning), title); });
    connect(m_tuning, &RknotEditor::requantizeStarted, this, [this] { m_tabs->setCurrentWidget(m_quantize); });
    connect(m_tuning, &RknotEditor::errorOccurred, this, [this](const QString& m) { statusBar()->showMessage(m); });
    // An rknot made with the source model measured each record's error: the heat map of an open knot shows it.
    connect(m_tuning, &RknotEditor::loaded, this, &MainWindow::showRknotErrors);
    m_reconstruct = new ReconstructPanel(m_runner, this);
    m_tabs->addTab(m_reconstruct, tr("Reconstruct"));
    m_serve = new ServerPanel(this);
    m_tabs->addTab(m_serve, tr("Serve"));
    // The last knot the Quantize panel wrote is what Reconstruct and Serve work on (each can open another).
    connect(m_quantize, &QuantizePanel::quantized, this, [this] {
        m_reconstruct->setKnotPath(m_quantize->lastKnotPath());
        if (m_serve->isRunning()) return;
        m_serve->setKnotPath(m_quantize->lastKnotPath());
        // A model whose vocabulary is a llama2.c tokenizer file beside it (the demo) leaves the knot without one.
        const std::vector<std::string> tokenizers = tokenizers_beside(m_modelPath.toStdString());
        if (tokenizers.size() == 1) m_serve->setTokenizerPath(QString::fromStdString(tokenizers.front()));
    });
    m_tabs->setMinimumWidth(kCentralMinWidth);
    // Every tab stays selectable; a view that lacks what it works on says what is missing above it.
    m_viewNotice = new QLabel(this);
    m_viewNotice->setObjectName(QStringLiteral("viewNotice"));
    m_viewNotice->setWordWrap(true);
    m_viewNotice->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_viewNotice->setFrameShape(QFrame::StyledPanel);
    m_viewNotice->setMargin(8);
    m_viewNotice->setAutoFillBackground(true);
    m_viewNotice->setBackgroundRole(QPalette::ToolTipBase);
    m_viewNotice->setForegroundRole(QPalette::ToolTipText);
    m_viewNotice->hide();
    auto* central = new QWidget(this);
    auto* centralLayout = new QVBoxLayout(central);
    centralLayout->setContentsMargins(0, 0, 0, 0);
    centralLayout->addWidget(m_viewNotice);
    centralLayout->addWidget(m_tabs, 1);
    setCentralWidget(central);
    connect(m_tabs, &QTabWidget::currentChanged, this, &MainWindow::refreshViewNotice);
    connect(m_quantize, &QuantizePanel::quantized, this, &MainWindow::refreshViewNotice);
    connect(m_serve, &ServerPanel::stopped, this, &MainWindow::refreshViewNotice);
    // An exported knot or model is one to open again: Open Recent lists it.
    connect(m_quantize, &QuantizePanel::exported, this, [this](const QString& path) {
        statusBar()->showMessage(tr("Wrote %1").arg(path));
        addRecentFile(path);
    });

    m_browser = new ModelBrowser(this);
    auto* dock = new QDockWidget(tr("Model browser"), this);
    dock->setObjectName(QStringLiteral("modelBrowserDock"));
    dock->setWidget(m_browser);
    addDockWidget(Qt::LeftDockWidgetArea, dock);
    resizeDocks({dock}, {540}, Qt::Horizontal);
    connect(m_browser, &ModelBrowser::tensorSelected, m_spectrum, &SpectrumPanel::showTensor);
    connect(m_browser, &ModelBrowser::tensorSelected, this, &MainWindow::showTensorInOverview);
    // A heat map cell or result row picked in Quantize selects that tensor in the browser (and so in the views).
    connect(m_quantize, &QuantizePanel::tensorSelected, m_browser, &ModelBrowser::selectTensor);

    // Status bar: the running job, its progress, Cancel.
    m_jobLabel = new QLabel(this);
    m_jobProgress = new QProgressBar(this);
    m_jobProgress->setRange(0, 1000);
    m_jobProgress->setMaximumWidth(200);
    m_jobProgress->hide();
    m_jobCancel = new QToolButton(this);
    m_jobCancel->setText(tr("Cancel"));
    m_jobCancel->hide();
    statusBar()->addPermanentWidget(m_jobLabel);
    statusBar()->addPermanentWidget(m_jobProgress);
    statusBar()->addPermanentWidget(m_jobCancel);
    connect(m_jobCancel, &QToolButton::clicked, m_runner, &JobRunner::cancelAll);
    connect(m_runner, &JobRunner::started, this, [this](quint64 id, const QString& label) {
        m_jobLabels.insert(id, label);
        m_jobLabel->setText(label);
        m_jobProgress->setValue(0);
        m_jobProgress->show();
        m_jobCancel->show();
    });
    connect(m_runner, &JobRunner::progressChanged, this, [this](quint64, double fraction, const QString& what) {
        m_jobProgress->setValue(static_cast<int>(fraction * 1000.0));
        m_jobProgress->setToolTip(what);
    });
    // Once the last job has ended the label says how the last one ended ("Exporting knot: done"), never a step.
    const auto ended = [this](quint64 id, const QString& how) {
        const QString label = m_jobLabels.take(id);
        if (!how.isEmpty()) m_lastJobEnd = tr("%1: %2").arg(label, how);
    };
    connect(m_runner, &JobRunner::finished, this, [ended](quint64 id) { ended(id, tr("done")); });
    connect(m_runner, &JobRunner::staleDropped, this, [ended](quint64 id) { ended(id, QString()); });  // replaced
    connect(m_runner, &JobRunner::idle, this, [this] {
        m_jobLabel->setText(m_lastJobEnd);
        m_jobProgress->hide();
        m_jobCancel->hide();
    });
    connect(m_runner, &JobRunner::failed, this, [this, ended](quint64 id, const QString& message) {
        ended(id, tr("failed"));
        showError(message);
        if (id == m_loadJob) emit loadFailed(message);
    });
    connect(m_runner, &JobRunner::cancelled, this, [this, ended](quint64 id) {
        ended(id, tr("cancelled"));
        statusBar()->showMessage(tr("Cancelled"), 5000);
    });

    buildMenus();
    QSettings settings;
    if (!restoreGeometry(settings.value(QStringLiteral("mainWindow/geometry")).toByteArray())) resize(1280, 800);
    // The browser's minimum width holds in a restored layout too: a state saved by an older build with a collapsed
    // dock comes back at least that wide.
    restoreState(settings.value(QStringLiteral("mainWindow/state")).toByteArray());
    if (dock->width() < m_browser->minimumUsableWidth())
        resizeDocks({dock}, {m_browser->minimumUsableWidth()}, Qt::Horizontal);
    m_tabs->setCurrentIndex(settings.value(QStringLiteral("mainWindow/tab"), OverviewTab).toInt());
    refreshViewNotice();
    statusBar()->showMessage(tr("Ready"));
}

MainWindow::~MainWindow() {
    saveLayout();
    m_runner->waitForAll();
}

QString MainWindow::demoModelPath() {
    // An installed binary (bin/gkq-workbench) uses the copy installed beside it in share/gkq/demo, first: a build
    // tree has no such folder and falls through to the source tree's copy.
    const QString installed =
        QDir::cleanPath(QCoreApplication::applicationDirPath() + QStringLiteral("/../share/gkq/demo"));
    if (QFileInfo::exists(installed + QStringLiteral("/model.safetensors"))) return installed;
#ifdef GKQ_DEMO_MODEL_DIR
    const QString dir = QStringLiteral(GKQ_DEMO_MODEL_DIR);
    if (QFileInfo::exists(dir + QStringLiteral("/model.safetensors"))) return dir;
#endif
    return {};
}

void MainWindow::buildMenus() {
    QMenu* file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&Open..."), QKeySequence::Open, this, &MainWindow::openDialog);
    m_recentMenu = file->addMenu(tr("Open &Recent"));
    if (!demoModelPath().isEmpty())
        file->addAction(tr("Open &Demo Model"), this, [this] { openModel(demoModelPath()); });
    file->addSeparator();
    QMenu* exports = file->addMenu(tr("&Export"));
    exports->addAction(tr("&Knot..."), QKeySequence(Qt::CTRL | Qt::Key_E), this, [this] { exportDialog(false); })
        ->setStatusTip(tr("Write the Quantize view's last knot"));
    exports->addAction(tr("&Reconstructed model..."), this, [this] { exportDialog(true); })
        ->setStatusTip(tr("Reconstruct the Quantize view's last knot to safetensors, GGUF or a llama2.c checkpoint"));
    file->addAction(tr("&Close"), QKeySequence::Close, this, &MainWindow::closeModel);
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
    rebuildRecentMenu();

    QMenu* analysis = menuBar()->addMenu(tr("&Model"));
    analysis->addAction(tr("&Analyze spectra"), this, [this] {
        m_tabs->setCurrentWidget(m_spectrum);
        m_spectrum->analyze();
    });
    analysis->addAction(tr("&Quantize"), QKeySequence(Qt::CTRL | Qt::Key_R), this, [this] {
        m_tabs->setCurrentWidget(m_quantize);
        m_quantize->startQuantize();
    });
    analysis->addAction(tr("&Cancel running jobs"), QKeySequence(Qt::Key_Escape), m_runner, &JobRunner::cancelAll);

    QMenu* view = menuBar()->addMenu(tr("&View"));
    for (QDockWidget* dock : findChildren<QDockWidget*>()) view->addAction(dock->toggleViewAction());
    // Ctrl+1 .. Ctrl+8 show the tabs in their order.
    const QList<std::pair<QString, QWidget*>> views = {{tr("&Overview"), m_tabs->widget(OverviewTab)},
                                                       {tr("&Spectrum"), m_spectrum},
                                                       {tr("&Quantize"), m_quantize},
                                                       {tr("&Compare"), m_compare},
                                                       {tr("S&aturation"), m_saturation},
                                                       {tr("&Tuning"), m_tuning},
                                                       {tr("&Reconstruct"), m_reconstruct},
                                                       {tr("Ser&ve"), m_serve}};
    for (int i = 0; i < views.size(); ++i) {
        QWidget* page = views[i].second;
        view->addAction(views[i].first, QKeySequence(Qt::CTRL | static_cast<Qt::Key>(Qt::Key_1 + i)), this,
                        [this, page] { m_tabs->setCurrentWidget(page); });
    }

    QMenu* help = menuBar()->addMenu(tr("&Help"));
    help->addAction(tr("&Help on this view"), QKeySequence::HelpContents, this, [this] {
        showHelp(m_tabs->tabText(m_tabs->currentIndex()), viewHelpText(m_tabs->currentIndex()));
    });
    help->addAction(tr("&Manual"), this, [this] {
        const QString manual = manualPath();
        if (manual.isEmpty())
            return showError(tr("The manual (README.md and docs/) is not installed beside this program"));
        m_lastHelp = manual;
        if (!m_manual) m_manual = new ManualWindow(this);
        if (!m_manual->openPage(manual)) return showError(tr("Cannot read the manual %1").arg(manual));
        m_manual->show();
        m_manual->raise();
    });
    help->addAction(tr("&Keyboard shortcuts"), this,
                    [this] { showHelp(tr("Keyboard shortcuts"), shortcutsText(this)); });
    help->addSeparator();
    help->addAction(tr("&About GKQ Workbench"), this, [this] { showHelp(tr("About GKQ Workbench"), aboutText()); });
}

void MainWindow::showHelp(const QString& title, const QString& text) {
    m_lastHelp = text;
    if (QGuiApplication::platformName() == QLatin1String("offscreen")) return;
    auto* box = new QMessageBox(QMessageBox::Information, title, text, QMessageBox::Ok, this);
    box->setTextFormat(Qt::RichText);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->setModal(false);
    box->open();
}

void MainWindow::showRknotErrors(const QString& path) {
    if (!m_knot || !m_tuning->treeModel()->hasRknot()) return;
    if (!check_rknot_model(m_tuning->treeModel()->rknot(), *m_model, path.toStdString())) return;  // another model's
    std::vector<std::pair<QString, double>> errors;
    for (const RknotLayer& l : m_tuning->treeModel()->rknot().layers)
        if (l.rel_error) errors.emplace_back(QString::fromStdString(l.tensor), *l.rel_error);
    m_quantize->layerRoleModel()->setMeasuredErrors(errors, tr("the rknot %1").arg(QFileInfo(path).fileName()));
}

void MainWindow::showTensorInOverview(const QString& name) {
    for (int r = 0; r < m_tableProxy->rowCount(); ++r) {
        if (m_tableProxy->index(r, TensorTableModel::Name).data(Qt::UserRole).toString() != name) continue;
        m_table->selectRow(r);
        m_table->scrollTo(m_table->model()->index(r, TensorTableModel::Name));
        return;
    }
}

void MainWindow::openDialog() {
    QSettings settings;
    const QString path = QFileDialog::getOpenFileName(
        this, tr("Open model"), settings.value(QStringLiteral("lastDir")).toString(),
        tr("Models and knots (*.safetensors *.gguf *.bin *.json *.knot *.knot.gz);;All files (*)"));
    if (path.isEmpty()) return;
    settings.setValue(QStringLiteral("lastDir"), QFileInfo(path).absolutePath());
    openModel(path);
}

QStringList MainWindow::switchLosses() const {
    QStringList out;
    if (!m_model) return out;
    if (m_serve->isRunning())
        out << tr("The server at %1 stops (it serves %2, a knot of the open model).")
                   .arg(m_serve->url(), m_serve->knotPath());
    if (m_tuning->isModified())
        out << tr("The tuning %1 has unsaved edits.")
                   .arg(m_tuning->filePath().isEmpty() ? tr("(a new rknot)") : m_tuning->filePath());
    if (m_compare->isRunning())
        out << tr("The running Compare stops.");
    else if (const int n = m_compare->resultModel()->rowCount(); n > 0)
        out << (n == 1 ? tr("Compare's results (1 preset measured on the open model) are cleared.")
                       : tr("Compare's results (%1 presets measured on the open model) are cleared.").arg(n));
    return out;
}

void MainWindow::exportDialog(bool reconstructed) {
    const QString why = m_quantize->exportUnavailableReason();
    if (!why.isEmpty()) {
        m_tabs->setCurrentWidget(m_quantize);
        statusBar()->showMessage(why);
        return;
    }
    reconstructed ? m_quantize->exportReconstructedDialog() : m_quantize->exportKnotDialog();
}

quint64 MainWindow::openModel(const QString& path) {
    if (switchLosses().isEmpty()) return loadModel(path, Tuning::Keep);
    confirmLeaving(tr("Open %1 instead of %2?").arg(QFileInfo(path).fileName(), QFileInfo(m_modelPath).fileName()),
                   tr("open"), QStringLiteral("open"), tr("Opening %1: answer the question first").arg(path),
                   [this, path](Tuning tuning) { loadModel(path, tuning); });
    return 0;
}

void MainWindow::closeModel() {
    if (!m_model) {
        statusBar()->showMessage(tr("No model open"));
        return;
    }
    if (switchLosses().isEmpty()) return unloadModel(Tuning::Keep);
    confirmLeaving(tr("Close %1?").arg(QFileInfo(m_modelPath).fileName()), tr("close"), QStringLiteral("close"),
                   tr("Closing %1: answer the question first").arg(m_modelPath),
                   [this](Tuning tuning) { unloadModel(tuning); });
}

void MainWindow::confirmLeaving(const QString& question, const QString& verb, const QString& acceptName,
                                const QString& waiting, std::function<void(Tuning)> proceed) {
    const QStringList losses = switchLosses();
    if (m_switchPrompt) m_switchPrompt->close();  // a newer request replaces the one not answered yet
    const bool tuning = m_tuning->isModified();
    auto* box = new QMessageBox(QMessageBox::Question, tr("Leave %1").arg(QFileInfo(m_modelPath).fileName()), question,
                                QMessageBox::NoButton, this);
    box->setObjectName(QStringLiteral("switchModelPrompt"));
    box->setInformativeText(
        losses.join(QLatin1Char('\n')) +
        (tuning ? tr("\nKept, the tuning stays open in the Tuning view (its file names the tensors it tunes); "
                     "discarded, it goes back to its file.")
                : QString()));
    if (tuning) {
        box->addButton(tr("Keep tuning and %1").arg(verb), QMessageBox::AcceptRole)
            ->setObjectName(QStringLiteral("keep"));
        box->addButton(tr("Discard tuning and %1").arg(verb), QMessageBox::DestructiveRole)
            ->setObjectName(QStringLiteral("discard"));
    } else {
        QString label = verb;
        label[0] = label[0].toUpper();
        box->addButton(label, QMessageBox::AcceptRole)->setObjectName(acceptName);
    }
    box->addButton(QMessageBox::Cancel)->setObjectName(QStringLiteral("cancel"));
    box->setAttribute(Qt::WA_DeleteOnClose);
    m_switchPrompt = box;
    connect(box, &QMessageBox::finished, this, [this, box, acceptName, proceed = std::move(proceed)](int) {
        if (m_switchPrompt == box) m_switchPrompt = nullptr;
        const QAbstractButton* clicked = box->clickedButton();
        const QString name = clicked ? clicked->objectName() : QString();
        if (name == QLatin1String("keep") || name == acceptName)
            proceed(Tuning::Keep);
        else if (name == QLatin1String("discard"))
            proceed(Tuning::Discard);
        else
            statusBar()->showMessage(tr("Kept %1 open").arg(m_modelPath));
    });
    statusBar()->showMessage(waiting);
    box->open();  // window-modal, no nested event loop: jobs keep reporting
}

quint64 MainWindow::loadModel(const QString& path, Tuning tuning) {
    const std::string p = path.toStdString();
    m_loadTuning = tuning;
    statusBar()->showMessage(tr("Opening %1...").arg(path));
    // A knot opens as itself: the views read its records (nothing is decoded into a file).
    m_loadJob = m_runner->run<OpenedModel>(
        kLoadKey, tr("Opening %1").arg(QFileInfo(path).fileName()),
        [p](const ProgressFn&) { return openModelOrKnot(p); },
        [this, path](OpenedModel& opened) {
            m_knot = std::move(opened.knot);
            m_tokenizer = std::move(opened.tokenizer);
            onModelOpened(path, std::move(opened.model));
        });
    return m_loadJob;
}

void MainWindow::releaseOpenModel(const QString& previous) {
    // Its server stops (it would serve the old knot under the new title), its unsaved tuning is kept or discarded
    // as the prompt was answered.
    if (m_serve->isRunning()) m_serve->stop();
    m_serve->setKnotPath(QString());
    if (m_tuning->isModified()) {
        if (m_loadTuning == Tuning::Discard)
            m_tuning->discardEdits();
        else
            m_tuning->noteCarriedOver(previous);
    }
    m_loadTuning = Tuning::Keep;
}

void MainWindow::unloadModel(Tuning tuning) {
    m_runner->cancelKey(kLoadKey);  // a load still on its way would open a model after all
    m_loadTuning = tuning;
    const QString closed = m_modelPath;
    releaseOpenModel(closed);
    m_model.reset();
    m_knot.reset();
    m_tokenizer = {};
    m_modelPath.clear();
    m_tensorModel->clear();
    m_browser->treeModel()->clear();
    m_spectrum->setModel(nullptr);
    m_quantize->setModel(nullptr);
    m_compare->setModel(nullptr);
    m_tuning->setModel(nullptr, QString());
    m_saturation->setModel(nullptr);
    for (QWidget* measures : {static_cast<QWidget*>(m_quantize), static_cast<QWidget*>(m_compare)})
        m_tabs->setTabToolTip(m_tabs->indexOf(measures), QString());
    m_summary->setText(noModelSummary());
    setWindowTitle(tr("GKQ Workbench"));
    refreshViewNotice();
    statusBar()->showMessage(tr("Closed %1").arg(closed));
}

void MainWindow::onModelOpened(const QString& path, std::shared_ptr<const Weights> model) {
    // What belonged to the model that was open goes.
    releaseOpenModel(m_modelPath);
    m_model = std::move(model);
    m_modelPath = path;
    m_tensorModel->setWeights(*m_model);
    m_browser->treeModel()->setWeights(*m_model);
    m_spectrum->setModel(m_model);
    m_quantize->setModel(m_model);
    m_compare->setModel(m_model);
    m_tuning->setModel(m_model, m_knot ? path : QString());
    m_saturation->setModel(m_model);
    if (m_knot) {  // an opened knot is also what Reconstruct and Serve work on
        m_reconstruct->setKnotPath(path);
        m_serve->setKnotPath(path);
    }
    // A knot holds no original: Quantize re-encodes the knot, Evaluate and Compare measure against it; they say so.
    for (QWidget* measures : {static_cast<QWidget*>(m_quantize), static_cast<QWidget*>(m_compare)})
        m_tabs->setTabToolTip(m_tabs->indexOf(measures), knotNotice());
    const ModelConfig& c = m_model->config();
    const auto* file = dynamic_cast<const ModelFile*>(m_model.get());
    const QString detail = QString::fromStdString(file ? file->format_detail() : std::string(m_model->kind()));
    uint64_t tensorBytes = file ? file->n_tensor_bytes() : 0;
    for (size_t i = 0; !file && i < m_model->n_tensors(); ++i) tensorBytes += m_model->stored_bytes(i);
    m_summary->setText(tr("<b>%1</b> — %2<br>dim %3, hidden %4, %5 layers, %6 heads (%7 kv), vocab %8, context %9; "
                          "%10 tensors, %11 parameters, %12 bytes<br>%13")
                           .arg(path.toHtmlEscaped(), detail)
                           .arg(c.dim)
                           .arg(c.hidden_dim)
                           .arg(c.n_layers)
                           .arg(c.n_heads)
                           .arg(c.n_kv_heads)
                           .arg(c.vocab_size)
                           .arg(c.context_length)
                           .arg(m_model->n_tensors())
                           .arg(formatCount(static_cast<qint64>(m_model->n_params())))
                           .arg(formatCount(static_cast<quint64>(tensorBytes)))
                           .arg(tokenizerLine(m_tokenizer)));
    if (m_knot) {
        const KnotSummary& k = *m_knot;
        QStringList methods;
        for (const auto& [name, n] : k.methods)
            methods << QStringLiteral("%1 %2").arg(QString::fromStdString(name)).arg(n);
        m_summary->setText(
            tr("<b>%1</b> — knot%2, written by %3; command <tt>%4</tt>%5<br>%6 records (%7), %8 parameters, %9 bytes "
               "= %10 bits per weight (whole file)<br>Read from its records: each view decodes what it shows.<br>"
               "dim %11, hidden %12, %13 layers, %14 heads (%15 kv), vocab %16, context %17<br>%18<br><b>%19</b>")
                .arg(path.toHtmlEscaped(), k.gzipped ? tr(" (gzipped)") : QString(),
                     QString::fromStdString(k.producer).toHtmlEscaped(),
                     QString::fromStdString(k.command).toHtmlEscaped(),
                     k.preset.empty() ? QString()
                                      : tr(", preset %1").arg(QString::fromStdString(k.preset).toHtmlEscaped()))
                .arg(k.n_records)
                .arg(methods.join(QStringLiteral(", ")))
                .arg(formatCount(static_cast<qint64>(k.n_params)))
                .arg(formatCount(static_cast<quint64>(k.file_bytes)))
                .arg(formatNumber(k.bitsPerWeight()))
                .arg(c.dim)
                .arg(c.hidden_dim)
                .arg(c.n_layers)
                .arg(c.n_heads)
                .arg(c.n_kv_heads)
                .arg(c.vocab_size)
                .arg(c.context_length)
                .arg(tokenizerLine(m_tokenizer), knotNotice().toHtmlEscaped()));
    }
    m_table->resizeColumnsToContents();
    setWindowTitle(m_knot ? tr("%1 (knot, %2 bpw) — GKQ Workbench")
                                .arg(QFileInfo(path).fileName())
                                .arg(m_knot->bitsPerWeight(), 0, 'f', 3)
                          : tr("%1 — GKQ Workbench").arg(QFileInfo(path).fileName()));
    statusBar()->showMessage(tr("Opened %1").arg(path));
    refreshViewNotice();
    m_lastError.clear();
    addRecentFile(path);
    m_spectrum->analyze();
    emit modelLoaded(path);
}

QString MainWindow::noticeFor(int tab) const {
    const QString noModel =
        tr("No model open: this view works on the open model. Open one with File > Open (Ctrl+O)%1, or drop a model "
           "file on the window.")
            .arg(demoModelPath().isEmpty() ? QString() : tr(" or File > Open Demo Model"));
    const QString noKnot =
        tr("No knot yet: this view works on a knot. Quantize the open model in the Quantize view (Ctrl+R), or open a "
           "knot with File > Open.");
    switch (tab) {
        case SpectrumTab:
        case QuantizeTab:
        case CompareTab: return m_model ? QString() : noModel;
        case SaturationTab:
            return m_model ? QString() : noModel + tr(" A masks file (gkq profile -o) can still be loaded here.");
        case TuningTab:
            return m_model ? QString()
                           : noModel + tr(" An rknot can still be opened and edited; making one or re-quantizing "
                                          "with it needs the model.");
        case ReconstructTab: return m_reconstruct->knotPath().isEmpty() ? noKnot : QString();
        case ServeTab:
#ifndef GKQ_WITH_SERVER
            return tr("This build has no HTTP server (it was configured with GKQ_WITH_SERVER=OFF).");
#else
            return m_serve->knotPath().isEmpty() && !m_serve->isRunning() ? noKnot : QString();
#endif
        default: return {};
    }
}

void MainWindow::refreshViewNotice() {
    const QString notice = noticeFor(m_tabs->currentIndex());
    m_viewNotice->setText(notice);
    m_viewNotice->setVisible(!notice.isEmpty());
}

QString MainWindow::viewNotice() const {
    return m_viewNotice->isHidden() ? QString() : m_viewNotice->text();
}

QString MainWindow::jobStatusText() const {
    return m_jobLabel->text();
}

QString MainWindow::knotNotice() const {
    if (!m_knot) return {};
    return tr("This is a knot: Quantize encodes its decoded records again (a second rounding on top of the first), and "
              "Evaluate and Compare measure against this knot, not the original it was made from, which a knot does "
              "not hold. To compare this knot with its original: gkq eval --base ORIGINAL --candidate %1 --text FILE.")
        .arg(QString::fromStdString(m_knot->path));
}

QStringList MainWindow::recentFiles() const {
    return QSettings().value(QStringLiteral("recentFiles")).toStringList();
}

void MainWindow::addRecentFile(const QString& path) {
    const QString abs = QFileInfo(path).absoluteFilePath();
    QStringList files = recentFiles();
    files.removeAll(abs);
    files.prepend(abs);
    while (files.size() > kMaxRecentFiles) files.removeLast();
    QSettings().setValue(QStringLiteral("recentFiles"), files);
    rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
    m_recentMenu->clear();
    const QStringList files = recentFiles();
    for (const QString& f : files) m_recentMenu->addAction(f, this, [this, f] { openModel(f); });
    m_recentMenu->setEnabled(!files.isEmpty());
}

void MainWindow::showError(const QString& message) {
    m_lastError = message;
    statusBar()->showMessage(message);
    if (QGuiApplication::platformName() == QLatin1String("offscreen")) return;
    // Window-modal but not blocking: no nested event loop, jobs keep reporting while the message is up.
    auto* box = new QMessageBox(QMessageBox::Warning, tr("GKQ Workbench"), message, QMessageBox::Ok, this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();
}

void MainWindow::saveLayout() {
    QSettings settings;
    settings.setValue(QStringLiteral("mainWindow/geometry"), saveGeometry());
    settings.setValue(QStringLiteral("mainWindow/state"), saveState());
    settings.setValue(QStringLiteral("mainWindow/tab"), m_tabs->currentIndex());
}

void MainWindow::closeEvent(QCloseEvent* event) {
    // Unsaved tuning edits: ask first (a non-blocking box; offscreen the close is refused and the Tuning view says
    // why).
    if (!m_tuning->confirmDiscard(tr("close the window"), [this] {
            m_tuning->discardEdits();
            close();
        })) {
        m_tabs->setCurrentWidget(m_tuning);
        statusBar()->showMessage(m_tuning->lastMessage());
        event->ignore();
        return;
    }
    saveLayout();
    m_runner->cancelAll();
    event->accept();
}

bool MainWindow::eventFilter(QObject* watched, QEvent* event) {
    const QEvent::Type type = event->type();
    if (type != QEvent::DragEnter && type != QEvent::DragMove && type != QEvent::Drop)
        return QMainWindow::eventFilter(watched, event);
    auto* widget = qobject_cast<QWidget*>(watched);
    if (widget == nullptr || widget->window() != this) return QMainWindow::eventFilter(watched, event);
    auto* drop = static_cast<QDropEvent*>(event);  // QDragEnterEvent and QDragMoveEvent are QDropEvents
    const auto urls = drop->mimeData()->urls();
    if (urls.isEmpty() || !urls.first().isLocalFile()) return QMainWindow::eventFilter(watched, event);
    drop->acceptProposedAction();
    if (type == QEvent::Drop) openModel(urls.first().toLocalFile());
    return true;
}

}  // namespace gkq::ui
