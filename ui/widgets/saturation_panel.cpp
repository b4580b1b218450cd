#include "widgets/saturation_panel.h"

#include "charts/saturation_histogram.h"
#include "gkq/workflows.h"
#include "jobs/job_runner.h"
#include "jobs/job_watch.h"
#include "widgets/output_guard.h"

#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMouseEvent>
#include <QPainter>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>
#include <filesystem>
#include <functional>

namespace gkq::ui {

// The masks image scaled to the widget without smoothing (every neuron stays a sharp column), with a tooltip naming
// the neuron under the mouse.
class MaskView : public QWidget {
public:
    using Describe = std::function<QString(int layer, int neuron)>;
    MaskView(Describe describe, QWidget* parent) : QWidget(parent), m_describe(std::move(describe)) {
        setMouseTracking(true);
        setMinimumHeight(80);
        setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
    }
    void setImage(const QImage& image) {
        m_image = image;
        update();
    }

protected:
    void paintEvent(QPaintEvent*) override {
        QPainter p(this);
        p.fillRect(rect(), palette().window());
        if (m_image.isNull()) return;
        p.setRenderHint(QPainter::SmoothPixmapTransform, false);
        p.drawImage(rect(), m_image);
    }
    void mouseMoveEvent(QMouseEvent* e) override {
        if (m_image.isNull() || width() <= 0 || height() <= 0) return;
        const int neuron = static_cast<int>(e->position().x() * m_image.width() / width());
        const int layer = static_cast<int>(e->position().y() * m_image.height() / height());
        if (neuron < 0 || layer < 0 || neuron >= m_image.width() || layer >= m_image.height()) return;
        QToolTip::showText(e->globalPosition().toPoint(), m_describe(layer, neuron), this);
    }

private:
    Describe m_describe;
    QImage m_image;
};

namespace {

const QString kJobKey = QStringLiteral("saturation");
const QString kLastTextKey = QStringLiteral("saturation/lastText");
// Hot when the neuron saturated on more than one token in ten. At the default T = 1 a neuron passes its block's RMS on
// a few per cent of the tokens (the demo model on 400 tokens of its held-out text: median 6.5 %, 5 % of the neurons
// below 1.5 %), so a minimum of 0 or 0.01 marks nearly every neuron hot; 0.1 keeps the frequent ones (about a fifth).
constexpr double kDefaultMinFrequency = 0.1;

// Hot neurons in a bright colour per frequency bin (bins 1..7 rise from violet to pale yellow); cold neurons in the
// same hue, darkened; neurons that never saturated (bin 0, always cold) nearly black.
QColor binColour(int bin, bool hot) {
    static const QRgb kHot[kSaturationHistogramBins] = {0x303040, 0x7b2cbf, 0xc03a83, 0xe8505b,
                                                        0xf57c2b, 0xf9a825, 0xfdd835, 0xffffbf};
    const QColor c = QColor::fromRgb(kHot[std::clamp(bin, 0, kSaturationHistogramBins - 1)]);
    return hot || bin == 0 ? c : c.darker(320);
}

struct ProfileInput {
    std::shared_ptr<const Weights> model;
    std::string modelLabel;  // the path the user opened
    std::string text;
    std::string tokenizer;  // chosen by the user; empty: automatic
    int64_t maxTokens = 0;
    double threshold = 1.0;
    double minFrequency = 0.0;
};

// The core's profile workflow: the user's tokenizer.bin, else the model's own vocabulary (a knot's: its header's), else
// a tokenizer.bin beside the model; the profile carries its `gkq profile` command.
Result<SaturationProfile> runProfile(const ProfileInput& in, const ProgressFn& progress) {
    ProfileRequest request;
    request.model_label = in.modelLabel;
    request.text_path = in.text;
    request.tokenizer.given = in.tokenizer;
    request.tokenizer.hint = "choose a llama2.c tokenizer file (Tokenizer)";
    request.max_tokens = in.maxTokens;
    request.threshold = in.threshold;
    request.min_frequency = in.minFrequency;
    return profile_model(*in.model, request, progress);
}

}  // namespace

SaturationPanel::SaturationPanel(JobRunner* runner, QWidget* parent) : QWidget(parent), m_runner(runner) {
    m_text = new QLineEdit(this);
    m_text->setPlaceholderText(tr("Calibration text (UTF-8)"));
    auto* browse = new QPushButton(tr("Browse..."), this);
    connect(browse, &QPushButton::clicked, this, [this] {
        const QString p = QFileDialog::getOpenFileName(
            this, tr("Calibration text"), QFileInfo(m_text->text()).absolutePath(), tr("Text (*.txt);;All files (*)"));
        if (!p.isEmpty()) m_text->setText(p);
    });
    m_maxTokens = new QSpinBox(this);
    m_maxTokens->setRange(0, 1 << 30);
    m_maxTokens->setValue(2048);
    m_maxTokens->setSpecialValueText(tr("whole text"));
    m_maxTokens->setToolTip(tr("Profile only the first N tokens of the text (gkq profile --max-tokens)"));
    m_threshold = new QDoubleSpinBox(this);
    m_threshold->setRange(0.0, 1e6);
    m_threshold->setDecimals(3);
    m_threshold->setSingleStep(0.25);
    m_threshold->setValue(1.0);
    m_threshold->setToolTip(
        tr("Saturated when |a| > T x the block's activation RMS. The stored counts hold one T: "
           "changing it runs the model over the text again."));
    m_minFrequency = new QDoubleSpinBox(this);
    m_minFrequency->setRange(0.0, 0.999999);
    m_minFrequency->setDecimals(6);
    m_minFrequency->setSingleStep(0.001);
    m_minFrequency->setValue(kDefaultMinFrequency);
    m_minFrequency->setToolTip(
        tr("Hot when the saturation frequency is above this. Re-derived from the stored "
           "counts: no model run."));
    connect(m_threshold, &QDoubleSpinBox::editingFinished, this, [this] { setThreshold(m_threshold->value()); });
    connect(m_minFrequency, &QDoubleSpinBox::valueChanged, this, [this](double f) { setMinFrequency(f); });

    m_profileButton = new QPushButton(tr("Profile"), this);
    m_cancelButton = new QPushButton(tr("Cancel"), this);
    m_loadButton = new QPushButton(tr("Load masks..."), this);
    m_saveButton = new QPushButton(tr("Save masks..."), this);
    connect(m_profileButton, &QPushButton::clicked, this, &SaturationPanel::startProfile);
    connect(m_cancelButton, &QPushButton::clicked, this, &SaturationPanel::cancel);
    connect(m_loadButton, &QPushButton::clicked, this, [this] {
        const QString p =
            QFileDialog::getOpenFileName(this, tr("Load masks"), QString(), tr("Masks (*.json);;All files (*)"));
        if (!p.isEmpty()) loadMasks(p);
    });
    connect(m_saveButton, &QPushButton::clicked, this, [this] {
        // "<model>-masks.json" beside the model (or in a folder the user can write to)
        const QString p = QFileDialog::getSaveFileName(
            this, tr("Save masks"),
            suggestedOutputPath(m_model ? QString::fromStdString(m_model->label()) : QString(), QStringLiteral("masks"),
                                QStringLiteral("json")),
            tr("Masks (*.json)"));
        if (!p.isEmpty()) saveMasks(p);
    });
    const ProgressWidgets progress = makeProgressWidgets(this);
    m_progress = progress.bar;
    m_status = progress.status;
    m_summary = new QLabel(this);
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_summary->setWordWrap(true);

    auto* textRow = new QHBoxLayout();
    textRow->addWidget(m_text, 1);
    textRow->addWidget(browse);
    auto* form = new QFormLayout();
    form->addRow(tr("Text:"), textRow);
    m_tokenizer = new QLineEdit(this);
    m_tokenizer->setPlaceholderText(tr("automatic: the model's vocabulary, else the tokenizer.bin beside it"));
    auto* browseTokenizer = new QPushButton(tr("Browse..."), this);
    connect(browseTokenizer, &QPushButton::clicked, this, [this] {
        const QString p = QFileDialog::getOpenFileName(this, tr("llama2.c tokenizer"), QString(),
                                                       tr("Tokenizer (*.bin);;All files (*)"));
        if (!p.isEmpty()) m_tokenizer->setText(p);
    });
    auto* tokenizerRow = new QHBoxLayout();
    tokenizerRow->addWidget(m_tokenizer, 1);
    tokenizerRow->addWidget(browseTokenizer);
    form->addRow(tr("Tokenizer:"), tokenizerRow);
    form->addRow(tr("Tokens:"), m_maxTokens);
    auto* tRow = new QHBoxLayout();
    tRow->addWidget(m_threshold);
    tRow->addWidget(new QLabel(tr("changing T runs the model over the text again (a job)"), this), 1);
    form->addRow(tr("Threshold T:"), tRow);
    auto* fRow = new QHBoxLayout();
    fRow->addWidget(m_minFrequency);
    fRow->addWidget(new QLabel(tr("re-derives the masks from the stored counts (no model run)"), this), 1);
    form->addRow(tr("Min. frequency:"), fRow);
    auto* buttons = new QHBoxLayout();
    buttons->addWidget(m_profileButton);
    buttons->addWidget(m_cancelButton);
    buttons->addStretch(1);
    buttons->addWidget(m_loadButton);
    buttons->addWidget(m_saveButton);

    m_maskView = new MaskView(
        [this](int layer, int neuron) -> QString {
            if (!m_profile || layer >= static_cast<int>(m_profile->layers.size())) return {};
            const LayerSaturation& l = m_profile->layers[static_cast<size_t>(layer)];
            if (neuron >= static_cast<int>(l.counts.size())) return {};
            const uint64_t c = l.counts[static_cast<size_t>(neuron)];
            return tr("layer %1, neuron %2: saturated on %3 of %4 tokens (%5), %6")
                .arg(l.layer_id)
                .arg(neuron)
                .arg(c)
                .arg(m_profile->n_tokens)
                .arg(static_cast<double>(c) / static_cast<double>(m_profile->n_tokens), 0, 'g', 6)
                .arg(l.hot[static_cast<size_t>(neuron)] ? tr("hot") : tr("cold"));
        },
        this);
    QStringList legend;
    const QStringList bins = SaturationHistogram::binLabels();
    for (int b = 0; b < kSaturationHistogramBins; ++b)
        legend << QStringLiteral("<span style='color:%1'>&#9632;</span><span style='color:%2'>&#9632;</span> %3")
                      .arg(binColour(b, true).name(), binColour(b, false).name(), bins[b].toHtmlEscaped());
    auto* legendLabel = new QLabel(tr("Rows: blocks; columns: FFN neurons. Colour: frequency bin, bright = hot, "
                                      "dark = cold. ") +
                                       legend.join(QStringLiteral(" &nbsp; ")),
                                   this);
    legendLabel->setWordWrap(true);

    m_histLayer = new QComboBox(this);
    m_histLayer->setToolTip(tr("The layer whose neurons the histogram counts, or the sum over all layers"));
    connect(m_histLayer, &QComboBox::currentIndexChanged, this, [this] { refreshHistogram(); });
    m_histogram = new SaturationHistogram(this);
    m_table = new QTableWidget(this);
    m_table->setColumnCount(7);
    m_table->setHorizontalHeaderLabels(
        {tr("layer"), tr("neurons"), tr("activation RMS"), tr("hot"), tr("hot %"), tr("cold"), tr("mask RLE bytes")});
    m_table->verticalHeader()->hide();
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->horizontalHeader()->setStretchLastSection(true);

    auto* histBox = new QWidget(this);
    auto* histLayout = new QVBoxLayout(histBox);
    histLayout->setContentsMargins(0, 0, 0, 0);
    auto* histRow = new QHBoxLayout();
    histRow->addWidget(new QLabel(tr("Histogram of:"), histBox));
    histRow->addWidget(m_histLayer);
    histRow->addStretch(1);
    histLayout->addLayout(histRow);
    histLayout->addWidget(m_histogram, 1);
    m_histCounts = new QLabel(histBox);
    m_histCounts->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_histCounts->setWordWrap(true);
    histLayout->addWidget(m_histCounts);
    auto* bottom = new QSplitter(Qt::Horizontal, this);
    bottom->addWidget(histBox);
    bottom->addWidget(m_table);
    bottom->setStretchFactor(0, 3);
    bottom->setStretchFactor(1, 2);
    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(m_maskView);
    split->addWidget(bottom);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 2);

