#include "widgets/spectrum_panel.h"

#include "charts/chart_export.h"
#include "charts/rank_stats.h"
#include "charts/spectrum_chart.h"
#include "charts/spectrum_heat_map.h"
#include "jobs/job_runner.h"
#include "jobs/job_watch.h"
#include "models/display_format.h"
#include "models/spectrum_store.h"
#include "widgets/output_guard.h"

#include "gkq/spectrum_cache.h"

#include <QComboBox>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSlider>
#include <QSpinBox>
#include <QSplitter>
#include <QVBoxLayout>
#include <chrono>
#include <cmath>

namespace gkq::ui {

namespace {
QString num(double v, int digits = 4) {
    return std::isfinite(v) ? formatNumber(v, digits) : QStringLiteral("—");
}
QString roleText(TensorRole r) {
    const std::string_view n = role_name(r);
    return QString::fromLatin1(n.data(), static_cast<qsizetype>(n.size()));
}
// "layer 3 ffn_up" for block tensors (full names do not fit a legend), the stored name otherwise.
QString curveName(const TensorSpectrum& s) {
    return s.layer >= 0 ? QStringLiteral("layer %1 %2").arg(s.layer).arg(roleText(s.role))
                        : QString::fromStdString(s.name);
}

// What the analysis job hands back: the spectra, and whether they came from the cache or were computed (and
// written to it).
struct AnalyzedSpectra {
    std::vector<TensorSpectrum> spectra;
    bool fromCache = false;
    std::string cacheFile;           // read from (hit), or written to (miss; empty when it could not be)
    std::vector<std::string> notes;  // cache files not used and why, a cache write that failed
    double seconds = 0.0;            // wall time of the computation (0 for a hit)
};

// "1 min 05 s" / "42 s": a duration measured or extrapolated from a measurement.
std::string durationText(double s) {
    const auto total = static_cast<long long>(std::llround(std::max(0.0, s)));
    char buf[48];
    if (total >= 60)
        std::snprintf(buf, sizeof buf, "%lld min %02lld s", total / 60, total % 60);
    else
        std::snprintf(buf, sizeof buf, "%lld s", total);
    return buf;
}

// On the job's thread: the cache first (a stat per file and a hash of the tensor index, no tensor data), then,
// on a miss, every spectrum, reporting per tensor how many are done and the time left at the rate so far (the
// fraction analyze_model reports weighs each tensor by its cost), then the result written to the cache.
Result<AnalyzedSpectra> analyzeOrLoad(const Weights& model, const std::string& path, const ProgressFn& progress) {
    const AnalyzeOptions options;  // the exact full spectrum, everything the views show
    AnalyzedSpectra out;
    auto key = spectrum_cache_key(model, path, options);
    if (key) {
        SpectrumCacheLookup found = read_spectrum_cache(path, *key);
        out.notes = std::move(found.notes);
        if (found.spectra) {
            out.spectra = std::move(*found.spectra);
            out.fromCache = true;
            out.cacheFile = found.path;
            return out;
        }
    } else {
        out.notes.push_back("cache not used: " + key.message());
    }
    size_t total = 0;
    for (size_t i = 0; i < model.n_tensors(); ++i) {
        const TensorInfo& t = model.tensor_info(i);
        if (t.n_dims() == 2 && t.shape[0] > 0 && t.shape[1] > 0) ++total;
    }
    const auto t0 = std::chrono::steady_clock::now();
    size_t done = 0;
    auto r = analyze_model(model, options, [&](double fraction, std::string_view what) {
        if (!what.empty()) ++done;  // once per finished tensor
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::string text =
            "tensor " + std::to_string(done) + " of " + std::to_string(total) + " (" + std::string(what) + ")";
        if (fraction > 0.0 && fraction < 1.0)
            text += ", about " + durationText(elapsed * (1.0 - fraction) / fraction) + " left at the rate so far";
        return report_progress(progress, fraction, text);
    });
    if (!r) return r.status();
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.spectra = std::move(r).value();
    if (key) {
        if (auto written = write_spectrum_cache(path, *key, out.spectra))
            out.cacheFile = *written;
        else
            out.notes.push_back("the spectra cache was not written: " + written.message());
    }
    return out;
}
}  // namespace

SpectrumPanel::SpectrumPanel(JobRunner* runner, QWidget* parent) : QWidget(parent), m_runner(runner) {
    m_store = new SpectrumStore(this);
    connect(m_store, &SpectrumStore::changed, this, [this] {
        refreshRoles();
        refreshChart();
    });

    m_title = new QLabel(tr("Select a tensor in the model browser."), this);
    m_title->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_analyzeButton = new QPushButton(tr("Analyze model"), this);
    m_analyzeButton->setToolTip(tr("Compute the exact spectrum of every matrix (in the background)"));
    m_pinButton = new QPushButton(tr("Add to overlay"), this);
    m_pinButton->setToolTip(tr("Keep this tensor's spectrum on the chart while you select others"));
    m_clearButton = new QPushButton(tr("Clear overlay"), this);
    connect(m_analyzeButton, &QPushButton::clicked, this, &SpectrumPanel::analyze);
    const ProgressWidgets progress = makeProgressWidgets(this);
    m_progress = progress.bar;
    m_status = progress.status;
    watchJobs(
        m_runner, this, [this](quint64 id) { return id == m_analyzeJob; }, progress,
        [this](quint64, JobEnd how, const QString& message) {
            m_analyzeJob = 0;
            m_analyzeButton->setEnabled(true);
            if (how == JobEnd::Finished)
                m_status->setText(m_analyzedText);
            else if (how == JobEnd::Failed)
                m_status->setText(tr("Analysis failed: %1").arg(message));
            else
                m_status->setText(tr("Analysis cancelled"));
        });
    connect(m_pinButton, &QPushButton::clicked, this, &SpectrumPanel::pinCurrent);
    connect(m_clearButton, &QPushButton::clicked, this, &SpectrumPanel::clearOverlay);
    auto* top = new QHBoxLayout();
    top->addWidget(m_title, 1);
    top->addWidget(m_analyzeButton);
    top->addWidget(m_pinButton);
    top->addWidget(m_clearButton);
    for (const QString& format : {QStringLiteral("PNG"), QStringLiteral("SVG")}) {
        auto* button = new QPushButton(tr("Export %1...").arg(format), this);
        connect(button, &QPushButton::clicked, this, [this, format] {
            const QString p = QFileDialog::getSaveFileName(
                this, tr("Export chart"),
                suggestedOutputPath(m_model ? QString::fromStdString(m_model->label()) : QString(),
                                    QStringLiteral("spectrum"), format.toLower()),
                QStringLiteral("%1 (*.%2)").arg(format, format.toLower()));
            QString error;
            if (!p.isEmpty() && !(format == QLatin1String("SVG") ? exportSvg(p, &error) : exportPng(p, &error)))
                m_title->setText(error);
        });
        top->addWidget(button);
    }

    m_chart = new SpectrumChart(this);
    m_chart->setMinimumHeight(260);

    m_slider = new QSlider(Qt::Horizontal, this);
    m_slider->setRange(0, 0);
    m_rankSpin = new QSpinBox(this);
    m_rankSpin->setRange(0, 0);
    m_rankSpin->setPrefix(tr("rank k = "));
    m_rankSpin->setToolTip(
        tr("Keep the k largest singular values: the line below gives the rank-k truncation's "
           "relative error, the energy it keeps and its bits per weight"));
    connect(m_slider, &QSlider::valueChanged, m_rankSpin, &QSpinBox::setValue);
    connect(m_rankSpin, &QSpinBox::valueChanged, m_slider, &QSlider::setValue);
    connect(m_rankSpin, &QSpinBox::valueChanged, this, &SpectrumPanel::refreshRank);
    m_rankLabel = new QLabel(this);
    m_rankLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_rankLabel->setWordWrap(true);
    auto* rankRow = new QHBoxLayout();
    rankRow->addWidget(m_rankSpin);
    rankRow->addWidget(m_slider, 1);

    m_metrics = new QLabel(this);
    m_metrics->setObjectName(QStringLiteral("spectrumMetrics"));
    m_metrics->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_metrics->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    // One width whatever it says: a word-wrapped label's size hint follows its text, and the column would jump (and
    // the chart beside it) each time another tensor or an overlay changes the metrics.
    m_metrics->setFixedWidth(std::max(300, fontMetrics().averageCharWidth() * 44));
    m_metrics->setWordWrap(true);

    m_roleCombo = new QComboBox(this);
    m_roleCombo->setToolTip(tr("The matrix role whose spectra the heat map shows, one row per layer"));
    connect(m_roleCombo, &QComboBox::currentIndexChanged, this, &SpectrumPanel::refreshHeatMap);
    m_heatMap = new SpectrumHeatMap(this);
    m_heatMap->setMinimumHeight(180);

    auto* upper = new QWidget(this);
    auto* upperLayout = new QHBoxLayout(upper);
    upperLayout->setContentsMargins(0, 0, 0, 0);
    auto* chartColumn = new QVBoxLayout();
    chartColumn->addWidget(m_chart, 1);
    chartColumn->addLayout(rankRow);
    chartColumn->addWidget(m_rankLabel);
    upperLayout->addLayout(chartColumn, 3);
    upperLayout->addWidget(m_metrics, 1);

    auto* lower = new QWidget(this);
    auto* lowerLayout = new QVBoxLayout(lower);
    lowerLayout->setContentsMargins(0, 0, 0, 0);
    auto* roleRow = new QHBoxLayout();
    roleRow->addWidget(new QLabel(tr("Heat map of normalized spectra across layers, role:"), lower));
    roleRow->addWidget(m_roleCombo);
    roleRow->addStretch(1);
    lowerLayout->addLayout(roleRow);
    lowerLayout->addWidget(m_heatMap, 1);

    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(upper);
    split->addWidget(lower);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);

