// Amax trace readers (CSV and nvidia-dlfw-inspect logs).
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <map>
#include <numeric>
#include <algorithm>

#include <fmt/format.h>

#include "fp8kit/io/trace.hpp"
#include "fp8kit/io/printable.hpp"
#include "fp8kit/io/gate.hpp"
#include "fp8kit/io/te_debug.hpp"
#include "fp8kit/numerics/roles.hpp"

namespace fp8kit::trace {
namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

std::string lower(std::string_view s) {
    std::string r(s);
    for (auto& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return r;
}

[[noreturn]] void fail(const std::string& file, std::size_t line, const std::string& msg) {
    throw TraceError(fmt::format("{}:{}: {}", file, line, msg));
}

// The whole field must be a number: strtof rounds correctly to float32 (no double rounding).
float parse_amax(std::string_view field, const std::string& file, std::size_t line) {
    const std::string s(trim(field));
    if (s.empty()) fail(file, line, "empty amax value");
    errno = 0;
    char* end = nullptr;
    const float v = std::strtof(s.c_str(), &end);
    if (end != s.c_str() + s.size()) fail(file, line, fmt::format("amax '{}' is not a number", io::quoted(s)));
    // NaN before the sign: printf writes a NaN with its sign bit set as "-nan" (glibc on x86),
    // and a NaN is documented as accepted (docs/replay.md).
    if (std::isnan(v)) return std::nanf("");  // -nan and nan(...) alike: one NaN, sign dropped
    if (std::signbit(v) && !(v == 0))
        fail(file, line, fmt::format("amax '{}' is negative (an amax is a maximum of |x|)", io::quoted(s)));
    return std::fabs(v);  // -0 -> +0
}

std::int64_t parse_step(std::string_view field, const std::string& file, std::size_t line, const char* what) {
    const std::string s(trim(field));
    if (s.empty()) fail(file, line, fmt::format("empty {}", what));
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (end != s.c_str() + s.size() || errno == ERANGE)
        fail(file, line, fmt::format("{} '{}' is not an integer", what, io::quoted(s)));
    if (v < 0) fail(file, line, fmt::format("{} '{}' is negative", what, io::quoted(s)));
    return v;
}

struct Builder {
    std::string file;
    std::vector<Series> series;
    std::map<std::string, std::size_t> index;

    void add(const std::string& tensor, std::int64_t step, float amax, std::size_t line) {
        auto it = index.find(tensor);
        if (it == index.end()) {
            it = index.emplace(tensor, series.size()).first;
            Series s;
            s.tensor = tensor;
            s.role = recipe_slot(guess_role(tensor));
            series.push_back(std::move(s));
        }
        auto& s = series[it->second];
        s.steps.push_back(step);
        s.amax.push_back(amax);
        s.lines.push_back(line);
    }

    // Sorted by step (logs of several ranks/runs may interleave); a repeated step is ambiguous.
    Trace finish() {
        for (auto& s : series) {
            std::vector<std::size_t> order(s.steps.size());
            std::iota(order.begin(), order.end(), std::size_t{0});
            std::stable_sort(order.begin(), order.end(),
                             [&](std::size_t a, std::size_t b) { return s.steps[a] < s.steps[b]; });
            Series o;
            o.tensor = s.tensor;
            o.role = s.role;
            for (std::size_t k = 0; k < order.size(); ++k) {
                const std::size_t i = order[k];
                if (k > 0 && s.steps[i] == o.steps.back())
                    fail(file, std::max(s.lines[i], o.lines.back()),
                         fmt::format("tensor '{}' step {} appears twice (lines {} and {})", io::quoted(s.tensor),
                                     s.steps[i], std::min(s.lines[i], o.lines.back()),
                                     std::max(s.lines[i], o.lines.back())));
                o.steps.push_back(s.steps[i]);
                o.amax.push_back(s.amax[i]);
                o.lines.push_back(s.lines[i]);
            }
            s = std::move(o);
        }
        return Trace{file, std::move(series), {}, {}};
    }
};

// Into `out` (reused across lines: no allocation per row).
void split_commas(std::string_view line, std::vector<std::string_view>& out) {
    out.clear();
    std::size_t start = 0;
    for (;;) {
        const auto p = line.find(',', start);
        out.push_back(line.substr(start, p == std::string_view::npos ? std::string_view::npos : p - start));
        if (p == std::string_view::npos) break;
        start = p + 1;
    }
}

std::vector<std::string_view> split_commas(std::string_view line) {
    std::vector<std::string_view> out;
    split_commas(line, out);
    return out;
}

// A trace is text of short lines; a longer line is not a trace (a device, a binary file).
constexpr std::size_t kMaxLine = 1 << 20;

// Lines of a regular file, each bounded by kMaxLine. A read error or a line too long throws;
// only the real end of the file ends the loop (never a failed allocation or a short read).
class LineReader {
public:
    explicit LineReader(const std::string& path) : path_(path) {
        try {
            f_.reset(io::open_input_stream(path).release());  // regular files only (io/gate.hpp)
        } catch (const io::InputError& e) {
            throw TraceError(e.what());
        }
    }
    // Read in blocks of kBlock bytes, lines cut with memchr (a getc per byte was a third of the time
    // `watch` spends on a 10^8-row trace).
    bool next(std::string& line) {
        line.clear();
        ++lineno_;
        for (;;) {
            if (pos_ == len_) {
                if (eof_) return !line.empty();
                buf_.resize(kBlock);
                len_ = std::fread(buf_.data(), 1, buf_.size(), f_.get());
                pos_ = 0;
                if (len_ < buf_.size()) {
                    if (std::ferror(f_.get()))
                        fail(path_, lineno_, fmt::format("read error: {}", std::strerror(errno)));
                    eof_ = true;
                }
                continue;
            }
            const char* b = buf_.data() + pos_;
            const void* nl = std::memchr(b, '\n', len_ - pos_);
            const std::size_t take = nl ? static_cast<std::size_t>(static_cast<const char*>(nl) - b) : len_ - pos_;
            if (line.size() + take > kMaxLine)
                fail(path_, lineno_, fmt::format("line longer than {} bytes: not a trace", kMaxLine));
            line.append(b, take);
            pos_ += take;
            if (nl) {
                ++pos_;
                return true;
            }
        }
    }
    std::size_t lineno() const { return lineno_; }

private:
    struct Close {
        void operator()(std::FILE* f) const { std::fclose(f); }
    };
    std::string path_;
    std::unique_ptr<std::FILE, Close> f_;
    std::size_t lineno_ = 0;
    static constexpr std::size_t kBlock = 1 << 20;
    std::vector<char> buf_;
    std::size_t pos_ = 0, len_ = 0;
    bool eof_ = false;
};

// Running out of memory is an error that names the line, never an end of file.
template <class F>
Trace out_of_memory_is_an_error(const std::string& path, F&& read) {
    try {
        return read();
    } catch (const std::bad_alloc&) {
        throw TraceError(fmt::format("{}: out of memory while reading the trace", path));
    }
}

void strip_cr(std::string& line) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
}

bool csv_header(std::string_view line, int& step_col, int& amax_col, int& tensor_col) {
    step_col = amax_col = tensor_col = -1;
    const auto f = split_commas(line);
    for (std::size_t i = 0; i < f.size(); ++i) {
        const std::string n = lower(trim(f[i]));
        int* col = n == "step" ? &step_col : n == "amax" ? &amax_col : n == "tensor" ? &tensor_col : nullptr;
        if (col) {
            if (*col >= 0) return false;
            *col = static_cast<int>(i);
        }
    }
    return step_col >= 0 && amax_col >= 0;
}

}  // namespace