    auto* layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addLayout(buttons);
    layout->addWidget(m_progress);
    layout->addWidget(m_status);
    layout->addWidget(m_summary);
    layout->addWidget(legendLabel);
    layout->addWidget(split, 1);

    watchJobs(
        m_runner, this, [this](quint64 id) { return id == m_job; }, progress,
        [this](quint64 id, JobEnd how, const QString& message) {
            if (how == JobEnd::Failed) setError(message);
            onEnded(id, how);
        });
    updateButtons();
}

SaturationPanel::~SaturationPanel() {
    if (m_job) m_runner->cancel(m_job);
}

void SaturationPanel::setModel(std::shared_ptr<const Weights> model) {
    if (m_job) m_runner->cancel(m_job);
    m_model = std::move(model);
    m_tokenizer->clear();  // another model may have another vocabulary
    m_profile.reset();
    m_source.clear();
    m_error.clear();
    m_status->clear();
    m_progress->setValue(0);
    refreshViews();
    if (m_model) {
        // The last text profiled on, else the held-out text beside the model (or knot), else the bundled demo's.
        QStringList candidates;
        if (const QString last = QSettings().value(kLastTextKey).toString(); !last.isEmpty()) candidates << last;
        const QFileInfo info(QString::fromStdString(m_model->label()));
        candidates << QDir(info.isDir() ? info.absoluteFilePath() : info.absolutePath())
                          .filePath(QStringLiteral("heldout.txt"));
#ifdef GKQ_DEMO_MODEL_DIR
        candidates << QStringLiteral(GKQ_DEMO_MODEL_DIR "/heldout.txt");
#endif
        for (const QString& c : candidates)
            if (QFileInfo::exists(c)) {
                m_text->setText(c);
                break;
            }
    }
    updateButtons();
}

