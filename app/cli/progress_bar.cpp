#include "cli/progress_bar.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>

namespace gkq::cli {

namespace {

std::atomic<bool> g_interrupted{false};
void on_sigint(int) {
    g_interrupted.store(true);
}

using Handler = void (*)(int);
Handler g_previous = SIG_DFL;

}  // namespace

ProgressBar::ProgressBar(std::string label) : m_label(std::move(label)), m_enabled(isatty(2) != 0) {
    g_interrupted.store(false);
    g_previous = std::signal(SIGINT, on_sigint);
}

ProgressBar::~ProgressBar() {
    clear();
    std::signal(SIGINT, g_previous == SIG_ERR ? SIG_DFL : g_previous);
}

void ProgressBar::clear() {
    if (m_drawn) std::fputs("\r\033[K", stderr);
    m_drawn = false;
}

ProgressFn ProgressBar::callback() {
    return [this](double fraction, std::string_view what) {
        if (g_interrupted.load()) return false;
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

}  // namespace gkq::cli