    auto* layout = new QVBoxLayout(this);
    layout->addLayout(top);
    layout->addWidget(m_progress);
    layout->addWidget(m_status);
    layout->addWidget(split, 1);
    refreshChart();
}

void SpectrumPanel::setModel(std::shared_ptr<const Weights> model) {
    m_runner->cancelKey(QStringLiteral("analyze"));
    m_model = std::move(model);
    m_current.clear();
    m_overlay.clear();
    m_store->clear();
    m_analyzeJob = 0;
    m_analyzeButton->setEnabled(true);
    m_analyzedText.clear();
    m_status->clear();
    m_progress->setValue(0);
}

quint64 SpectrumPanel::analyze() {
    if (!m_model) {
        m_status->setText(tr("No model open: open one (File > Open) and its spectra are analyzed"));
        return 0;
    }
    // Nothing new to compute: the spectra of the open model do not change. Say so rather than do nothing.
    if (m_analyzeJob != 0) {
        m_status->setText(tr("The analysis is already running (the bar above shows how far it is)"));
        return 0;
    }
    if (!m_store->isEmpty()) {
        m_status->setText(tr("Already analyzed: the spectra of all %1 matrices are shown; select a tensor in the "
                             "model browser")
                              .arg(m_store->size()));
        return 0;
    }
    m_analyzeButton->setEnabled(false);
    m_progress->setValue(0);
    m_status->setText(tr("Looking for cached spectra, else analyzing..."));
    std::shared_ptr<const Weights> model = m_model;
    const std::string path = m_model->label();
    const quint64 id = m_runner->run<AnalyzedSpectra>(
        QStringLiteral("analyze"), tr("Analyzing spectra"),
        [model, path](const ProgressFn& progress) { return analyzeOrLoad(*model, path, progress); },
        [this](AnalyzedSpectra& result) {
            const QString file = QString::fromStdString(result.cacheFile);
            if (result.fromCache) {
                m_analyzedText =
                    tr("Analyzed earlier: the spectra of %1 matrices, read from the cache %2 (made for these "
                       "files as they are now)")
                        .arg(result.spectra.size())
                        .arg(file);
            } else {
                ++m_computeCount;
                m_analyzedText = tr("Analyzed: the spectra of %1 matrices, computed in %2")
                                     .arg(result.spectra.size())
                                     .arg(QString::fromStdString(durationText(result.seconds)));
                if (!file.isEmpty()) m_analyzedText += tr("; cached in %1").arg(file);
            }
            for (const std::string& note : result.notes)
                m_analyzedText += QStringLiteral("\n") + QString::fromStdString(note);
            m_store->setSpectra(std::move(result.spectra),
                                result.fromCache ? SpectrumStore::Source::Cache : SpectrumStore::Source::Computed,
                                file);
            emit analyzed();
        });
    m_analyzeJob = id;
    return id;
}