void SaturationPanel::setTokenizerPath(const QString& path) {
    m_tokenizer->setText(path);
}

void SaturationPanel::setTextPath(const QString& path) {
    m_text->setText(path);
}
QString SaturationPanel::textPath() const {
    return m_text->text();
}
void SaturationPanel::setMaxTokens(int n) {
    m_maxTokens->setValue(n);
}
int SaturationPanel::maxTokens() const {
    return m_maxTokens->value();
}
double SaturationPanel::threshold() const {
    return m_threshold->value();
}
double SaturationPanel::minFrequency() const {
    return m_profile ? m_profile->min_frequency : m_minFrequency->value();
}

quint64 SaturationPanel::startProfile() {
    if (!m_model || m_text->text().isEmpty()) return 0;
    ProfileInput in;
    in.model = m_model;
    in.modelLabel = m_model->label();
    in.text = m_text->text().toStdString();
    in.tokenizer = m_tokenizer->text().toStdString();
    in.maxTokens = m_maxTokens->value();
    in.threshold = m_threshold->value();
    in.minFrequency = m_profile ? m_profile->min_frequency : m_minFrequency->value();
    QSettings().setValue(kLastTextKey, m_text->text());
    m_error.clear();
    m_status->setText(tr("Profiling..."));
    m_progress->setValue(0);
    m_job = m_runner->run<SaturationProfile>(
        kJobKey, tr("Profiling saturation on %1").arg(QFileInfo(m_text->text()).fileName()),
        [in](const ProgressFn& progress) { return runProfile(in, progress); },
        [this](SaturationProfile& p) {
            m_source = tr("profiled here");
            showProfile(std::move(p));
        });
    updateButtons();
    return m_job;
}

