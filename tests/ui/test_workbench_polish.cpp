// The workbench's presentation, driven offscreen in the real widgets on the tiny test model (HF names): the model
// browser's short names at a 1024 px window (tooltip and Overview keep the stored name; the dock keeps a usable
// width, also after a restored layout), the first start on Overview; the result tables (sorting by raw values,
// filter, a totals row that stays last, Home / End, a norm's bits per weight marked as an outlier); the one number
// format; progress that ends in a final state after Export knot; the suggested export name; one Reconstruct row
// per unavailable backend; the Help menu (About from the binary's own facts, shortcuts, manual, F1 per view); a
// file dropped on a chart opens.
#include "charts/chart_style.h"
#include "charts/live_series_chart.h"
#include "charts/pareto_chart.h"
#include "charts/spectrum_chart.h"
#include "gkq/arch.h"
#include "gkq/kernels.h"
#include "gkq/libraries.h"
#include "gkq/model_writer.h"
#include "jobs/job_runner.h"
#include "models/backend_result_model.h"
#include "models/display_format.h"
#include "models/model_tree_model.h"
#include "models/quant_result_model.h"
#include "models/tensor_table_model.h"
#include "test_support.h"
#include "tiny_model.h"
#include "widgets/compare_panel.h"
#include "widgets/main_window.h"
#include "widgets/manual_window.h"
#include "widgets/model_browser.h"
#include "widgets/output_guard.h"
#include "widgets/quantize_panel.h"
#include "widgets/reconstruct_panel.h"
#include "widgets/result_table.h"

#include <QAction>
#include <QApplication>
#include <QChartView>
#include <QComboBox>
#include <QDockWidget>
#include <QHeaderView>
#include <QLineEdit>
#include <QLineSeries>
#include <QListWidget>
#include <QMenuBar>
#include <QMimeData>
#include <QProgressBar>
#include <QPushButton>
#include <QScatterSeries>
#include <QSettings>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTextBrowser>
#include <QTreeView>
#include <QValueAxis>
#include <QtTest>
#include <cstdio>
#include <limits>

using namespace gkq;
using ui::MainWindow;

namespace {
QAction* findAction(const QWidget& window, const QString& text) {
    for (QAction* a : window.findChildren<QAction*>())
        if (a->text().remove(QLatin1Char('&')) == text) return a;
    return nullptr;
}

ui::ResultTable* tableOf(const QWidget& parent, const QAbstractItemModel* source) {
    for (ui::ResultTable* t : parent.findChildren<ui::ResultTable*>())
        if (t->proxy()->sourceModel() == source) return t;
    return nullptr;
}
}  // namespace

class TestWorkbenchPolish : public QObject {
    Q_OBJECT
    test::TempDir m_dir;
    QString m_model;

    static bool open(MainWindow& w, const QString& path) {
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        w.openModel(path);
        return loaded.wait(60000);
    }

    static bool quantize(ui::QuantizePanel& panel, const QString& preset) {
        panel.setPreset(preset);
        QSignalSpy quantized(&panel, &ui::QuantizePanel::quantized);
        if (panel.startQuantize() != 0 && quantized.wait(120000)) return true;
        std::printf("quantize %s: %s\n", qPrintable(preset), qPrintable(panel.statusText()));
        return false;
    }

private slots:
    void initTestCase() {
        QCoreApplication::setOrganizationName(QStringLiteral("gkq-tests"));
        QCoreApplication::setApplicationName(QStringLiteral("test_workbench_polish"));
        QSettings().clear();
        const std::string path = m_dir.file("tiny.safetensors");
        auto m = test::make_tiny_model(test::tiny_config(true));
        QVERIFY(write_safetensors(path, m.config, m.tensors).is_ok());
        m_model = QString::fromStdString(path);
    }

