#include "jobs/stall_meter.h"

#include <algorithm>

namespace gkq::ui {

StallMeter::StallMeter(QObject* parent) : QObject(parent) {
    m_timer.setTimerType(Qt::PreciseTimer);
    m_timer.setInterval(kIntervalMs);
    connect(&m_timer, &QTimer::timeout, this, &StallMeter::tick);
}

void StallMeter::start() {
    m_worstMs = 0.0;
    m_ticks = 0;
    m_clock.start();
    m_lastNs = 0;
    m_timer.start();
}

void StallMeter::stop() {
    m_timer.stop();
}

void StallMeter::tick() {
    const qint64 now = m_clock.nsecsElapsed();
    const double lateMs = static_cast<double>(now - m_lastNs) / 1e6 - kIntervalMs;
    m_worstMs = std::max(m_worstMs, lateMs);
    m_lastNs = now;
    ++m_ticks;
}

}  // namespace gkq::ui