void SaturationPanel::cancel() {
    if (m_job) m_runner->cancel(m_job);
}

quint64 SaturationPanel::setThreshold(double t) {
    {
        const QSignalBlocker block(m_threshold);
        m_threshold->setValue(t);
    }
    if (!m_profile || m_profile->threshold == m_threshold->value()) return 0;
    return startProfile();
}

bool SaturationPanel::setMinFrequency(double f) {
    {
        const QSignalBlocker block(m_minFrequency);
        m_minFrequency->setValue(f);
    }
    if (!m_profile) return true;
    auto r = rederive_masks(*m_profile, f);
    if (!r) {
        setError(QString::fromStdString(r.message()));
        return false;
    }
    m_profile = std::move(r).value();
    refreshViews();
    return true;
}

bool SaturationPanel::loadMasks(const QString& path) {
    auto r = read_saturation_profile(path.toStdString());
    if (!r) {
        setError(QString::fromStdString(r.message()));
        return false;
    }
    m_error.clear();
    m_status->setText(tr("Loaded %1").arg(path));
    m_source = tr("loaded from %1").arg(path);
    showProfile(std::move(r).value());
    emit masksLoaded(path);
    return true;
}

bool SaturationPanel::saveMasks(const QString& path) {
    if (!m_profile) {
        setError(tr("%1: no masks to save (profile or load first)").arg(path));
        return false;
    }
    std::vector<std::string> inputs = m_model ? model_input_files(m_model->label()) : std::vector<std::string>{};
    if (!m_text->text().isEmpty()) inputs.push_back(m_text->text().toStdString());
    QString refused;
    if (refuseOutputOverInput(this, path, inputs, &refused)) {
        setError(refused);
        return false;
    }
    if (Status s = write_saturation_profile(path.toStdString(), *m_profile); !s) {
        setError(QString::fromStdString(s.message()));
        return false;
    }
    m_status->setText(tr("Wrote %1").arg(path));
    return true;
}