void SpectrumPanel::showTensor(const QString& name) {
    m_current = name;
    refreshChart();
}

QString SpectrumPanel::statusText() const {
    return m_status->text();
}

int SpectrumPanel::rank() const {
    return m_rankSpin->value();
}

void SpectrumPanel::setRank(int k) {
    m_rankSpin->setValue(k);
}

void SpectrumPanel::pinCurrent() {
    if (!m_current.isEmpty() && m_store->find(m_current) && !m_overlay.contains(m_current)) m_overlay.append(m_current);
    refreshChart();
}

void SpectrumPanel::clearOverlay() {
    m_overlay.clear();
    refreshChart();
}

void SpectrumPanel::setHeatMapRole(TensorRole role) {
    const int i = m_roleCombo->findData(static_cast<int>(role));
    if (i >= 0) m_roleCombo->setCurrentIndex(i);
}

QString SpectrumPanel::rankText() const {
    return m_rankLabel->text();
}
QString SpectrumPanel::metricsText() const {
    return m_metrics->text();
}

void SpectrumPanel::refreshChart() {
    const auto spectrum = m_store->find(m_current);
    std::vector<SpectrumChart::Curve> curves;
    if (spectrum) curves.push_back({curveName(*spectrum), spectrum->singular_values});
    for (const QString& name : m_overlay)
        if (name != m_current)
            if (auto s = m_store->find(name)) curves.push_back({curveName(*s), s->singular_values});
    m_chart->setCurves(curves);
    m_pinButton->setEnabled(spectrum != nullptr);
    m_clearButton->setEnabled(!m_overlay.isEmpty());
    if (m_current.isEmpty())
        m_title->setText(tr("Select a tensor in the model browser."));
    else if (spectrum)
        m_title->setText(tr("<b>%1</b> — %2 x %3, %4 singular values")
                             .arg(m_current.toHtmlEscaped())
                             .arg(spectrum->rows)
                             .arg(spectrum->cols)
                             .arg(spectrum->singular_values.size()));
    else if (m_store->isEmpty())
        m_title->setText(tr("<b>%1</b> — not analyzed yet (Analyze model)").arg(m_current.toHtmlEscaped()));
    else
        m_title->setText(tr("<b>%1</b> — no spectrum: not a 2-D matrix, or its type has no float32 conversion")
                             .arg(m_current.toHtmlEscaped()));

    const int n = spectrum ? static_cast<int>(spectrum->singular_values.size()) : 0;
    const int keep = spectrum ? static_cast<int>(std::max<int64_t>(1, spectrum->metrics.rank_90)) : 0;
    m_slider->setRange(0, n);
    m_rankSpin->setRange(0, n);
    const bool same = m_rankSpin->value() == keep;
    m_rankSpin->setValue(keep);
    if (same) refreshRank();
    refreshMetrics();
}

