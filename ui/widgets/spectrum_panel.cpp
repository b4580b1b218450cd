#include "widgets/spectrum_panel.h"

#include "charts/chart_export.h"
#include "charts/rank_stats.h"
#include "charts/spectrum_chart.h"
#include "charts/spectrum_heat_map.h"
#include "jobs/job_runner.h"
#include "jobs/job_watch.h"
#include "jobs/whitened_spectra_job.h"
#include "models/display_format.h"
#include "models/spectrum_store.h"
#include "widgets/output_guard.h"

#include "gkq/spectrum_cache.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSlider>
#include <QSpinBox>
#include <QSplitter>
#include <QVBoxLayout>
#include <algorithm>
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

    // "As the data sees it": a Gram file, its own job (progress, status, Cancel), the overlay toggle.
    m_gramButton = new QPushButton(tr("Load Gram file..."), this);
    m_gramButton->setToolTip(
        tr("Read the activation Gram matrices X^T X of this model's inputs on a calibration text (gkq imatrix MODEL "
           "--text FILE -o IM --gram GRAM) and compute the spectrum of W L for every matrix they cover, L the "
           "Cholesky factor of X^T X (in the background)"));
    connect(m_gramButton, &QPushButton::clicked, this, [this] {
        const QString dir = !gramFile().isEmpty() ? QFileInfo(gramFile()).absolutePath()
                            : m_model             ? QFileInfo(QString::fromStdString(m_model->label())).absolutePath()
                                                  : QString();
        const QString p = QFileDialog::getOpenFileName(this, tr("Gram file (gkq imatrix --gram)"), dir,
                                                       tr("Gram files (*.gguf *.gram);;All files (*)"));
        if (!p.isEmpty()) loadGram(p);
    });
    m_dataBox = new QCheckBox(tr("As the data sees it"), this);
    m_dataBox->setToolTip(
        tr("Draw the spectrum of W L next to W's, each over its own largest singular value: the energy of W L is the "
           "layer's output energy on the calibration text, so its energy ranks say what rank keeps what share of "
           "the output (SVD-LLM). Needs a Gram file (Load Gram file...)"));
    m_dataBox->setEnabled(false);
    connect(m_dataBox, &QCheckBox::toggled, this, [this] { refreshChart(); });
    m_gramCancel = new QPushButton(tr("Cancel"), this);
    m_gramCancel->setEnabled(false);
    connect(m_gramCancel, &QPushButton::clicked, this, &SpectrumPanel::cancelGram);
    const ProgressWidgets gramProgress = makeProgressWidgets(this);
    m_gramProgress = gramProgress.bar;
    m_gramStatus = gramProgress.status;
    m_gramStatus->setObjectName(QStringLiteral("gramStatus"));
    watchJobs(
        m_runner, this, [this](quint64 id) { return id == m_gramJob; }, gramProgress,
        [this](quint64, JobEnd how, const QString& message) {
            m_gramJob = 0;
            m_gramButton->setEnabled(true);
            m_gramCancel->setEnabled(false);
            m_gramCancel->hide();
            m_gramProgress->hide();
            const QString kept = m_whitened ? tr("; still showing %1").arg(gramFile()) : QString();
            if (how == JobEnd::Finished) {
                m_gramStatus->setText(m_gramText);
                emit gramLoaded();
            } else if (how == JobEnd::Failed) {
                m_gramStatus->setText(tr("Gram file not loaded: %1%2").arg(message, kept));
                emit gramFailed(message);
            } else {
                m_gramStatus->setText(tr("Loading the Gram file cancelled%1").arg(kept));
            }
        },
        tr("As the data sees it: "));
    // Beside the analysis' bar, so that the chart keeps its height: the Gram job's Cancel and bar show while it runs,
    // its status line once it has something to say.
    m_gramCancel->hide();
    m_gramProgress->hide();
    m_gramStatus->hide();

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
    m_data = new QLabel(this);
    m_data->setObjectName(QStringLiteral("dataReadout"));
    m_data->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_data->setWordWrap(true);
    m_data->setToolTip(
        tr("W L: the matrix times L, the Cholesky factor of the Gram matrix X^T X of its inputs on the calibration "
           "text. The energy of W L is the layer's output energy on that text (W's is its weight energy), so the "
           "best rank-k approximation's squared output error is the sum of the dropped squares of W L's singular "
           "values."));
    m_data->hide();

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
    chartColumn->addWidget(m_data);
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
    auto* progressRow = new QHBoxLayout();
    progressRow->addWidget(m_progress, 1);
    progressRow->addWidget(m_gramButton);
    progressRow->addWidget(m_dataBox);
    progressRow->addWidget(m_gramCancel);
    progressRow->addWidget(m_gramProgress, 1);
    layout->addLayout(top);
    layout->addLayout(progressRow);
    layout->addWidget(m_status);
    layout->addWidget(m_gramStatus);
    layout->addWidget(split, 1);
    refreshChart();
}