    void numbersHaveOneFormat() {
        QCOMPARE(ui::formatCount(qint64{1234567}),
                 QStringLiteral("1,234,567").replace(QLatin1Char(','), ui::displayLocale().groupSeparator()));
        const QString point = ui::displayLocale().decimalPoint();
        QCOMPARE(ui::formatNumber(3.14159), QStringLiteral("3") + point + QStringLiteral("142"));
        QCOMPARE(ui::formatNumber(54.123), QStringLiteral("54") + point + QStringLiteral("12"));
        QCOMPARE(ui::formatNumber(0.00123456), QStringLiteral("0") + point + QStringLiteral("001235"));
        QCOMPARE(ui::formatNumber(9.99996), QStringLiteral("10") + point + QStringLiteral("00"));  // rounds up a digit
        QCOMPARE(ui::formatNumber(0.0), QStringLiteral("0"));
        QVERIFY(ui::formatNumber(1.5e-7).contains(QLatin1Char('e')));
        QVERIFY(ui::formatNumber(12345.6).contains(ui::displayLocale().groupSeparator()));
    }

    void shortNamesComeFromTheArchitectureTable() {
        const ArchSpec& llama = default_arch();
        QCOMPARE(ui::shortTensorName(llama, "model.layers.3.mlp.up_proj.weight"), QStringLiteral("blk.3.ffn_up"));
        QCOMPARE(ui::shortTensorName(llama, "blk.3.ffn_up.weight"), QStringLiteral("blk.3.ffn_up"));
        QCOMPARE(ui::shortTensorName(llama, "model.embed_tokens.weight"), QStringLiteral("token_embd"));
        QCOMPARE(ui::shortTensorName(llama, "token_embd.weight"), QStringLiteral("token_embd"));
        // Unknown under a block: the GGUF block prefix, the rest as stored.
        QCOMPARE(ui::shortTensorName(llama, "model.layers.7.self_attn.rotary_emb.inv_freq"),
                 QStringLiteral("blk.7.self_attn.rotary_emb.inv_freq"));
        QCOMPARE(ui::shortTensorName(llama, "something_else"), QStringLiteral("something_else"));
        // Phi-3's fused tensors, listed by part: the fused tensor's GGUF name and the part's role, from either format
        const ArchSpec& phi3 = *find_arch("phi3");
        QCOMPARE(ui::shortTensorName(phi3, "model.layers.3.self_attn.qkv_proj.weight[attn_k]"),
                 QStringLiteral("blk.3.attn_qkv[attn_k]"));
        QCOMPARE(ui::shortTensorName(phi3, "blk.0.ffn_up.weight[ffn_gate]"), QStringLiteral("blk.0.ffn_up[ffn_gate]"));
    }

    void browserShowsShortNamesAtA1024PixelWindow() {
        QSettings().clear();
        QByteArray state;
        {
            MainWindow w;
            QCOMPARE(w.tabs()->currentIndex(), int(MainWindow::OverviewTab));  // the first start
            w.resize(1024, 700);
            w.show();
            QVERIFY(QTest::qWaitForWindowExposed(&w));
            QVERIFY(open(w, m_model));

            ui::ModelBrowser* browser = w.browser();
            QTreeView* tree = browser->treeView();
            const QString stored = QStringLiteral("model.layers.1.mlp.up_proj.weight");
            const QModelIndex source = browser->treeModel()->indexOfTensor(stored);
            QVERIFY(source.isValid());
            QCOMPARE(source.data().toString(), QStringLiteral("blk.1.ffn_up"));
            QCOMPARE(source.data(Qt::ToolTipRole).toString(), stored);
            QCOMPARE(browser->treeModel()->indexOfTensor(QStringLiteral("model.embed_tokens.weight")).data().toString(),
                     QStringLiteral("token_embd"));

            // The dock keeps a usable width; the Name column shows every short name in full.
            auto* dock = w.findChild<QDockWidget*>(QStringLiteral("modelBrowserDock"));
            QVERIFY(dock);
            QVERIFY2(dock->width() >= browser->minimumUsableWidth(), qPrintable(QString::number(dock->width())));
            QVERIFY(w.tabs()->width() < w.width() - browser->minimumUsableWidth() + 1);
            const QModelIndex shown = browser->proxyModel()->mapFromSource(source);
            QVERIFY(tree->visualRect(shown).width() >= tree->fontMetrics().horizontalAdvance(shown.data().toString()));

            // Selecting it shows the stored name in the Overview table.
            QVERIFY(browser->selectTensor(stored));
            const QModelIndex current = w.tensorTable()->currentIndex();
            QVERIFY(current.isValid());
            QCOMPARE(current.siblingAtColumn(ui::TensorTableModel::Name).data().toString(), stored);

            // The user drags the dock narrower than usable: the layout holds it at its minimum.
            w.resizeDocks({dock}, {40}, Qt::Horizontal);
            QTRY_VERIFY(dock->width() >= browser->minimumUsableWidth());
            w.tabs()->setCurrentIndex(MainWindow::QuantizeTab);
            w.close();
            state = QSettings().value(QStringLiteral("mainWindow/state")).toByteArray();
        }
        QVERIFY(!state.isEmpty());
        MainWindow again;
        again.resize(1024, 700);
        again.show();
        QVERIFY(QTest::qWaitForWindowExposed(&again));
        auto* dock = again.findChild<QDockWidget*>(QStringLiteral("modelBrowserDock"));
        QVERIFY(dock->width() >= again.browser()->minimumUsableWidth());
        QCOMPARE(again.tabs()->currentIndex(), int(MainWindow::QuantizeTab));  // a later start restores the view
    }

