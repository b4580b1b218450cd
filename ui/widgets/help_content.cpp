#include "widgets/help_content.h"

#include "gkq/kernels.h"
#include "gkq/libraries.h"
#include "widgets/main_window.h"

#include <QAction>
#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QGuiApplication>
#include <QMainWindow>
#include <QMenu>
#include <QMenuBar>
#include <QStringList>
#include <QSysInfo>
#include <QWidget>
#include <QtGlobal>
#include <functional>

namespace gkq::ui {

namespace {
QString buildOptions() {
    QStringList options;
#ifdef GKQ_BUILD_TYPE
    options << QObject::tr("build type %1").arg(QStringLiteral(GKQ_BUILD_TYPE));
#endif
#ifdef GKQ_BUILD_OPTIONS
    options << QStringLiteral(GKQ_BUILD_OPTIONS);
#endif
#ifdef GKQ_WASM_MODULE_PATH
    options << QObject::tr("WebAssembly module %1").arg(QStringLiteral(GKQ_WASM_MODULE_PATH));
#else
    options << QObject::tr("no WebAssembly module");
#endif
    return options.join(QStringLiteral("; "));
}

QString compilerName() {
#if defined(__clang__)
    return QStringLiteral("clang %1").arg(QStringLiteral(__clang_version__));
#elif defined(__GNUC__)
    return QStringLiteral("GCC %1").arg(QStringLiteral(__VERSION__));
#else
    return QObject::tr("unknown compiler");
#endif
}

QString esc(const std::string& s) {
    return QString::fromStdString(s).toHtmlEscaped();
}
}  // namespace

QString aboutText() {
    QString kernels;
    for (const kernels::Backend b : kernels::kAllBackends) {
        const std::string why = kernels::backend_unavailable_reason(b);
        kernels +=
            QStringLiteral("<tr><td>%1</td><td>%2</td></tr>")
                .arg(esc(std::string(kernels::backend_name(b))),
                     why.empty() ? esc(kernels::backend_device(b)) : QObject::tr("not available: %1").arg(esc(why)));
    }
    const QString version =
#ifdef GKQ_VERSION
        QStringLiteral(GKQ_VERSION);
#else
        QObject::tr("unknown");
#endif
    // The engine's libraries as each reports itself at run time (header-only ones: the headers' version).
    QString libraries;
    for (const LibraryVersion& l : library_versions())
        libraries +=
            QStringLiteral("<tr><td>%1</td><td>%2</td></tr>")
                .arg(esc(l.name), l.run_time ? esc(l.version) : QObject::tr("%1 (headers)").arg(esc(l.version)));
#ifdef GKQ_LIBURING_VERSION  // 2.3 has no call that says its version: the one pkg-config found at configure time
    libraries += QStringLiteral("<tr><td>liburing</td><td>%1</td></tr>")
                     .arg(QObject::tr("%1 (configure time)").arg(QStringLiteral(GKQ_LIBURING_VERSION)));
#endif
    return QObject::tr(
               "<h3>GKQ Workbench %1</h3>"
               "<p>Low-rank and block quantization of LLaMA-family models, measured.</p>"
               "<table>"
               "<tr><td>Build</td><td>%2</td></tr>"
               "<tr><td>Compiler</td><td>%3</td></tr>"
               "<tr><td>Qt</td><td>%4 (built against %5), platform %6</td></tr>"
               "%7"
               "<tr><td>System</td><td>%8, %9</td></tr>"
               "</table><p><b>Kernels</b></p><table>%10</table>")
        .arg(version.toHtmlEscaped(), buildOptions().toHtmlEscaped(), compilerName().toHtmlEscaped(),
             QString::fromLatin1(qVersion()), QStringLiteral(QT_VERSION_STR), QGuiApplication::platformName(),
             libraries, QSysInfo::prettyProductName().toHtmlEscaped(), QSysInfo::currentCpuArchitecture())
        .arg(kernels);
}

QString shortcutsText(const QWidget* window) {
    QString rows;
    const auto* main = qobject_cast<const QMainWindow*>(window);
    if (main == nullptr) return {};
    std::function<void(const QMenu*, const QString&)> walk = [&](const QMenu* menu, const QString& path) {
        for (const QAction* a : menu->actions()) {
            const QString title = path + a->text().remove(QLatin1Char('&'));
            if (a->menu() != nullptr) {
                walk(a->menu(), title + QStringLiteral(" › "));
            } else if (!a->shortcut().isEmpty()) {
                rows +=
                    QStringLiteral("<tr><td><b>%1</b></td><td>%2</td></tr>")
                        .arg(a->shortcut().toString(QKeySequence::NativeText).toHtmlEscaped(), title.toHtmlEscaped());
            }
        }
    };
    for (const QAction* a : main->menuBar()->actions())
        if (a->menu() != nullptr) walk(a->menu(), a->text().remove(QLatin1Char('&')) + QStringLiteral(" › "));
    return QObject::tr("<table>%1</table>").arg(rows);
}

QString manualPath() {
    const QStringList candidates = {
        QCoreApplication::applicationDirPath() + QStringLiteral("/../share/doc/gkq/README.md"),
#ifdef GKQ_SOURCE_DIR
        QStringLiteral(GKQ_SOURCE_DIR "/README.md"),
#endif
    };
    for (const QString& c : candidates)
        if (QFileInfo::exists(c)) return QDir::cleanPath(c);
    return {};
}

QString viewHelpText(int tab) {
    switch (tab) {
        case MainWindow::OverviewTab:
            return QObject::tr(
                "<b>Overview</b>: the open model's configuration and every tensor with its stored "
                "name, role, layer, shape, type, parameters and bytes, read from the file's header. "
                "Click a header to sort; the filter box narrows the rows; the last row totals the "
                "rows shown; Home and End go to the first and last row. A row in orange is a "
                "fallback (a matrix kept in another type than most, f16 because its row length "
                "is not a multiple of their block size); its tooltip says why.");
        case MainWindow::SpectrumTab:
            return QObject::tr(
                "<b>Spectrum</b>: the exact singular values of the selected tensor (log axis) with the "
                "cumulative energy. The rank slider reads the exact relative error, energy kept and "
                "bits per weight of a rank-k factorization; \"Add to overlay\" keeps a tensor on the "
                "chart; the heat map shows one role across all layers; the right column lists the "
                "WeightWatcher metrics, each marked reliable or not. \"Load Gram file...\" reads the "
                "activation Gram matrices X^T X of this model's inputs (gkq imatrix --gram) and computes, in the "
                "background, the spectrum of W L (L the Cholesky factor of X^T X) of every matrix they cover; "
                "\"As the data sees it\" then draws it beside W's, each curve over its own s_1, with the "
                "output energy of W L, and the table under the rank slider compares W and W L: energy kept and "
                "error at rank k, stable rank, ranks for 90 / 99 / 99.9 % energy. A matrix without an entry in "
                "the file says so.");
        case MainWindow::QuantizeTab:
            return QObject::tr(
                "<b>Quantize</b>: choose a preset, override rank / energy / bits, press Quantize "
                "(Ctrl+R). Importance matrix... and Activation Gram matrices... take the calibration files of "
                "gkq quantize --imatrix and --gram (the whitened presets svd-llm and q4_0-lqer need the Gram "
                "file); Target bits per weight chooses each projection's k-quant type by measured error under "
                "the budget (--target-bpw), weighted by each matrix's measured effect on the output when a Sensitivity "
                "text is chosen (--sensitivity-text). The table lists what the core measured per tensor (a fallback in "
                "orange, a "
                "bits "
                "per weight above twice the table's in red); bits per weight count the "
                "whole knot record. The Layers x roles tab colours each layer's matrices by method, bits per "
                "weight or relative error (log scale optional); a cell's tooltip has its values and a click "
                "selects the tensor. Evaluate compares the knot with the open model on a text (mean KLD "
                "± SE, same top token, perplexity ratio); Export writes the knot or a reconstructed "
                "model atomically.");
        case MainWindow::CompareTab:
            return QObject::tr(
                "<b>Compare</b>: each ticked preset is quantized and evaluated on the chosen text; the "
                "chart plots bits per weight (whole knot file) against mean KLD with the Pareto front. "
                "The chart exports as PNG or SVG and the data as CSV.");
        case MainWindow::SaturationTab:
            return QObject::tr(
                "<b>Saturation</b>: how often each FFN neuron saturated on a text (gkq profile): one "
                "image row per block, the histogram of frequencies, hot and cold counts per block. The "
                "minimum frequency re-derives the masks instantly; the threshold T runs the model "
                "again.");
        case MainWindow::TuningTab:
            return QObject::tr(
                "<b>Tuning</b>: the rknot editor: every field with its type and allowed values, edits "
                "checked by the core, undo / redo, a diff against the file on disk, atomic save, and "
                "\"Re-quantize with this tuning\". Measured fields are read-only.");
        case MainWindow::ReconstructTab:
            return QObject::tr(
                "<b>Reconstruct</b>: decode tensors of a knot on every backend (CPU reference, CPU "
                "AVX2/FMA, CUDA, WebAssembly in node): median time, GB/s of output, errors against the "
                "float64 reference and elements differing from the CPU reference. A backend that "
                "cannot run here has one row with the reason.");
        case MainWindow::ServeTab:
            return QObject::tr(
                "<b>Serve</b>: the HTTP endpoint in-process on a knot (127.0.0.1, any free port), with "
                "live charts of requests/s, mean latency and weight-cache hit rate from its own "
                "/metrics, and a prompt box that sends /infer.");
        default: return {};
    }
}

}  // namespace gkq::ui