void SpectrumPanel::setModel(std::shared_ptr<const Weights> model) {
    m_runner->cancelKey(QStringLiteral("analyze"));
    m_runner->cancelKey(QStringLiteral("whiten"));
    m_model = std::move(model);
    m_gramJob = 0;
    m_whitened.reset();
    m_gramText.clear();
    m_gramStatus->clear();
    m_gramStatus->hide();
    m_gramProgress->setValue(0);
    m_gramProgress->hide();
    m_gramButton->setEnabled(true);
    m_gramCancel->setEnabled(false);
    m_gramCancel->hide();
    {
        const QSignalBlocker block(m_dataBox);
        m_dataBox->setChecked(false);
        m_dataBox->setEnabled(false);
    }
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

quint64 SpectrumPanel::loadGram(const QString& path) {
    m_gramStatus->show();
    if (!m_model) {
        m_gramStatus->setText(tr("No model open: open one (File > Open), then load a Gram file made for it"));
        return 0;
    }
    if (m_gramJob != 0) {
        m_gramStatus->setText(
            tr("A Gram file is already loading (the bar above shows how far it is; Cancel stops it)"));
        return 0;
    }
    m_gramButton->setEnabled(false);
    m_gramCancel->setEnabled(true);
    m_gramCancel->show();
    m_gramProgress->setValue(0);
    m_gramProgress->show();
    m_gramStatus->setText(tr("Reading %1...").arg(path));
    std::shared_ptr<const Weights> model = m_model;
    const std::string file = path.toStdString();
    m_gramJob = m_runner->run<WhitenedSpectra>(
        QStringLiteral("whiten"), tr("Computing the spectra of W L"),
        [model, file](const ProgressFn& progress) { return whitenedSpectra(*model, file, progress); },
        [this](WhitenedSpectra& result) {
            const QString name = QString::fromStdString(result.gramFile);
            // "1 matrix", "2 matrices"
            auto matrices = [this](size_t n) {
                return n == 1 ? tr("1 matrix") : tr("%1 matrices").arg(formatCount(static_cast<qint64>(n)));
            };
            m_gramText = tr("%1: the spectra of W L for %2, computed in %3")
                             .arg(QFileInfo(name).fileName(), matrices(result.byTensor.size()),
                                  QString::fromStdString(durationText(result.seconds)));
            // One line (the chart keeps its height); the file's path and the matrices without an entry are in the
            // tooltip, a failure's message in full (it names the file, the entry and the tensor).
            QString tip = name;
            if (!result.withoutEntry.empty()) {
                m_gramText += tr("; %1 without activations in it").arg(matrices(result.withoutEntry.size()));
                QStringList names;
                for (const std::string& t : result.withoutEntry) names << QString::fromStdString(t);
                tip += tr("\nwithout activations in it: %1").arg(names.join(QStringLiteral(", ")));
            }
            if (!result.failed.empty())
                m_gramText +=
                    tr("; %1 could not be computed: %2")
                        .arg(matrices(result.failed.size()), QString::fromStdString(result.failed.begin()->second));
            m_gramStatus->setToolTip(tip);
            m_whitened = std::make_shared<const WhitenedSpectra>(std::move(result));
            m_dataBox->setEnabled(true);
            if (m_dataBox->isChecked())
                refreshChart();
            else
                m_dataBox->setChecked(true);  // refreshes the chart
        });
    return m_gramJob;
}

void SpectrumPanel::cancelGram() {
    if (m_gramJob != 0) m_runner->cancel(m_gramJob);
}

void SpectrumPanel::setDataView(bool on) {
    if (m_dataBox->isEnabled()) m_dataBox->setChecked(on);
}

bool SpectrumPanel::dataView() const {
    return m_dataBox->isChecked() && m_whitened != nullptr;
}

QString SpectrumPanel::gramFile() const {
    return m_whitened ? QString::fromStdString(m_whitened->gramFile) : QString();
}

QString SpectrumPanel::gramStatusText() const {
    return m_gramStatus->text();
}

QString SpectrumPanel::dataText() const {
    return m_data->text();
}

const WhitenedSpectrum* SpectrumPanel::whitened(const QString& name) const {
    if (!m_whitened) return nullptr;
    const auto it = m_whitened->byTensor.find(name.toStdString());
    return it == m_whitened->byTensor.end() ? nullptr : &it->second;
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
    const bool data = dataView();
    const WhitenedSpectrum* seen = data ? whitened(m_current) : nullptr;
    std::vector<SpectrumChart::Curve> curves;
    if (spectrum) curves.push_back({curveName(*spectrum) + (data ? tr(" (W)") : QString()), spectrum->singular_values});
    if (seen) {
        const QString name = spectrum ? curveName(*spectrum) : m_current;
        curves.push_back({tr("%1 (W L)").arg(name), seen->singular_values, tr("output energy (W L)")});
    }
    for (const QString& name : m_overlay)
        if (name != m_current)
            if (auto s = m_store->find(name)) curves.push_back({curveName(*s), s->singular_values});
    m_chart->setNormalized(data);
    m_chart->chart()->setTitle(data ? tr("Singular values of W and W L (%1)").arg(QFileInfo(gramFile()).fileName())
                                    : tr("Singular values"));
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

    // W's values and W L's are as many (min(rows, cols)); without W's (not analyzed yet) the slider follows W L's.
    const int n = spectrum ? static_cast<int>(spectrum->singular_values.size())
                  : seen   ? static_cast<int>(seen->singular_values.size())
                           : 0;
    const int keep = spectrum ? static_cast<int>(std::max<int64_t>(1, spectrum->metrics.rank_90))
                     : seen   ? static_cast<int>(std::max<int64_t>(1, seen->metrics.rank_90))
                              : 0;
    m_slider->setRange(0, n);
    m_rankSpin->setRange(0, n);
    const bool same = m_rankSpin->value() == keep;
    m_rankSpin->setValue(keep);
    if (same) refreshRank();
    refreshMetrics();
}

void SpectrumPanel::refreshRank() {
    refreshData();
    const auto spectrum = m_store->find(m_current);
    if (!spectrum) {
        m_rankLabel->setText(QString());
        m_chart->setRank(m_rankSpin->value());
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

void SpectrumPanel::refreshData() {
    if (!dataView()) {
        m_data->clear();
        m_data->hide();
        return;
    }
    m_data->show();
    const QString head = tr("<b>As the data sees it</b>");
    const QString file = gramFile().toHtmlEscaped();
    if (m_current.isEmpty()) {
        m_data->setText(tr("%1: select a matrix in the model browser.").arg(head));
        return;
    }
    const std::string name = m_current.toStdString();
    if (const auto f = m_whitened->failed.find(name); f != m_whitened->failed.end()) {
        m_data->setText(
            tr("%1: no W L spectrum for this matrix: %2").arg(head, QString::fromStdString(f->second).toHtmlEscaped()));
        return;
    }
    const WhitenedSpectrum* seen = whitened(m_current);
    if (!seen) {
        const int64_t i = m_model ? m_model->index_of(name) : -1;
        const bool matrix = i >= 0 && m_model->tensor_info(static_cast<size_t>(i)).n_dims() == 2;
        m_data->setText(
            matrix
                ? tr("%1: no activations for this matrix in %2 (the file has no entry for its input)").arg(head, file)
                : tr("%1: not a matrix; no W L spectrum").arg(head));
        return;
    }
    const auto spectrum = m_store->find(m_current);
    const std::vector<double>& v = seen->singular_values;
    const auto n = static_cast<int64_t>(v.size());
    const int64_t k = std::clamp<int64_t>(m_rankSpin->value(), 0, n);
    // W and W L as two rows of one table (the chart's column is wide, not tall); the chart's title names the file,
    // the tooltip says what W L is.
    QString html = QStringLiteral("<table cellspacing='2'>");
    if (seen->shift > 0.0)
        html += tr("<tr><td colspan='5'>X^T X is not positive definite: %1 added to its diagonal</td></tr>")
                    .arg(num(seen->shift));
    const QString atK = formatCount(static_cast<qint64>(k));
    html += QStringLiteral("<tr><td>%1</td><td>%2</td><td>%3</td><td>%4</td><td>%5</td></tr>")
                .arg(head, tr("energy kept at rank %1").arg(atK), tr("relative error at rank %1").arg(atK),
                     tr("stable rank"), tr("rank for 90 / 99 / 99.9 %"));
    auto row = [&html](const QString& what, const QString& energy, const QString& err, const QString& stable,
                       const QString& ranks) {
        html += QStringLiteral("<tr><td><b>%1</b></td><td>%2</td><td>%3</td><td>%4</td><td>%5</td></tr>")
                    .arg(what, energy, err, stable, ranks);
    };
    auto ranks = [](const SpectrumMetrics& m) {
        return QStringLiteral("%1 / %2 / %3").arg(m.rank_90).arg(m.rank_99).arg(m.rank_999);
    };
    if (spectrum) {
        const RankStats r = rankStats(*spectrum, k);
        row(tr("W (weights)"), tr("%1 %").arg(formatNumber(100.0 * r.energyKept, 6)), formatNumber(r.relError, 6),
            num(spectrum->metrics.stable_rank), ranks(spectrum->metrics));
    } else {
        html += QStringLiteral("<tr><td><b>%1</b></td><td colspan='4'>%2</td></tr>")
                    .arg(tr("W (weights)"), tr("not analyzed yet (Analyze model)"));
    }
    row(tr("W L (output)"), tr("%1 %").arg(formatNumber(100.0 * top_k_energy(v.data(), n, k), 6)),
        formatNumber(relative_error_at_rank(v.data(), n, k), 6), num(seen->metrics.stable_rank), ranks(seen->metrics));
    html += QStringLiteral("</table>");
    m_data->setText(html);
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