    void tablesSortFilterTotalAndGoHomeAndEnd() {
        QSettings().clear();
        MainWindow w;
        w.resize(1280, 800);
        w.show();
        QVERIFY(open(w, m_model));
        ui::ResultTable* table = tableOf(w, w.tensorModel());
        QVERIFY(table);
        QTableView* view = table->view();
        const int n = w.tensorModel()->rowCount();
        QCOMPARE(view->model()->rowCount(), n + 1);  // the totals row
        QCOMPARE(table->totalsText(ui::TensorTableModel::Params),
                 ui::formatCount(static_cast<qint64>(w.model()->n_params())));

        // Sort by bytes, descending, by clicking the header twice: raw numbers, the totals row last.
        QHeaderView* header = view->horizontalHeader();
        const int x = header->sectionViewportPosition(ui::TensorTableModel::Bytes) + 5;
        QTest::mouseClick(header->viewport(), Qt::LeftButton, {}, QPoint(x, header->height() / 2));
        QTest::mouseClick(header->viewport(), Qt::LeftButton, {}, QPoint(x, header->height() / 2));
        QCOMPARE(table->proxy()->sortColumn(), int(ui::TensorTableModel::Bytes));
        QCOMPARE(table->proxy()->sortOrder(), Qt::DescendingOrder);
        for (int r = 1; r < n; ++r)
            QVERIFY(view->model()->index(r - 1, ui::TensorTableModel::Bytes).data(Qt::UserRole).toULongLong() >=
                    view->model()->index(r, ui::TensorTableModel::Bytes).data(Qt::UserRole).toULongLong());
        QVERIFY(view->model()->index(n, 0).data().toString().startsWith(QStringLiteral("Total")));

        // Filter: the totals follow the rows kept.
        QTest::keyClicks(table->filterEdit(), QStringLiteral("up_proj"));
        QCOMPARE(table->proxy()->rowCount(), 2);
        QCOMPARE(table->totalsText(ui::TensorTableModel::Name), QStringLiteral("Total (2 tensors)"));
        table->filterEdit()->clear();
        QCOMPARE(table->proxy()->rowCount(), n);

        // Home / End: the first and the last row.
        view->setFocus();
        view->setCurrentIndex(view->model()->index(3, 2));
        QTest::keyClick(view, Qt::Key_End);
        QCOMPARE(view->currentIndex().row(), n - 1);
        QCOMPARE(view->currentIndex().column(), 2);
        QTest::keyClick(view, Qt::Key_Home);
        QCOMPARE(view->currentIndex().row(), 0);

        // Quantize: the results table has totals from the measured bytes and a norm's bits per weight stands out.
        ui::QuantizePanel* q = w.quantizePanel();
        QVERIFY(quantize(*q, QStringLiteral("q8_0")));
        ui::ResultTable* results = tableOf(*q, q->resultModel());
        QVERIFY(results);
        const QuantizeReport& report = *q->lastReport();
        quint64 bytes = 0;
        int64_t elements = 0;
        for (const QuantizedTensor& t : report.tensors) {
            bytes += t.bytes_on_disk();
            elements += t.codec.n_elements();
        }
        QCOMPARE(results->totalsText(ui::QuantResultModel::Bytes), ui::formatCount(bytes));
        QCOMPARE(results->totalsText(ui::QuantResultModel::Bpw),
                 ui::formatNumber(8.0 * static_cast<double>(bytes) / static_cast<double>(elements)));
        int outliers = 0;
        for (int r = 0; r < q->resultModel()->rowCount(); ++r) {
            const QString name = q->resultModel()->index(r, 0).data().toString();
            const bool norm = name.contains(QStringLiteral("norm"));
            QCOMPARE(q->resultModel()->isOutlier(r), norm);  // q8_0 matrices are near 8.5 bpw, f32 norms above 32
            if (!norm) continue;
            ++outliers;
            const QModelIndex bpw = q->resultModel()->index(r, ui::QuantResultModel::Bpw);
            QCOMPARE(bpw.data(Qt::BackgroundRole).value<QBrush>().color(), ui::QuantResultModel::outlierColor());
            QVERIFY(bpw.data(Qt::ToolTipRole).toString().contains(QStringLiteral("twice")));
        }
        QCOMPARE(outliers, 2 * 2 + 1);  // attn_norm and ffn_norm of 2 layers, and the output norm

        // Group by layer (the combo above the table): one row per layer and one for the tensors in none, the same
        // totals, the totals label still counting tensors; a tensor selected elsewhere shows ungrouped again.
        const QString totalLabel = results->totalsText(ui::QuantResultModel::Name);
        q->groupCombo()->setCurrentIndex(q->groupCombo()->findText(QStringLiteral("Layer")));
        QCOMPARE(q->resultModel()->groupBy(), ui::QuantResultModel::GroupBy::Layer);
        QCOMPARE(results->proxy()->rowCount(), 3);
        QCOMPARE(results->totalsText(ui::QuantResultModel::Bytes), ui::formatCount(bytes));
        QCOMPARE(results->totalsText(ui::QuantResultModel::Name), totalLabel);
        QVERIFY(q->selectedTensor().isEmpty());
        QVERIFY(q->selectTensor(QStringLiteral("model.layers.1.mlp.down_proj.weight")));
        QCOMPARE(q->resultModel()->groupBy(), ui::QuantResultModel::GroupBy::Tensor);
        QCOMPARE(q->selectedTensor(), QStringLiteral("model.layers.1.mlp.down_proj.weight"));
    }