void SpectrumPanel::refreshRank() {
    const auto spectrum = m_store->find(m_current);
    if (!spectrum) {
        m_rankLabel->setText(QString());
        m_chart->setRank(0);
        return;
    }
    const RankStats r = rankStats(*spectrum, m_rankSpin->value());
    m_chart->setRank(r.rank);
    m_rankLabel->setText(
        tr("At rank %1: relative error %2, energy kept %3 %, bits per weight %4 with f32 factors / %5 with f16 "
           "(U %6x%1, V %7x%1 and %1 singular values as plain floats; no headers, no quantization).")
            .arg(formatCount(static_cast<qint64>(r.rank)))
            .arg(formatNumber(r.relError, 6))
            .arg(formatNumber(100.0 * r.energyKept, 6))
            .arg(formatNumber(r.bpwF32))
            .arg(formatNumber(r.bpwF16))
            .arg(spectrum->rows)
            .arg(spectrum->cols));
}

void SpectrumPanel::refreshMetrics() {
    const auto spectrum = m_store->find(m_current);
    if (!spectrum) {
        m_metrics->setText(tr("<i>No metrics: no analyzed spectrum for this selection.</i>"));
        return;
    }
    const SpectrumMetrics& m = spectrum->metrics;
    const HeavyTailMetrics& h = spectrum->heavy_tail;
    const PowerLawFit& pl = h.power_law;
    const MarchenkoPasturFit& mp = h.marchenko_pastur;
    auto flag = [](bool reliable, const std::string& reason) {
        return reliable ? QStringLiteral("<span style='color:#207020'>reliable</span>")
                        : QStringLiteral("<span style='color:#b03020'>unreliable: %1</span>")
                              .arg(QString::fromStdString(reason).toHtmlEscaped());
    };
    QString html = QStringLiteral("<table cellspacing='2'>");
    auto row = [&html](const QString& k, const QString& v) {
        html += QStringLiteral("<tr><td>%1</td><td><b>%2</b></td></tr>").arg(k, v);
    };
    row(tr("||W||_F^2"), num(m.frobenius_sq, 6));
    row(tr("s_1 (spectral norm)"), num(m.s1, 6));
    row(tr("s_1 / s_2"), num(m.s1_over_s2));
    row(tr("stable rank"), num(m.stable_rank));
    row(tr("effective rank"), num(m.effective_rank));
    row(tr("rank for 90 / 99 / 99.9 % energy"),
        QStringLiteral("%1 / %2 / %3").arg(m.rank_90).arg(m.rank_99).arg(m.rank_999));
    html += QStringLiteral("<tr><td colspan='2'><hr><b>WeightWatcher power law</b> — %1</td></tr>")
                .arg(flag(pl.reliable, pl.reason));
    row(tr("alpha (± sigma)"), QStringLiteral("%1 ± %2").arg(num(pl.alpha), num(pl.sigma, 2)));
    row(tr("alpha_hat (weighted)"), num(h.alpha_hat));
    row(tr("xmin / KS distance"), QStringLiteral("%1 / %2").arg(num(pl.xmin), num(pl.ks_distance, 3)));
    row(tr("eigenvalues fitted / in tail"), QStringLiteral("%1 / %2").arg(pl.n_fit).arg(pl.n_tail));
    row(tr("log10 spectral norm / norm"), QStringLiteral("%1 / %2").arg(num(h.log_spectral_norm), num(h.log_norm)));
    html += QStringLiteral("<tr><td colspan='2'><hr><b>Marchenko-Pastur bulk</b> — %1</td></tr>")
                .arg(flag(mp.reliable, mp.reason));
    row(tr("MP spikes"), formatCount(static_cast<qint64>(mp.n_spikes)));
    row(tr("bulk edge lambda+"), num(mp.bulk_max));
    row(tr("MP soft rank"), num(mp.softrank));
    row(tr("Q = N/M, sigma"), QStringLiteral("%1, %2").arg(num(mp.q), num(mp.sigma)));
    html += QStringLiteral("</table>");
    m_metrics->setText(html);
}

