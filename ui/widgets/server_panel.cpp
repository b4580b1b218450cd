#include "widgets/server_panel.h"

#include "charts/live_series_chart.h"
#include "gkq/server.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QJsonDocument>
#include <QLabel>
#include <QLineEdit>
#include <QNetworkAccessManager>
#include <QNetworkProxy>
#include <QNetworkReply>
#include <QNetworkRequest>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTimer>
#include <QVBoxLayout>
#include <limits>

namespace gkq::ui {

namespace {
constexpr int kHealthPollMs = 200;  // until the weights are loaded
constexpr int kScrapeMs = 1000;     // /metrics
constexpr int kRequestTimeoutMs = 10000;
constexpr int kInferTimeoutMs = 600000;  // a long generation on a big model
constexpr int kMaxLogLines = 2000;

QString ms(const QJsonObject& o, const char* key) {
    return QString::number(o.value(QLatin1String(key)).toDouble(), 'f', 2);
}
}  // namespace

ServerPanel::ServerPanel(QWidget* parent) : QWidget(parent) {
    m_net = new QNetworkAccessManager(this);
    m_net->setTransferTimeout(kRequestTimeoutMs);
    m_net->setProxy(QNetworkProxy::NoProxy);  // the server is always on 127.0.0.1
    m_healthTimer = new QTimer(this);
    m_healthTimer->setInterval(kHealthPollMs);
    connect(m_healthTimer, &QTimer::timeout, this, &ServerPanel::pollHealth);
    m_scrapeTimer = new QTimer(this);
    m_scrapeTimer->setInterval(kScrapeMs);
    connect(m_scrapeTimer, &QTimer::timeout, this, &ServerPanel::scrape);

    m_knotLabel = new QLabel(tr("No knot: quantize a model in the Quantize tab first."), this);
    m_knotLabel->setWordWrap(true);
    m_port = new QSpinBox(this);
    m_port->setRange(0, 65535);
    m_port->setValue(0);
    m_port->setSpecialValueText(tr("any free port"));
    m_port->setToolTip(tr("TCP port on 127.0.0.1 (gkq serve --port); 0: a free port the system picks"));
    m_ioBackend = new QComboBox(this);
    for (const char* name : {"auto", "io_uring", "io_uring_basic", "epoll"}) m_ioBackend->addItem(QLatin1String(name));
    m_ioBackend->setToolTip(
        tr("The server's event loop (gkq serve --io-backend): auto tries io_uring and steps down to epoll where the "
           "kernel refuses it; io_uring refuses to start instead; io_uring_basic uses single-shot operations only"));
    m_startButton = new QPushButton(tr("Start server"), this);
    m_stopButton = new QPushButton(tr("Stop"), this);
    connect(m_startButton, &QPushButton::clicked, this, [this] { start(); });
    connect(m_stopButton, &QPushButton::clicked, this, &ServerPanel::stop);
    m_urlLabel = new QLabel(this);
    m_urlLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_backendLabel = new QLabel(this);
    m_backendLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_status = new QLabel(tr("Stopped"), this);
    m_status->setWordWrap(true);
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_totals = new QLabel(this);
    m_totals->setWordWrap(true);
    m_totals->setTextInteractionFlags(Qt::TextSelectableByMouse);

    m_tokenizer = new QLineEdit(this);
    m_tokenizer->setPlaceholderText(tr("tokenizer.bin, for a knot without a vocabulary"));
    auto* form = new QFormLayout();
    form->addRow(tr("Tokenizer"), m_tokenizer);
    form->addRow(tr("Port (127.0.0.1)"), m_port);
    form->addRow(tr("I/O backend"), m_ioBackend);
    form->addRow(tr("URL"), m_urlLabel);
    form->addRow(tr("Backend in use"), m_backendLabel);
    form->addRow(tr("State"), m_status);
    auto* buttons = new QHBoxLayout();
    buttons->addWidget(m_startButton);
    buttons->addWidget(m_stopButton);
    buttons->addStretch(1);

    m_requestsChart = new LiveSeriesChart(tr("Requests/s (without /metrics scrapes)"), tr("requests/s"), this);
    m_latencyChart = new LiveSeriesChart(tr("Mean request latency"), tr("ms"), this);
    m_hitChart = new LiveSeriesChart(tr("Weight cache hit rate"), tr("%"), this);
    m_hitChart->setUpperBound(100.0);
    auto* charts = new QHBoxLayout();
    charts->addWidget(m_requestsChart);
    charts->addWidget(m_latencyChart);
    charts->addWidget(m_hitChart);

    m_prompt = new QLineEdit(tr("Once upon a time"), this);
    m_prompt->setToolTip(tr("The prompt Send posts to the server's /infer (Enter sends it)"));
    m_maxTokens = new QSpinBox(this);
    m_maxTokens->setRange(1, 4096);
    m_maxTokens->setValue(32);
    m_maxTokens->setToolTip(tr("Tokens to generate at most (max_tokens of /infer)"));
    m_temperature = new QDoubleSpinBox(this);
    m_temperature->setRange(0.0, 2.0);
    m_temperature->setSingleStep(0.1);
    m_temperature->setValue(0.0);
    m_temperature->setToolTip(tr("Sampling temperature (temperature of /infer); 0: greedy, the most likely token"));
    m_seed = new QSpinBox(this);
    m_seed->setRange(-1, std::numeric_limits<int>::max());
    m_seed->setValue(-1);
    m_seed->setSpecialValueText(tr("server's choice"));
    m_seed->setToolTip(
        tr("The sampler's seed (seed of /infer), for a repeatable answer; -1: the server picks one "
           "and reports it"));
    m_sendButton = new QPushButton(tr("Send"), this);
    connect(m_sendButton, &QPushButton::clicked, this, &ServerPanel::sendPrompt);
    connect(m_prompt, &QLineEdit::returnPressed, this, &ServerPanel::sendPrompt);
    auto* promptRow = new QHBoxLayout();
    promptRow->addWidget(new QLabel(tr("Prompt"), this));
    promptRow->addWidget(m_prompt, 1);
    promptRow->addWidget(new QLabel(tr("max tokens"), this));
    promptRow->addWidget(m_maxTokens);
    promptRow->addWidget(new QLabel(tr("temperature"), this));
    promptRow->addWidget(m_temperature);
    promptRow->addWidget(new QLabel(tr("seed"), this));
    promptRow->addWidget(m_seed);
    promptRow->addWidget(m_sendButton);
    m_answerView = new QPlainTextEdit(this);
    m_answerView->setReadOnly(true);
    m_answerView->setPlaceholderText(tr("The answer of POST /infer"));
    m_answerDetails = new QLabel(this);
    m_answerDetails->setWordWrap(true);
    m_answerDetails->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_log = new QPlainTextEdit(this);
    m_log->setReadOnly(true);
    m_log->setMaximumBlockCount(kMaxLogLines);
    m_log->setPlaceholderText(tr("Server log"));

    auto* layout = new QVBoxLayout(this);
    layout->addWidget(m_knotLabel);
    layout->addLayout(form);
    layout->addLayout(buttons);
    layout->addLayout(charts, 2);
    layout->addWidget(m_totals);
    layout->addLayout(promptRow);
    layout->addWidget(m_answerView, 1);
    layout->addWidget(m_answerDetails);
    layout->addWidget(m_log, 1);
    updateButtons();
}

ServerPanel::~ServerPanel() {
    stop();
}

void ServerPanel::setKnotPath(const QString& path) {
    m_knotPath = path;
    m_knotLabel->setText(path.isEmpty() ? tr("No knot.") : tr("Knot: %1").arg(path));
    updateButtons();
}

void ServerPanel::setTokenizerPath(const QString& path) {
    m_tokenizer->setText(path);
}
QString ServerPanel::tokenizerPath() const {
    return m_tokenizer->text().trimmed();
}
void ServerPanel::setPort(int port) {
    m_port->setValue(port);
}
void ServerPanel::setIoBackend(const QString& name) {
    m_ioBackend->setCurrentText(name);
}
void ServerPanel::setScrapeIntervalMs(int ms) {
    m_scrapeTimer->setInterval(ms);
}
quint16 ServerPanel::port() const {
#ifdef GKQ_WITH_SERVER
    return m_server ? m_server->port() : 0;
#else
    return 0;
#endif
}
QString ServerPanel::backendText() const {
    return m_backendLabel->text();
}
QString ServerPanel::statusText() const {
    return m_status->text();
}
void ServerPanel::setPrompt(const QString& prompt) {
    m_prompt->setText(prompt);
}
void ServerPanel::setMaxTokens(int n) {
    m_maxTokens->setValue(n);
}
void ServerPanel::setTemperature(double t) {
    m_temperature->setValue(t);
}
void ServerPanel::setSeed(qint64 seed) {
    m_seed->setValue(static_cast<int>(seed));
}

bool ServerPanel::start() {
    if (m_server) return true;
    if (m_knotPath.isEmpty()) {
        m_status->setText(tr("No knot to serve"));
        return false;
    }
#ifndef GKQ_WITH_SERVER
    m_status->setText(tr("This build has no HTTP server (GKQ_WITH_SERVER=OFF)"));
    return false;
#else
    ServerConfig c;
    c.host = "127.0.0.1";
    c.port = static_cast<uint16_t>(m_port->value());
    c.weights_path = m_knotPath.toStdString();
    c.tokenizer_path = tokenizerPath().toStdString();
    auto io = parse_io_backend(m_ioBackend->currentText().toStdString());
    if (!io) {
        m_status->setText(QString::fromStdString(io.message()));
        return false;
    }
    c.io_backend = *io;
    // The server's threads log; the lines are shown on the GUI thread. stop() joins them before this goes away.
    auto server = Server::start(c, [this](std::string_view line) {
        const QString text = QString::fromUtf8(line.data(), static_cast<qsizetype>(line.size()));
        QMetaObject::invokeMethod(
            this, [this, text] { appendLog(text); }, Qt::QueuedConnection);
    });
    if (!server) {
        const QString message = QString::fromStdString(server.message());
        m_status->setText(message);
        emit errorOccurred(message);
        return false;
    }
    m_server = std::move(server).value();
    ++m_generation;
    m_url = QString::fromStdString(m_server->url());
    m_urlLabel->setText(m_url);
    m_backendLabel->setText(QString::fromStdString(m_server->backend_detail()));
#endif
    m_status->setText(tr("Loading weights..."));
    m_healthy = false;
    m_lastScrape.reset();
    m_lastRates.reset();
    m_scrapes = 0;
    m_scrapeInFlight = false;
    m_requestsChart->clear();
    m_latencyChart->clear();
    m_hitChart->clear();
    m_clock.start();
    m_healthTimer->start();
    m_scrapeTimer->start();
    pollHealth();
    scrape();
    updateButtons();
    emit started(m_url);
    return true;
}

void ServerPanel::stop() {
    if (!m_server) return;
    m_healthTimer->stop();
    m_scrapeTimer->stop();
    ++m_generation;
    for (QNetworkReply* r : m_net->findChildren<QNetworkReply*>()) r->abort();
#ifdef GKQ_WITH_SERVER
    m_server->stop();
#endif
    m_server.reset();  // joins the loop and the workers: the socket is closed now
    m_healthy = false;
    m_scrapeInFlight = false;
    m_status->setText(tr("Stopped"));
    m_urlLabel->clear();
    updateButtons();
    emit stopped();
}

void ServerPanel::pollHealth() {
    if (!m_server || m_healthy) return;
    const quint64 generation = m_generation;
    QNetworkReply* reply = m_net->get(QNetworkRequest(QUrl(m_url + QStringLiteral("/health"))));
    connect(reply, &QNetworkReply::finished, this, [this, reply, generation] {
        reply->deleteLater();
        if (generation != m_generation || m_healthy) return;
        const int code = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
        const QJsonObject o = QJsonDocument::fromJson(reply->readAll()).object();
        const QString status = o.value(QStringLiteral("status")).toString();
        if (code == 200) {
            m_healthy = true;
            m_healthTimer->stop();
            m_status->setText(
                tr("Ready: %1 weights loaded").arg(o.value(QStringLiteral("weights_loaded")).toInteger()));
            updateButtons();
            emit healthy();
        } else if (status == QLatin1String("failed")) {
            m_healthTimer->stop();
#ifdef GKQ_WITH_SERVER
            const QString message =
                tr("Loading failed: %1").arg(QString::fromStdString(m_server->load_status().message()));
#else
            const QString message = tr("Loading failed");
#endif
            m_status->setText(message);
            emit errorOccurred(message);
        } else {
            m_status->setText(code ? tr("Loading weights... (/health: %1)").arg(code) : reply->errorString());
        }
    });
}

void ServerPanel::scrape() {
    if (!m_server || m_scrapeInFlight) return;
    m_scrapeInFlight = true;
    const quint64 generation = m_generation;
    QNetworkReply* reply = m_net->get(QNetworkRequest(QUrl(m_url + QStringLiteral("/metrics"))));
    connect(reply, &QNetworkReply::finished, this, [this, reply, generation] {
        reply->deleteLater();
        if (generation != m_generation) return;
        m_scrapeInFlight = false;
        if (reply->error() != QNetworkReply::NoError) {
            m_totals->setText(tr("/metrics: %1").arg(reply->errorString()));
            return;
        }
        onMetrics(reply->readAll());
    });
}

void ServerPanel::onMetrics(const QByteArray& body) {
    auto parsed = parse_prometheus_text(std::string_view(body.constData(), static_cast<size_t>(body.size())));
    if (!parsed) {
        m_totals->setText(tr("/metrics: %1").arg(QString::fromStdString(parsed.message())));
        return;
    }
    const double now = static_cast<double>(m_clock.nsecsElapsed()) / 1e9;
    const ServerScrape current = summarize_scrape(*parsed);
    if (m_lastScrape) {
        const ServerRates r = rates_between(*m_lastScrape, current, now - m_lastScrapeAt);
        m_requestsChart->append(now, r.requests_per_second);
        if (r.mean_latency_seconds)
            m_latencyChart->append(now, 1e3 * *r.mean_latency_seconds);
        else
            m_latencyChart->appendGap(now);
        if (r.cache_hit_rate)
            m_hitChart->append(now, 100.0 * *r.cache_hit_rate);
        else
            m_hitChart->appendGap(now);
        m_lastRates = r;
    }
    if (!current.backend.empty())
        m_backendLabel->setText(
            QString::fromStdString(current.backend_detail.empty() ? current.backend : current.backend_detail));
    QString totals = tr("Since start: %1 requests (without /metrics), %2 completion tokens")
                         .arg(current.requests, 0, 'f', 0)
                         .arg(current.tokens_completion, 0, 'f', 0);
    if (current.latency_count > 0)
        totals += tr(", mean latency %1 ms").arg(1e3 * current.latency_sum / current.latency_count, 0, 'f', 3);
    if (current.cache_lookups > 0)
        totals += tr(", cache %1 hits of %2 lookups (%3 %)")
                      .arg(current.cache_hits, 0, 'f', 0)
                      .arg(current.cache_lookups, 0, 'f', 0)
                      .arg(100.0 * current.cache_hits / current.cache_lookups, 0, 'f', 2);
    if (m_lastRates) {
        totals += tr("; last second: %1 requests/s").arg(m_lastRates->requests_per_second, 0, 'f', 2);
        if (m_lastRates->p99_latency_bound_seconds)
            totals += tr(", p99 latency ≤ %1 ms (histogram bucket)").arg(1e3 * *m_lastRates->p99_latency_bound_seconds);
    }
    m_totals->setText(totals);
    m_lastScrape = current;
    m_lastScrapeAt = now;
    ++m_scrapes;
    emit metricsScraped();
}

QByteArray ServerPanel::inferBody() const {
    QJsonObject o;
    o.insert(QStringLiteral("prompt"), m_prompt->text());
    o.insert(QStringLiteral("max_tokens"), m_maxTokens->value());
    o.insert(QStringLiteral("temperature"), m_temperature->value());
    if (m_seed->value() >= 0) o.insert(QStringLiteral("seed"), m_seed->value());
    return QJsonDocument(o).toJson(QJsonDocument::Compact);
}

void ServerPanel::sendPrompt() {
    if (!m_server) return;
    QNetworkRequest request(QUrl(m_url + QStringLiteral("/infer")));
    request.setHeader(QNetworkRequest::ContentTypeHeader, QStringLiteral("application/json"));
    request.setTransferTimeout(kInferTimeoutMs);
    const quint64 generation = m_generation;
    QNetworkReply* reply = m_net->post(request, inferBody());
    m_sendButton->setEnabled(false);
    m_answerDetails->setText(tr("Generating..."));
    connect(reply, &QNetworkReply::finished, this, [this, reply, generation] {
        reply->deleteLater();
        if (generation != m_generation) return;
        onAnswer(reply);
        updateButtons();
    });
}

void ServerPanel::onAnswer(QNetworkReply* reply) {
    const int code = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
    const QJsonObject o = QJsonDocument::fromJson(reply->readAll()).object();
    if (code != 200) {
        QString message = o.value(QStringLiteral("error")).toObject().value(QStringLiteral("message")).toString();
        if (message.isEmpty()) message = reply->errorString();
        message = tr("/infer answered %1: %2").arg(code).arg(message);
        m_answerDetails->setText(message);
        emit errorOccurred(message);
        return;
    }
    Answer a;
    a.text = o.value(QStringLiteral("text")).toString();
    a.promptTokens = o.value(QStringLiteral("prompt_tokens")).toInteger();
    a.completionTokens = o.value(QStringLiteral("completion_tokens")).toInteger();
    a.finishReason = o.value(QStringLiteral("finish_reason")).toString();
    a.timings = o.value(QStringLiteral("timings")).toObject();
    a.cache = o.value(QStringLiteral("cache")).toObject();
    m_answerView->setPlainText(a.text);
    m_answerDetails->setText(
        tr("%1 prompt tokens, %2 completion tokens (%3); queue %4 ms, weights %5 ms, prompt %6 ms, generation %7 ms, "
           "total %8 ms, %9 tokens/s; cache %10 lookups, %11 hits%12")
            .arg(a.promptTokens)
            .arg(a.completionTokens)
            .arg(a.finishReason, ms(a.timings, "queue_ms"), ms(a.timings, "weights_ms"), ms(a.timings, "prompt_ms"),
                 ms(a.timings, "generate_ms"), ms(a.timings, "total_ms"))
            .arg(a.timings.value(QStringLiteral("tokens_per_second")).toDouble(), 0, 'f', 1)
            .arg(a.cache.value(QStringLiteral("lookups")).toInteger())
            .arg(a.cache.value(QStringLiteral("hits")).toInteger())
            .arg(a.cache.value(QStringLiteral("model_rebuilt")).toBool() ? tr(", model rebuilt") : QString()));
    m_answer = std::move(a);
    emit answerReceived();
}

QString ServerPanel::answerDetailsText() const {
    return m_answerDetails->text();
}
QString ServerPanel::answerViewText() const {
    return m_answerView->toPlainText();
}

void ServerPanel::appendLog(const QString& line) {
    m_log->appendPlainText(line);
}

void ServerPanel::updateButtons() {
    m_startButton->setEnabled(!m_server && !m_knotPath.isEmpty());
    m_stopButton->setEnabled(m_server != nullptr);
    m_sendButton->setEnabled(m_server != nullptr && m_healthy);
    m_port->setEnabled(!m_server);
    m_ioBackend->setEnabled(!m_server);
    m_tokenizer->setEnabled(!m_server);
}

}  // namespace gkq::ui