    void aFallbackIsHighlightedWithItsReason() {
        // FFN width 100: ffn_down's rows of 100 elements do not split into q8_0's blocks of 32, so the codec keeps
        // them in f16 and says why.
        test::TempDir dir;  // its own folder: the writer puts config.json beside the weights
        const std::string path = dir.file("odd.safetensors");
        ModelConfig config = test::tiny_config(true);
        config.hidden_dim = 100;
        auto m = test::make_tiny_model(config);
        QVERIFY(write_safetensors(path, m.config, m.tensors).is_ok());
        QSettings().clear();
        MainWindow w;
        QVERIFY(open(w, QString::fromStdString(path)));
        ui::QuantizePanel* q = w.quantizePanel();
        QVERIFY(quantize(*q, QStringLiteral("q8_0")));
        const ui::QuantResultModel* model = q->resultModel();
        int fallbacks = 0;
        for (int r = 0; r < model->rowCount(); ++r) {
            const bool down = model->index(r, 0).data().toString().contains(QStringLiteral("down_proj"));
            QCOMPARE(model->isFallback(r), down);
            if (!down) continue;
            ++fallbacks;
            const QModelIndex method = model->index(r, ui::QuantResultModel::Method);
            QCOMPARE(method.data().toString(), QStringLiteral("f16"));
            QCOMPARE(method.data(Qt::BackgroundRole).value<QBrush>().color(), ui::QuantResultModel::fallbackColor());
            QVERIFY2(method.data(Qt::ToolTipRole).toString().contains(QStringLiteral("row length 100")),
                     qPrintable(method.data(Qt::ToolTipRole).toString()));
        }
        QCOMPARE(fallbacks, 2);
    }

