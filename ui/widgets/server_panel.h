// ServerPanel: the embedded HTTP inference endpoint, in-process (gkq::Server: its own event-loop thread), on the
// current knot — start/stop on 127.0.0.1 at a chosen or any free port; its URL and the I/O backend it reports;
// live charts of requests/s, mean request latency and the weight cache's hit rate, computed from its own /metrics
// scraped every second (the panel's scrapes are left out of requests and latency); a prompt box that POSTs /infer
// and shows the answer, its token counts and timings. The server's log lines appear below. Everything shown comes
// from the server's answers; nothing is estimated.
#pragma once

#include "models/prometheus_text.h"

#include <QElapsedTimer>
#include <QJsonObject>
#include <QWidget>
#include <memory>
#include <optional>

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QNetworkAccessManager;
class QNetworkReply;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;
class QTimer;

namespace gkq {
class Server;
}

namespace gkq::ui {

class LiveSeriesChart;

class ServerPanel : public QWidget {
    Q_OBJECT
public:
    explicit ServerPanel(QWidget* parent = nullptr);
    ~ServerPanel() override;

    void setKnotPath(const QString& path);
    QString knotPath() const { return m_knotPath; }
    // A llama2.c tokenizer.bin for a knot without a vocabulary (the demo model's); empty: none.
    void setTokenizerPath(const QString& path);
    QString tokenizerPath() const;
    void setPort(int port);                  // 0: any free port
    void setIoBackend(const QString& name);  // "auto", "io_uring", "io_uring_basic", "epoll"
    void setScrapeIntervalMs(int ms);

    // Starts the server on the knot; false (statusText() says why) when it cannot bind or has no knot.
    bool start();
    // Closes everything now and joins the server's threads: the port is free when this returns.
    void stop();
    bool isRunning() const { return m_server != nullptr; }
    bool isHealthy() const { return m_healthy; }
    QString url() const { return m_url; }
    quint16 port() const;
    QString backendText() const;
    QString statusText() const;

    struct Answer {
        QString text;
        qint64 promptTokens = 0;
        qint64 completionTokens = 0;
        QString finishReason;
        QJsonObject timings;  // queue_ms, weights_ms, prompt_ms, generate_ms, total_ms, tokens_per_second
        QJsonObject cache;    // lookups, hits, misses, model_rebuilt
    };
    void setPrompt(const QString& prompt);
    void setMaxTokens(int n);
    void setTemperature(double t);  // 0: greedy
    void setSeed(qint64 seed);      // < 0: none (the server picks one)
    // The /infer body the prompt box sends.
    QByteArray inferBody() const;
    void sendPrompt();
    const std::optional<Answer>& lastAnswer() const { return m_answer; }
    QString answerDetailsText() const;
    QString answerViewText() const;  // what the answer box shows

    int scrapeCount() const { return m_scrapes; }
    const std::optional<ServerScrape>& lastScrape() const { return m_lastScrape; }
    const std::optional<ServerRates>& lastRates() const { return m_lastRates; }
    LiveSeriesChart* requestsChart() const { return m_requestsChart; }
    LiveSeriesChart* latencyChart() const { return m_latencyChart; }
    LiveSeriesChart* hitRateChart() const { return m_hitChart; }
    QPushButton* startButton() const { return m_startButton; }
    QPushButton* stopButton() const { return m_stopButton; }
    QPushButton* sendButton() const { return m_sendButton; }

signals:
    void started(const QString& url);
    void stopped();
    void healthy();
    void metricsScraped();
    void answerReceived();
    void errorOccurred(const QString& message);

private:
    void pollHealth();
    void scrape();
    void onMetrics(const QByteArray& body);
    void onAnswer(QNetworkReply* reply);
    void appendLog(const QString& line);
    void updateButtons();

    std::shared_ptr<Server> m_server;  // shared: its deleter is bound where it is made (a build without the server)
    quint64 m_generation = 0;          // replies of an earlier server are ignored
    QString m_knotPath;
    QString m_url;
    bool m_healthy = false;
    QNetworkAccessManager* m_net = nullptr;
    QTimer* m_healthTimer = nullptr;
    QTimer* m_scrapeTimer = nullptr;
    QElapsedTimer m_clock;  // since start: the charts' x axis
    double m_lastScrapeAt = 0.0;
    std::optional<ServerScrape> m_lastScrape;
    std::optional<ServerRates> m_lastRates;
    std::optional<Answer> m_answer;
    int m_scrapes = 0;
    bool m_scrapeInFlight = false;

    QLabel* m_knotLabel = nullptr;
    QLineEdit* m_tokenizer = nullptr;
    QSpinBox* m_port = nullptr;
    QComboBox* m_ioBackend = nullptr;
    QPushButton* m_startButton = nullptr;
    QPushButton* m_stopButton = nullptr;
    QLabel* m_urlLabel = nullptr;
    QLabel* m_backendLabel = nullptr;
    QLabel* m_status = nullptr;
    QLabel* m_totals = nullptr;
    LiveSeriesChart* m_requestsChart = nullptr;
    LiveSeriesChart* m_latencyChart = nullptr;
    LiveSeriesChart* m_hitChart = nullptr;
    QLineEdit* m_prompt = nullptr;
    QSpinBox* m_maxTokens = nullptr;
    QDoubleSpinBox* m_temperature = nullptr;
    QSpinBox* m_seed = nullptr;
    QPushButton* m_sendButton = nullptr;
    QPlainTextEdit* m_answerView = nullptr;
    QLabel* m_answerDetails = nullptr;
    QPlainTextEdit* m_log = nullptr;
};

}  // namespace gkq::ui