namespace {

// The rows of a CSV trace in file order, each given to add(tensor, step, amax, line); returns
// the number of data rows. Every check but the per-series ones (Builder::finish) is here.
template <class Add>
std::size_t csv_rows(const std::string& path, Add&& add) {
    LineReader in(path);
    std::string line;
    std::size_t lineno = 0;
    int step_col = -1, amax_col = -1, tensor_col = -1;
    bool have_header = false;
    while (in.next(line)) {
        lineno = in.lineno();
        strip_cr(line);
        if (trim(line).empty()) continue;
        if (!csv_header(line, step_col, amax_col, tensor_col)) {
            std::string missing;
            if (step_col < 0) missing += "'step'";
            if (amax_col < 0) missing += missing.empty() ? "'amax'" : " and 'amax'";
            fail(path, lineno,
                 missing.empty()
                     ? std::string("a column is named twice in the header")
                     : fmt::format("the header has no {} column (need step and amax, tensor optional; got '{}')",
                                   missing, io::quoted(line)));
        }
        have_header = true;
        break;
    }
    if (!have_header) throw TraceError(fmt::format("{}: empty file (need a header with step and amax)", path));
    const std::size_t need = static_cast<std::size_t>(std::max({step_col, amax_col, tensor_col})) + 1;
    std::size_t rows = 0;
    std::string tensor;
    std::vector<std::string_view> f;
    while (in.next(line)) {
        lineno = in.lineno();
        strip_cr(line);
        if (trim(line).empty()) continue;
        split_commas(line, f);
        if (f.size() < need) fail(path, lineno, fmt::format("{} fields, the header needs at least {}", f.size(), need));
        const std::int64_t step = parse_step(f[step_col], path, lineno, "step");
        const float amax = parse_amax(f[amax_col], path, lineno);
        tensor.clear();
        if (tensor_col >= 0) {
            tensor.assign(trim(f[tensor_col]));
            if (tensor.empty()) fail(path, lineno, "empty tensor name");
        }
        add(tensor, step, amax, lineno);
        ++rows;
    }
    if (rows == 0) throw TraceError(fmt::format("{}: no data rows after the header", path));
    return rows;
}

Trace read_csv_lines(const std::string& path) {
    Builder b{path, {}, {}};
    csv_rows(path, [&](const std::string& t, std::int64_t s, float a, std::size_t l) { b.add(t, s, a, l); });
    return b.finish();
}

// The _cur_amax rows of a dlfw-inspect log in file order (as csv_rows).
// A value written with too few significant digits (te::unreadable: TE's logger prints four
// decimals, so a small amax reads 0.0000) is not a row: skip(tensor, step, line, text) is called.
template <class Add, class Skip>
std::size_t dlfw_rows(const std::string& path, Add&& add, Skip&& skip) {
    LineReader in(path);
    std::string line;
    std::size_t lineno = 0, rows = 0;
    static constexpr std::string_view kStat = "_cur_amax";
    while (in.next(line)) {
        lineno = in.lineno();
        strip_cr(line);
        const std::string_view l(line);
        const auto p = l.find(kStat);
        if (p == std::string_view::npos) continue;
        // The name is the last token before _cur_amax: after " - " of the logger prefix.
        std::size_t start = l.rfind(" - ", p);
        start = start == std::string_view::npos ? 0 : start + 3;
        const auto ws = l.find_last_of(" \t", p);
        if (ws != std::string_view::npos && ws + 1 > start) start = ws + 1;
        const std::string tensor(trim(l.substr(start, p - start)));
        if (tensor.empty()) fail(path, lineno, "no tensor name before _cur_amax");
        const auto rest = l.substr(p + kStat.size());
        if (!rest.empty() && !std::isspace(static_cast<unsigned char>(rest.front())))
            continue;  // another stat whose name merely contains _cur_amax (e.g. _cur_amax_avg)
        const auto it = rest.find("iteration=");
        if (it == std::string_view::npos) fail(path, lineno, "_cur_amax line without iteration=");
        const auto iv = rest.substr(it + 10);
        const auto ite = iv.find_first_of(" \t");
        const std::int64_t step = parse_step(iv.substr(0, ite), path, lineno, "iteration");
        const auto vt = rest.find("value=");
        if (vt == std::string_view::npos) fail(path, lineno, "_cur_amax line without value=");
        const auto vv = rest.substr(vt + 6);
        const auto text = vv.substr(0, vv.find_first_of(" \t"));
        const float amax = parse_amax(text, path, lineno);
        ++rows;
        if (te::unreadable(text)) {
            skip(tensor, step, lineno, std::string(text));
            continue;
        }
        add(tensor, step, amax, lineno);
    }
    if (rows == 0)
        throw TraceError(
            fmt::format("{}: neither a CSV trace (header with step and amax) nor a dlfw-inspect log "
                        "(no line with _cur_amax)",
                        path));
    return rows;
}

std::string unreadable_note(const std::string& path, const std::string& tensor, std::size_t n,
                            const std::string& first) {
    return fmt::format(
        "{}: {}: {} amax value(s) left out, written with fewer than {} significant digits (TE's "
        "statistics logger prints four decimals; such a value is unreadable, not zero); the first: {}",
        path, tensor, n, te::kMinSignificant, first);
}

Trace read_dlfw_lines(const std::string& path) {
    Builder b{path, {}, {}};
    std::map<std::string, std::pair<std::size_t, std::string>> skipped;  // tensor -> (count, first line)
    dlfw_rows(
        path, [&](const std::string& t, std::int64_t s, float a, std::size_t l) { b.add(t, s, a, l); },
        [&](const std::string& t, std::int64_t s, std::size_t l, const std::string& text) {
            auto& k = skipped[t];
            if (k.first++ == 0) k.second = fmt::format("line {}, iteration {}: value={}", l, s, text);
        });
    std::vector<std::string> notes;
    for (const auto& [t, k] : skipped) notes.push_back(unreadable_note(path, t, k.first, k.second));
    if (b.series.empty() && !skipped.empty())
        throw TraceError(fmt::format("{}: every _cur_amax value is unreadable ({})", path, notes.front()));
    Trace tr = b.finish();
    tr.notes = std::move(notes);
    return tr;
}

// Which reader read_trace picks for a file: true for CSV (the first non-empty line).
bool is_csv_trace(const std::string& path) {
    LineReader in(path);
    std::string line;
    while (in.next(line)) {
        strip_cr(line);
        if (trim(line).empty()) continue;
        int s, a, t;
        if (line.find(',') != std::string::npos && line.find("_cur_amax") == std::string::npos) {
            if (csv_header(line, s, a, t)) return true;
            // A CSV without the needed columns: let read_csv say which one is missing.
            if (line.find(" - ") == std::string::npos) return true;
        }
        break;
    }
    return false;
}

}  // namespace