    void exportEndsInAFinalStateWithTheSuggestedName() {
        QSettings().clear();
        MainWindow w;
        QVERIFY(open(w, m_model));
        ui::QuantizePanel* q = w.quantizePanel();
        QVERIFY(quantize(*q, QStringLiteral("lowrank-q4")));
        const QString suggested = q->suggestedExportPath(QStringLiteral("knot"));
        QCOMPARE(suggested, QFileInfo(m_model).absolutePath() + QStringLiteral("/tiny-lowrank-q4.knot"));
        // Without a folder of its own (no input) the suggestion is a folder the user can write to.
        const QString elsewhere = ui::suggestedOutputPath(QString(), QStringLiteral("q8_0"), QStringLiteral("knot"));
        QVERIFY(QFileInfo(QFileInfo(elsewhere).absolutePath()).isWritable());
        QCOMPARE(QFileInfo(elsewhere).fileName(), QStringLiteral("model-q8_0.knot"));

        QSignalSpy exported(q, &ui::QuantizePanel::exported);
        QVERIFY(q->exportKnot(suggested) != 0);
        QVERIFY(exported.wait(60000));
        QCOMPARE(q->progressBar()->value(), q->progressBar()->maximum());
        QVERIFY2(!q->statusText().contains(QLatin1Char('%')), qPrintable(q->statusText()));
        QCOMPARE(q->statusText(), QStringLiteral("Exported %1").arg(suggested));
        QVERIFY(QFileInfo::exists(suggested));
    }

    // The activation-aware presets need a Gram file Compare cannot pass: listed, but disabled with the reason, never
    // checked by default or by setPresets (a Compare over every preset ran them and failed). The Quantize view takes
    // a Gram file: there they are selectable, and Quantize explains what they need (test_quantize_calibration).
    void presetsNeedingAGramFileAreDisabledWithTheirReason() {
        QSettings().clear();
        MainWindow w;
        QVERIFY(open(w, m_model));
        ui::ComparePanel* c = w.comparePanel();
        QVERIFY(!c->presets().contains(QStringLiteral("svd-llm")));
        QVERIFY(c->presets().contains(QStringLiteral("q4_0")));
        c->setPresets({QStringLiteral("svd-llm"), QStringLiteral("q4_0-lqer"), QStringLiteral("q8_0")});
        QCOMPARE(c->presets(), QStringList{QStringLiteral("q8_0")});
        auto* list = c->findChild<QListWidget*>();
        QVERIFY(list != nullptr);
        const auto items = list->findItems(QStringLiteral("svd-llm"), Qt::MatchExactly);
        QCOMPARE(items.size(), 1);
        QVERIFY(!(items.front()->flags() & Qt::ItemIsEnabled));
        QVERIFY2(items.front()->toolTip().contains(QStringLiteral("--gram")), qPrintable(items.front()->toolTip()));

        auto* combo = w.quantizePanel()->findChild<QComboBox*>();
        QVERIFY(combo != nullptr);
        const int row = combo->findText(QStringLiteral("q4_0-lqer"));
        QVERIFY(row >= 0);
        QVERIFY(!combo->itemData(row, Qt::UserRole - 1).isValid());  // selectable
        QVERIFY(combo->itemData(row, Qt::ToolTipRole).toString().contains(QStringLiteral("Gram")));
        w.quantizePanel()->setPreset(QStringLiteral("q4_0-lqer"));
        QVERIFY(!w.quantizePanel()->runButton()->isEnabled());
        QVERIFY2(w.quantizePanel()->runButton()->toolTip().contains(QStringLiteral("Activation Gram matrices")),
                 qPrintable(w.quantizePanel()->runButton()->toolTip()));
    }