void SaturationPanel::showProfile(SaturationProfile profile) {
    m_profile = std::move(profile);
    {
        const QSignalBlocker a(m_threshold), b(m_minFrequency);
        m_threshold->setValue(m_profile->threshold);
        m_minFrequency->setValue(m_profile->min_frequency);
    }
    refreshViews();
}

void SaturationPanel::setError(const QString& message) {
    m_error = message;
    m_status->setText(message);
    emit errorOccurred(message);
}

QString SaturationPanel::summaryText() const {
    return m_summary->text();
}

QString SaturationPanel::histogramText() const {
    return m_histCounts->text();
}

void SaturationPanel::setHistogramLayer(int layer) {
    m_histLayer->setCurrentIndex(layer < 0 ? 0 : layer + 1);
}

void SaturationPanel::refreshViews() {
    m_table->setRowCount(0);
    if (!m_profile) {
        m_image = QImage();
        m_maskView->setImage(m_image);
        m_summary->setText(m_model ? tr("Profile the open model on a text, or load a masks file (gkq profile -o).")
                                   : tr("No model open; a masks file can still be loaded."));
        const QSignalBlocker block(m_histLayer);
        m_histLayer->clear();
        m_histogram->clear();
        m_histCounts->clear();
        updateButtons();
        return;
    }
    const SaturationProfile& p = *m_profile;
    int64_t width = 0, hot = 0, total = 0;
    for (const LayerSaturation& l : p.layers) width = std::max(width, l.neuron_count);
    m_image = QImage(static_cast<int>(width), static_cast<int>(p.layers.size()), QImage::Format_RGB32);
    m_image.fill(palette().window().color());
    m_table->setRowCount(static_cast<int>(p.layers.size()));
    for (size_t r = 0; r < p.layers.size(); ++r) {
        const LayerSaturation& l = p.layers[r];
        auto* line = reinterpret_cast<QRgb*>(m_image.scanLine(static_cast<int>(r)));
        for (size_t j = 0; j < l.counts.size(); ++j)
            line[j] = binColour(saturation_histogram_bin(l.counts[j], static_cast<uint64_t>(p.n_tokens)), l.hot[j] != 0)
                          .rgb();
        const int64_t h = l.hot_count();
        hot += h;
        total += l.neuron_count;
        auto number = [](qlonglong v) {
            auto* item = new QTableWidgetItem();
            item->setData(Qt::DisplayRole, v);
            return item;
        };
        const int row = static_cast<int>(r);
        m_table->setItem(row, 0, number(l.layer_id));
        m_table->setItem(row, 1, number(l.neuron_count));
        m_table->setItem(row, 2, new QTableWidgetItem(QString::number(l.scale, 'g', 6)));
        m_table->setItem(row, 3, number(h));
        m_table->setItem(row, 4,
                         new QTableWidgetItem(l.neuron_count > 0
                                                  ? QString::number(100.0 * double(h) / double(l.neuron_count), 'f', 2)
                                                  : QString()));
        m_table->setItem(row, 5, number(l.neuron_count - h));
        m_table->setItem(row, 6, number(static_cast<qlonglong>(rle_encoded_bytes(rle_encode_mask(l.hot)))));
    }
    m_table->resizeColumnsToContents();
    m_maskView->setImage(m_image);

    QString mismatch;
    if (m_model &&
        (static_cast<int64_t>(p.layers.size()) != m_model->config().n_layers || width != m_model->config().hidden_dim))
        mismatch = tr("<br><b>These masks (%1 blocks x %2 neurons) do not match the open model (%3 x %4).</b>")
                       .arg(p.layers.size())
                       .arg(width)
                       .arg(m_model->config().n_layers)
                       .arg(m_model->config().hidden_dim);
    m_summary->setText(tr("%1 tokens of %2; saturated when |a| &gt; %3 x block RMS; hot when frequency &gt; %4.<br>"
                          "Hot: %5 of %6 neurons (%7 %) over %8 blocks. Masks %9; command: <tt>%10</tt>%11")
                           .arg(p.n_tokens)
                           .arg(QString::fromStdString(p.text).toHtmlEscaped())
                           .arg(p.threshold, 0, 'g', 6)
                           .arg(p.min_frequency, 0, 'g', 6)
                           .arg(hot)
                           .arg(total)
                           .arg(total > 0 ? 100.0 * double(hot) / double(total) : 0.0, 0, 'f', 2)
                           .arg(p.layers.size())
                           .arg(m_source.toHtmlEscaped(), QString::fromStdString(p.command).toHtmlEscaped(), mismatch));
    {
        const int keep = m_histLayer->currentIndex();
        const QSignalBlocker block(m_histLayer);
        m_histLayer->clear();
        m_histLayer->addItem(tr("all layers"));
        for (const LayerSaturation& l : p.layers) m_histLayer->addItem(tr("layer %1").arg(l.layer_id));
        m_histLayer->setCurrentIndex(keep >= 0 && keep < m_histLayer->count() ? keep : 0);
    }
    refreshHistogram();
    updateButtons();
}