Trace read_csv(const std::string& path) {
    return out_of_memory_is_an_error(path, [&] { return read_csv_lines(path); });
}

Trace read_dlfw_log(const std::string& path) {
    return out_of_memory_is_an_error(path, [&] { return read_dlfw_lines(path); });
}
void require_regular_file(const std::string& path) {
    try {
        io::check_input(path);
    } catch (const io::InputError& e) {
        throw TraceError(e.what());
    }
}

Trace read_te_stats(const std::string& path) {
    Trace t;
    t.file = path;
    try {
        te::RunStats run = te::read_run_stats(path);
        t.skipped = std::move(run.skipped);
        // {layer}_{tensor} -> its combined max and min series, for tensors without cur_amax.
        std::map<std::string, const te::StatSeries*> max_of, min_of;
        std::map<std::string, bool> has_amax;
        for (const auto& s : run.series) {
            if (!s.parts.recipe.empty() || s.parts.columnwise || s.rank) continue;
            const std::string k = s.parts.layer + "_" + s.parts.tensor;
            if (s.parts.stat == "cur_amax") has_amax[k] = true;
            if (s.parts.stat == "max") max_of[k] = &s;
            if (s.parts.stat == "min") min_of[k] = &s;
        }
        auto emit = [&](const std::string& tensor, const te::StatSeries& parts, std::vector<std::int64_t> steps,
                        std::vector<double> amax, std::vector<bool> readable, const char* from) {
            Series out;
            out.tensor = tensor;
            const Role r = te::role_of(parts.parts.tensor);
            out.role = recipe_slot(r == Role::unknown ? guess_role(out.tensor) : r);
            std::size_t left = 0;
            std::string first;
            for (std::size_t k = 0; k < steps.size(); ++k) {
                if (!readable[k]) {
                    if (left++ == 0) first = fmt::format("iteration {}: value={:.4f}", steps[k], amax[k]);
                    continue;
                }
                out.steps.push_back(steps[k]);
                out.amax.push_back(static_cast<float>(amax[k]));
            }
            if (left) t.notes.push_back(unreadable_note(path, tensor + " (" + from + ")", left, first));
            out.lines.assign(out.steps.size(), 0);
            if (!out.steps.empty()) t.series.push_back(std::move(out));
        };
        for (const auto& s : run.series) {
            if (s.parts.stat != "cur_amax" || !s.parts.recipe.empty() || s.parts.columnwise) continue;
            std::vector<bool> ok(s.steps.size());
            for (std::size_t k = 0; k < ok.size(); ++k) ok[k] = s.readable(k);
            emit(s.parts.layer + "_" + s.parts.tensor, s, s.steps, s.values, ok, "cur_amax");
        }
        // Without cur_amax, the amax is max(|max|, |min|) at the steps that log both (LogTensorStats
        // max and min are the signed extremes, torch.max / torch.min).
        for (const auto& [k, mx] : max_of) {
            const auto mn = min_of.find(k);
            if (has_amax.count(k) || mn == min_of.end()) continue;
            std::map<std::int64_t, std::size_t> at;
            for (std::size_t j = 0; j < mn->second->steps.size(); ++j) at[mn->second->steps[j]] = j;
            std::vector<std::int64_t> steps;
            std::vector<double> amax;
            std::vector<bool> ok;
            for (std::size_t j = 0; j < mx->steps.size(); ++j) {
                const auto m = at.find(mx->steps[j]);
                if (m == at.end()) continue;
                const double a = mx->values[j], b = mn->second->values[m->second];
                steps.push_back(mx->steps[j]);
                amax.push_back(std::isnan(a) || std::isnan(b) ? NAN : std::max(std::fabs(a), std::fabs(b)));
                // The larger magnitude decides; its digits must be readable.
                ok.push_back(std::fabs(a) >= std::fabs(b) ? mx->readable(j) : mn->second->readable(m->second));
            }
            emit(k, *mx, steps, amax, ok, "max(|max|, |min|)");
        }
    } catch (const TraceError&) {
        throw;
    } catch (const std::runtime_error& e) {
        throw TraceError(e.what());
    }
    if (t.series.empty())
        throw TraceError(
            fmt::format("{}: the statistics logs hold no readable amax (LogTensorStats stats: [cur_amax], "
                        "or both max and min){}",
                        path, t.notes.empty() ? "" : ": " + t.notes.front()));
    return t;
}

Trace read_trace(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return read_te_stats(path);
    return is_csv_trace(path) ? read_csv(path) : read_dlfw_log(path);
}

void stream_rows(const std::string& path, const RowFn& fn) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        throw TraceError(fmt::format("{}: a folder (TE statistics logs) is not read row by row", path));
    if (is_csv_trace(path))
        csv_rows(path, fn);
    else
        dlfw_rows(path, fn, [](const std::string&, std::int64_t, std::size_t, const std::string&) {});
}

bool matches(std::string_view pattern, std::string_view name) {
    return fnmatch(std::string(pattern).c_str(), std::string(name).c_str(), 0) == 0;
}

}  // namespace fp8kit::trace