    void reconstructHasOneRowPerUnavailableBackend() {
        QSettings().clear();
        MainWindow w;
        QVERIFY(open(w, m_model));
        ui::QuantizePanel* q = w.quantizePanel();
        QVERIFY(quantize(*q, QStringLiteral("lowrank-q4")));
        ui::ReconstructPanel* panel = w.reconstructPanel();
        QVERIFY(panel->setKnotPath(q->lastKnotPath()));
        const QStringList picks = {QStringLiteral("model.layers.0.mlp.up_proj.weight"),
                                   QStringLiteral("model.layers.1.self_attn.q_proj.weight"),
                                   QStringLiteral("model.layers.1.mlp.down_proj.weight")};
        panel->setSelectedTensors(picks);
        panel->setRuns(1);
        panel->setNodePath(QString());  // the WebAssembly tier cannot run: one row says why
        QSignalSpy done(panel, &ui::ReconstructPanel::reconstructed);
        QVERIFY(panel->start() != 0);
        QVERIFY(done.wait(120000));
        const ui::BackendResultModel* model = panel->resultModel();
        int expected = 0;
        for (const kernels::Backend b : kernels::kAllBackends) expected += kernels::backend_available(b) ? 3 : 1;
        expected += 1;  // wasm
        QCOMPARE(model->rowCount(), expected);
        const int wasm = model->rowOf(QString(), ui::ReconstructBackend::Wasm);
        QVERIFY(wasm >= 0);
        QCOMPARE(model->index(wasm, ui::BackendResultModel::Tensor).data().toString(), QStringLiteral("all 3 tensors"));
        QCOMPARE(model->index(wasm, ui::BackendResultModel::Status).data().toString(),
                 QStringLiteral("node was not found on PATH"));
        QCOMPARE(model->find(picks[2], ui::ReconstructBackend::Wasm), &model->rows()[static_cast<size_t>(wasm)]);
        if (!kernels::backend_available(kernels::Backend::Cuda)) {
            const int cuda = model->rowOf(QString(), ui::ReconstructBackend::Cuda);
            QVERIFY(cuda >= 0);
            QCOMPARE(model->index(cuda, ui::BackendResultModel::Status).data().toString(),
                     QString::fromStdString(kernels::backend_unavailable_reason(kernels::Backend::Cuda)));
        }

        // The results table is the workbench's table: filtered over every column, sorted by raw values.
        ui::ResultTable* table = panel->resultTable();
        QVERIFY(table);
        QVERIFY(!table->hasTotalsRow());
        table->filterEdit()->setText(QStringLiteral("wasm"));
        QCOMPARE(table->proxy()->rowCount(), 1);
        table->filterEdit()->clear();
        QCOMPARE(table->proxy()->rowCount(), expected);
        table->proxy()->sort(ui::BackendResultModel::MedianMs, Qt::DescendingOrder);  // as a header click does
        QCOMPARE(table->proxy()->sortRole(), ui::BackendResultModel::RawRole);
        double previous = std::numeric_limits<double>::infinity();  // the rows that ran, slowest first
        int timed = 0;
        for (int r = 0; r < table->proxy()->rowCount(); ++r) {
            const QVariant ms =
                table->proxy()->index(r, ui::BackendResultModel::MedianMs).data(ui::BackendResultModel::RawRole);
            if (!ms.isValid()) continue;  // a backend that did not run has no time
            QVERIFY(ms.toDouble() <= previous);
            previous = ms.toDouble();
            ++timed;
        }
        QVERIFY(timed >= 2 * 3);  // cpu-ref and cpu-simd on the three tensors
        // Counts in the one number format ("N of 16,384").
        const int ref = model->rowOf(picks[0], ui::ReconstructBackend::CpuSimd);
        if (ref >= 0 && model->rows()[static_cast<size_t>(ref)].ran()) {
            const ui::BackendResultRow& row = model->rows()[static_cast<size_t>(ref)];
            QVERIFY2(model->index(ref, ui::BackendResultModel::BitsDiffering)
                         .data()
                         .toString()
                         .endsWith(QStringLiteral(" of ") + ui::formatCount(row.elements)),
                     qPrintable(model->index(ref, ui::BackendResultModel::BitsDiffering).data().toString()));
        }
    }

