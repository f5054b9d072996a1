// Name shortening for the terminal tables of inspect, replay and sweep.
#include "terminal.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cctype>
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

namespace {

bool separator(char c) { return c == '.' || c == '/' || c == '_' || c == '-' || c == ':'; }

// [begin, end) of the first separator-delimited component made of digits (a layer index), with
// the component before it ("layer.3", "layers_12", "h.5"); npos when the name has none.
std::pair<std::size_t, std::size_t> layer_index(const std::string& s) {
    std::size_t start = 0, prev = std::string::npos;
    for (std::size_t i = 0; i <= s.size(); ++i) {
        if (i < s.size() && !separator(s[i])) continue;
        bool digits = i > start;
        for (std::size_t k = start; k < i && digits; ++k) digits = std::isdigit(static_cast<unsigned char>(s[k])) != 0;
        if (digits) return {prev == std::string::npos ? start : prev, i};
        prev = start;
        start = i + 1;
    }
    return {std::string::npos, std::string::npos};
}

}  // namespace

std::string fit_name(std::string_view raw, std::size_t width) {
    const std::string s = io::printable(raw);
    if (width == 0 || s.size() <= width) return s;
    if (width <= 3) return s.substr(s.size() - width);
    const auto [lb, le] = layer_index(s);
    // "...layer.3...tail" when the index is not already in the tail we can keep.
    if (lb != std::string::npos) {
        const std::string idx = (lb == 0 ? "" : "...") + s.substr(lb, le - lb);
        if (idx.size() + 3 + 8 <= width) {  // room for at least 8 characters of tail
            const std::size_t keep = width - idx.size() - 3;
            if (s.size() - keep > le) return idx + "..." + s.substr(s.size() - keep);
        }
    }
    return "..." + s.substr(s.size() - (width - 3));
}

bool progress_on(bool root, bool quiet, bool forced) { return root && !quiet && (forced || isatty(STDERR_FILENO)); }

Progress::Progress(bool on, std::size_t total, std::string what) : on_(on && total > 1), total_(total), what_(std::move(what)) {}

Progress::~Progress() { done(); }

void Progress::update(std::size_t done) {
    if (!on_) return;
    const long long now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::steady_clock::now().time_since_epoch()).count();
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
