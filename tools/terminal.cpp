// Names in the terminal tables of inspect, replay and sweep, the terminal's width, the progress line.
#include "terminal.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "fp8kit/io/printable.hpp"

namespace fp8kit::cli {

std::size_t output_width() {
    struct winsize ws {};
    if (isatty(STDOUT_FILENO) && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    if (const char* c = std::getenv("COLUMNS")) {
        char* end = nullptr;
        const long v = std::strtol(c, &end, 10);
        if (end != c && *end == '\0' && v > 0 && v < 100000) return static_cast<std::size_t>(v);
    }
    return 0;
}

bool progress_on(bool root, bool quiet, bool forced) { return root && !quiet && (forced || isatty(STDERR_FILENO)); }

Progress::Progress(bool on, std::size_t total, std::string what)
    : on_(on && total > 1), total_(total), what_(std::move(what)) {}

Progress::~Progress() { done(); }

void Progress::update(std::size_t done) {
    if (!on_) return;
    const long long now =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count();
    if (now < next_ns_ && done < total_) return;
    next_ns_ = now + 100'000'000;
    const std::size_t w = 30, bar = done * w / total_;
    std::fprintf(stderr, "\r[%s%s] %zu/%zu %s", std::string(bar, '#').c_str(), std::string(w - bar, ' ').c_str(), done,
                 total_, what_.c_str());
    std::fflush(stderr);
}

void Progress::done() {
    if (!on_) return;
    std::fprintf(stderr, "\r%s\r", std::string(60 + what_.size(), ' ').c_str());
    std::fflush(stderr);
    on_ = false;
}

}  // namespace fp8kit::cli