    void helpMenuSaysWhatTheProgramHas() {
        QSettings().clear();
        MainWindow w;
        QAction* about = findAction(w, QStringLiteral("About GKQ Workbench"));
        QVERIFY(about);
        about->trigger();
        const QString text = w.lastHelp();
        QVERIFY2(text.contains(QString::fromLatin1(qVersion())), qPrintable(text));
        const std::vector<LibraryVersion> libraries = library_versions();
        QVERIFY(libraries.size() >= 5);  // zlib, PCRE2, OpenBLAS, Eigen, nlohmann/json
        for (const LibraryVersion& l : libraries) {
            QVERIFY2(!l.version.empty(), l.name.c_str());
            QVERIFY2(text.contains(QString::fromStdString(l.version).toHtmlEscaped()), l.name.c_str());
        }
        for (const kernels::Backend b : kernels::kAllBackends) {
            QVERIFY(text.contains(QString::fromLatin1(kernels::backend_name(b).data())));
            const std::string why = kernels::backend_unavailable_reason(b);
            const std::string device = kernels::backend_device(b);
            QVERIFY(text.contains(QString::fromStdString(why.empty() ? device : why).toHtmlEscaped()));
        }

        QAction* shortcuts = findAction(w, QStringLiteral("Keyboard shortcuts"));
        QVERIFY(shortcuts);
        shortcuts->trigger();
        QVERIFY(w.lastHelp().contains(QKeySequence(QKeySequence::Open).toString(QKeySequence::NativeText)));
        QVERIFY(w.lastHelp().contains(QStringLiteral("Quantize")));

        QAction* manual = findAction(w, QStringLiteral("Manual"));
        QVERIFY(manual);
        manual->trigger();
        QVERIFY2(w.lastHelp().endsWith(QStringLiteral("README.md")) && QFileInfo::exists(w.lastHelp()),
                 qPrintable(w.lastHelp()));
        // Rendered in the workbench: the README's first heading, and its links to docs/ followed in the window.
        ui::ManualWindow* manualWindow = w.manualWindow();
        QVERIFY(manualWindow);
        QTextBrowser* page = manualWindow->browser();
        QVERIFY2(page->toPlainText().startsWith(QStringLiteral("GKQ Workbench")),
                 qPrintable(page->toPlainText().left(80)));
        QCOMPARE(manualWindow->currentPage(), QFileInfo(w.lastHelp()).absoluteFilePath());
        emit page->anchorClicked(QUrl(QStringLiteral("docs/scale.md")));
        QCOMPARE(manualWindow->currentPage(),
                 QFileInfo(QFileInfo(w.lastHelp()).dir().filePath(QStringLiteral("docs/scale.md"))).absoluteFilePath());
        QVERIFY(page->toPlainText().startsWith(QStringLiteral("Scale")));
        QVERIFY(page->isBackwardAvailable());
        page->backward();
        QCOMPARE(manualWindow->currentPage(), QFileInfo(w.lastHelp()).absoluteFilePath());

        QAction* context = findAction(w, QStringLiteral("Help on this view"));
        QVERIFY(context);
        QCOMPARE(context->shortcut(), QKeySequence(QKeySequence::HelpContents));
        const QList<std::pair<int, QString>> views = {{MainWindow::OverviewTab, QStringLiteral("Overview")},
                                                      {MainWindow::SpectrumTab, QStringLiteral("Spectrum")},
                                                      {MainWindow::QuantizeTab, QStringLiteral("Quantize")},
                                                      {MainWindow::CompareTab, QStringLiteral("Compare")},
                                                      {MainWindow::SaturationTab, QStringLiteral("Saturation")},
                                                      {MainWindow::TuningTab, QStringLiteral("Tuning")},
                                                      {MainWindow::ReconstructTab, QStringLiteral("Reconstruct")},
                                                      {MainWindow::ServeTab, QStringLiteral("Serve")}};
        QCOMPARE(views.size(), w.tabs()->count());
        for (const auto& [tab, title] : views) {
            w.tabs()->setCurrentIndex(tab);
            context->trigger();
            QVERIFY2(w.lastHelp().startsWith(QStringLiteral("<b>%1</b>").arg(title)), qPrintable(w.lastHelp()));
        }
    }

