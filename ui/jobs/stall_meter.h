// StallMeter: measures how long the GUI event loop goes without running a timer — a 10 ms precise QTimer whose
// lateness (time since the previous tick minus 10 ms) is the stall; worstStallMs() is the largest seen.
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <QTimer>

namespace gkq::ui {

class StallMeter : public QObject {
    Q_OBJECT
public:
    static constexpr int kIntervalMs = 10;

    explicit StallMeter(QObject* parent = nullptr);

    void start();
    void stop();
    double worstStallMs() const { return m_worstMs; }
    qint64 ticks() const { return m_ticks; }

private:
    void tick();

    QTimer m_timer;
    QElapsedTimer m_clock;
    qint64 m_lastNs = 0;
    double m_worstMs = 0.0;
    qint64 m_ticks = 0;
};

}  // namespace gkq::ui
