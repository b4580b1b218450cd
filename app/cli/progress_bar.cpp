#include "cli/progress_bar.h"

#include "cli/args.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>

namespace gkq::cli {

namespace {

std::atomic<int> g_signal{0};  // the first signal received while a ProgressBar lived

void on_signal(int sig) {
    int expected = 0;
    if (!g_signal.compare_exchange_strong(expected, sig)) {
        // A second signal: the user (or the supervisor) will not wait for the cancellation.
        std::signal(sig, SIG_DFL);
        std::raise(sig);
    }
}

struct sigaction g_previous_int {};
struct sigaction g_previous_term {};

}  // namespace

ProgressBar::ProgressBar(std::string label) : m_label(std::move(label)), m_enabled(isatty(2) != 0) {
    g_signal.store(0);
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &g_previous_int);
    sigaction(SIGTERM, &sa, &g_previous_term);
}

ProgressBar::~ProgressBar() {
    clear();
    sigaction(SIGINT, &g_previous_int, nullptr);
    sigaction(SIGTERM, &g_previous_term, nullptr);
}

void ProgressBar::clear() {
    if (m_drawn) std::fputs("\r\033[K", stderr);
    m_drawn = false;
}

ProgressFn ProgressBar::callback() {
    return [this](double fraction, std::string_view what) {
        if (g_signal.load() != 0) return false;
        if (!m_enabled) return true;
        const int percent = static_cast<int>(fraction * 100.0 + 1e-9);
        constexpr int kWidth = 30;
        const int filled = static_cast<int>(fraction * kWidth);
        std::string bar(static_cast<size_t>(kWidth), ' ');
        for (int i = 0; i < filled && i < kWidth; ++i) bar[static_cast<size_t>(i)] = '#';
        std::string item(what.substr(0, 48));
        std::fprintf(stderr, "\r\033[K%s [%s] %3d%% %s", m_label.c_str(), bar.c_str(), percent, item.c_str());
        std::fflush(stderr);
        m_drawn = true;
        m_last_percent = percent;
        return true;
    };
}

int interrupt_signal() {
    return g_signal.load();
}

std::string interrupted_text() {
    switch (g_signal.load()) {
        case SIGTERM: return "interrupted by SIGTERM";
        case SIGINT: return "interrupted by SIGINT";
        default: return "cancelled";
    }
}

int exit_code_after_signals(int code) {
    const int sig = g_signal.load();
    return code == kExitCancelled && sig != 0 ? 128 + sig : code;
}

}  // namespace gkq::cli