    void chartsUseDistinctColoursAndRoundAxes() {
        // Round ticks that hold the data; a rate stops at its bound.
        const ui::NiceRange r = ui::niceRange(0.0, 7.3, 6);
        QCOMPARE(r.min, 0.0);
        QCOMPARE(r.step, 2.0);
        QCOMPARE(r.max, 8.0);
        QCOMPARE(r.tickCount(), 5);
        const ui::NiceRange rate = ui::niceRange(0.0, 97.0, 6, 100.0);
        QCOMPARE(rate.max, 100.0);

        // Compare: every preset its own colour, the Pareto front none of theirs.
        ui::ParetoChart pareto;
        std::vector<ui::ComparePoint> points;
        const char* names[] = {"paper", "q8_0", "q4_0", "lowrank-q4", "svd-energy"};
        for (int i = 0; i < 5; ++i) {
            ui::ComparePoint p;
            p.preset = QString::fromLatin1(names[i]);
            p.bitsPerWeight = 2.0 + 1.7 * i;
            p.meanKld = 0.5 / (i + 1);
            points.push_back(p);
        }
        pareto.setPoints(points);
        QList<QColor> colours;
        for (QAbstractSeries* s : pareto.chart()->series()) {
            if (auto* scatter = qobject_cast<QScatterSeries*>(s))
                colours << scatter->color();
            else if (auto* line = qobject_cast<QLineSeries*>(s))
                colours << line->pen().color();
        }
        QCOMPARE(colours.size(), 6);
        for (int i = 0; i < colours.size(); ++i)
            for (int j = i + 1; j < colours.size(); ++j)
                QVERIFY2(colours[i] != colours[j], qPrintable(QString::number(i)));
        // Compare calls it once per measured preset: the chart keeps one pair of axes (made again each time, the old
        // ones' tick labels stayed drawn under the new: "0.0 0.2 ... 1.2" under "0 2 ... 12").
        pareto.setPoints({points[0]});
        pareto.setPoints(points);
        QCOMPARE(pareto.chart()->axes(Qt::Horizontal).size(), 1);
        QCOMPARE(pareto.chart()->axes(Qt::Vertical).size(), 1);
        auto* x = qobject_cast<QValueAxis*>(pareto.chart()->axes(Qt::Horizontal).value(0));
        QVERIFY(x);
        QCOMPARE(x->labelFormat(), QStringLiteral("%.0f"));
        QVERIFY(x->max() >= 2.0 + 1.7 * 4);  // every point inside
        const double steps = (x->max() - x->min()) / (x->tickCount() - 1);
        QCOMPARE(steps, std::round(steps));  // whole bits per weight

        // Serve: the hit rate never runs past 100 %; the axis shrinks again once a peak scrolls out.
        ui::LiveSeriesChart hits(QStringLiteral("hit rate"), QStringLiteral("%"));
        hits.setUpperBound(100.0);
        hits.setWindowSeconds(10.0);
        hits.append(1.0, 99.0);
        QCOMPARE(hits.yAxisMax(), 100.0);
        ui::LiveSeriesChart requests(QStringLiteral("requests"), QStringLiteral("requests/s"));
        requests.setWindowSeconds(10.0);
        requests.append(1.0, 930.0);
        QCOMPARE(requests.yAxisMax(), 1000.0);
        for (int t = 2; t <= 14; ++t) requests.append(t, 7.0);
        QCOMPARE(requests.yAxisMax(), 8.0);
        // ... and its time axis ticks on round seconds as it scrolls (window 10 s: every 2 s from 0).
        auto* time = qobject_cast<QValueAxis*>(requests.chart()->axes(Qt::Horizontal).value(0));
        QVERIFY(time);
        QCOMPARE(time->tickType(), QValueAxis::TicksDynamic);
        QCOMPARE(time->tickAnchor(), 0.0);
        QCOMPARE(time->tickInterval(), 2.0);

        // Spectrum: ranks 1..200 with ticks on multiples of 50, not at fifths of the range (1, 40.8, 80.6, ...).
        ui::SpectrumChart spectrum;
        std::vector<double> values(200);
        for (size_t i = 0; i < values.size(); ++i) values[i] = 100.0 / double(i + 1);
        spectrum.setCurves({{QStringLiteral("layer 0 attn_q"), values}});
        QValueAxis* ranks = nullptr;
        for (QAbstractAxis* a : spectrum.chart()->axes(Qt::Horizontal)) ranks = qobject_cast<QValueAxis*>(a);
        QVERIFY(ranks);
        QCOMPARE(ranks->max(), 200.0);
        QCOMPARE(ranks->tickType(), QValueAxis::TicksDynamic);
        QCOMPARE(ranks->tickAnchor(), 0.0);
        QCOMPARE(ranks->tickInterval(), 50.0);
    }

    void droppingAFileOnAChartOpensIt() {
        QSettings().clear();
        MainWindow w;
        w.resize(1280, 800);
        w.show();
        w.tabs()->setCurrentWidget(w.comparePanel());
        auto* chart = w.comparePanel()->findChild<QChartView*>();
        QVERIFY(chart);
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        QMimeData mime;
        mime.setUrls({QUrl::fromLocalFile(m_model)});
        QDragEnterEvent enter(QPoint(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(chart->viewport(), &enter);
        QVERIFY(enter.isAccepted());
        QDropEvent drop(QPointF(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(chart->viewport(), &drop);
        QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 60000);
        QCOMPARE(w.modelPath(), m_model);
    }
};

QTEST_MAIN(TestWorkbenchPolish)
#include "test_workbench_polish.moc"