void SaturationPanel::refreshHistogram() {
    m_histCounts->clear();
    if (!m_profile) return;
    const int index = m_histLayer->currentIndex();
    if (index <= 0) {
        std::vector<uint64_t> sum(kSaturationHistogramBins, 0);
        for (const LayerSaturation& l : m_profile->layers)
            for (size_t b = 0; b < sum.size() && b < l.histogram.size(); ++b) sum[b] += l.histogram[b];
        m_histogram->setCounts(sum, tr("all layers"));
    } else if (static_cast<size_t>(index - 1) < m_profile->layers.size()) {
        const LayerSaturation& l = m_profile->layers[static_cast<size_t>(index - 1)];
        m_histogram->setCounts(l.histogram, tr("layer %1").arg(l.layer_id));
    }
    // The exact counts in words too: bar labels are dropped or elided when the chart is small.
    QStringList parts;
    const QStringList labels = SaturationHistogram::binLabels();
    const std::vector<uint64_t> shown = m_histogram->counts();
    for (size_t b = 0; b < shown.size() && b < static_cast<size_t>(labels.size()); ++b)
        parts << QStringLiteral("%1: %2").arg(labels[static_cast<qsizetype>(b)]).arg(shown[b]);
    m_histCounts->setText(tr("Neurons by frequency: %1").arg(parts.join(QStringLiteral(", "))));
}

void SaturationPanel::onEnded(quint64 id, JobEnd how) {
    if (id != m_job) return;
    m_job = 0;
    if (how == JobEnd::Finished) {
        m_progress->setValue(1000);
        m_status->setText(tr("Done"));
        emit profiled();
    } else if (how == JobEnd::Cancelled) {
        m_status->setText(tr("Cancelled"));
        emit profileCancelled();
    }
    updateButtons();
}

void SaturationPanel::updateButtons() {
    const bool running = m_job != 0;
    m_profileButton->setEnabled(!running && m_model != nullptr);
    m_cancelButton->setEnabled(running);
    m_saveButton->setEnabled(m_profile.has_value());
}

}  // namespace gkq::ui