void SpectrumPanel::refreshRoles() {
    const QVariant previous = m_roleCombo->currentData();
    QSignalBlocker block(m_roleCombo);
    m_roleCombo->clear();
    for (TensorRole r : m_store->roles()) m_roleCombo->addItem(roleText(r), static_cast<int>(r));
    int i = previous.isValid() ? m_roleCombo->findData(previous) : -1;
    if (i < 0) i = m_roleCombo->findData(static_cast<int>(TensorRole::FfnUp));
    m_roleCombo->setCurrentIndex(std::max(0, i));
    block.unblock();
    refreshHeatMap();
}

void SpectrumPanel::refreshHeatMap() {
    if (m_roleCombo->count() == 0) {
        m_heatMap->setSpectra(QString(), {}, {});
        return;
    }
    const auto role = static_cast<TensorRole>(m_roleCombo->currentData().toInt());
    QStringList labels;
    std::vector<std::vector<double>> spectra;
    for (const auto& s : m_store->byRole(role)) {
        labels << (s->layer >= 0 ? tr("layer %1").arg(s->layer) : QString::fromStdString(s->name));
        spectra.push_back(s->singular_values);
    }
    m_heatMap->setSpectra(tr("%1: s_i / s_1 by layer").arg(roleText(role)), labels, spectra);
}

bool SpectrumPanel::exportPng(const QString& path, QString* error) const {
    if (m_model &&
        refuseOutputOverInput(const_cast<SpectrumPanel*>(this), path, model_input_files(m_model->label()), error))
        return false;
    return exportChartPng(m_chart, path, error);
}
bool SpectrumPanel::exportSvg(const QString& path, QString* error) const {
    if (m_model &&
        refuseOutputOverInput(const_cast<SpectrumPanel*>(this), path, model_input_files(m_model->label()), error))
        return false;
    return exportChartSvg(m_chart, path, error);
}

}  // namespace gkq::ui
