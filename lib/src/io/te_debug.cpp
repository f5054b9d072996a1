// TransformerEngine debug output: DumpTensors paths and statistics logs (see te_debug.hpp).
#include "fp8kit/io/te_debug.hpp"

#include <dirent.h>
#include <fnmatch.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "fp8kit/io/gate.hpp"
#include "fp8kit/io/json_number.hpp"
#include "fp8kit/io/printable.hpp"
#include "fp8kit/io/report_fields.hpp"

namespace fp8kit::te {
namespace {

bool ends_with(std::string_view s, std::string_view t) {
    return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

std::optional<std::int64_t> digits_after(std::string_view s, std::string_view prefix) {
    if (s.substr(0, prefix.size()) != prefix || s.size() == prefix.size() || s.size() - prefix.size() > 18)
        return std::nullopt;
    std::int64_t v = 0;
    for (char c : s.substr(prefix.size())) {
        if (c < '0' || c > '9') return std::nullopt;
        v = v * 10 + (c - '0');
    }
    return v;
}

std::vector<std::string_view> components(std::string_view p) {
    std::vector<std::string_view> out;
    std::size_t s = 0;
    while (s <= p.size()) {
        const std::size_t e = std::min(p.find('/', s), p.size());
        if (e > s) out.push_back(p.substr(s, e - s));
        s = e + 1;
    }
    return out;
}

// The stats with an optional recipe prefix and _columnwise suffix: stats_computation.py
// (add_underflows_stats, add_scale_inv_stats, add_mse_stats), log_nvfp4_tensor_stats.py.
constexpr std::string_view kRecipeStats[] = {"underflows_num", "underflows%", "scale_inv_min",
                                             "scale_inv_max",  "mse",         "total_square_error"};
constexpr std::string_view kRecipes[] = {"fp8_delayed_scaling", "fp8_current_scaling", "mxfp8", "fp8_block_scaling",
                                         "nvfp4"};
// The plain stats: stats_to_num in stats_computation.py.
constexpr std::string_view kStats[] = {"min",
                                       "max",
                                       "sum",
                                       "mean",
                                       "numel",
                                       "l1_norm",
                                       "l2_norm_square",
                                       "l2_norm",
                                       "variance",
                                       "cur_amax",
                                       "dynamic_range_top",
                                       "dynamic_range_bottom",
                                       "std",
                                       "dynamic_range",
                                       "fp8_delayed_scaling_overflows_num",
                                       "fp8_delayed_scaling_overflows%",
                                       "overflows_num",
                                       "overflows%"};

}  // namespace

numerics::Role role_of(std::string_view t) {
    if (t == "weight") return numerics::Role::weight;
    if (t == "activation" || t == "output") return numerics::Role::activation;
    if (t == "gradient" || t == "wgrad" || t == "dgrad") return numerics::Role::gradient;
    return numerics::Role::unknown;
}

std::optional<DumpPath> parse_dump_path(std::string_view path) {
    const auto parts = components(path);
    if (parts.empty() || !ends_with(parts.back(), ".pt")) return std::nullopt;
    std::string_view stem = parts.back().substr(0, parts.back().size() - 3);
    DumpPath d;
    // 1. {layer}_{tensor}_iter_{iter:06d}.pt, else iter_{iter:06d}/{layer}_{tensor}.pt.
    const std::size_t at = stem.rfind("_iter_");
    std::optional<std::int64_t> step;
    if (at != std::string_view::npos) step = digits_after(stem.substr(at + 1), "iter_");
    if (step)
        stem = stem.substr(0, at);
    else if (parts.size() >= 2)
        step = digits_after(parts[parts.size() - 2], "iter_");
    if (!step) return std::nullopt;
    d.step = *step;
    // 2. The tensor name from the end (layer names contain '_' too).
    for (std::string_view t : kTensorNames)
        if (stem.size() > t.size() + 1 && ends_with(stem, t) && stem[stem.size() - t.size() - 1] == '_') {
            d.tensor = std::string(t);
            d.layer = std::string(stem.substr(0, stem.size() - t.size() - 1));
        }
    if (d.tensor.empty()) return std::nullopt;
    // 3. The rank from the nearest rank_N folder.
    for (std::size_t i = parts.size() - 1; i-- > 0;)
        if (const auto r = digits_after(parts[i], "rank_"); r && *r <= 1 << 30) {
            d.rank = static_cast<int>(*r);
            break;
        }
    return d;
}

std::optional<StatName> split_stat_name(std::string_view name) {
    std::optional<StatName> best;
    std::size_t best_len = 0;
    auto consider = [&](std::string_view stat_text, const std::string& recipe, const std::string& stat, bool col) {
        for (std::string_view t : kTensorNames) {
            const std::string suffix = fmt::format("_{}_{}", t, stat_text);
            if (suffix.size() <= best_len || name.size() <= suffix.size() || !ends_with(name, suffix)) continue;
            best_len = suffix.size();
            best =
                StatName{std::string(name.substr(0, name.size() - suffix.size())), std::string(t), recipe, stat, col};
        }
    };
    for (std::string_view s : kStats) consider(s, "", std::string(s), false);
    for (bool col : {false, true})
        for (std::string_view s : kRecipeStats) {
            const std::string tail = fmt::format("{}{}", s, col ? "_columnwise" : "");
            consider(tail, "", std::string(s), col);
            for (std::string_view r : kRecipes)
                consider(fmt::format("{}_{}", r, tail), std::string(r), std::string(s), col);
        }
    // max_blockwise_dynamic_range_block_size_{B}_dims_{D}[_max_over_orientations] (BlockwiseDynamicRangeStat)
    static const std::regex kBlockwise(
        "_(max_blockwise_dynamic_range_block_size_[0-9]+_dims_[0-9]+(_max_over_orientations)?)$");
    std::match_results<std::string_view::const_iterator> m;
    if (std::regex_search(name.begin(), name.end(), m, kBlockwise)) {
        const std::string s = m[1].str();
        consider(s, "", s, false);
    }
    return best;
}

StatsLog read_stats_log(const std::string& path) {
    StatsLog log;
    log.file = path;
    // Regular files only, refused without blocking, with the gate's message naming what the path
    // is (io/gate.hpp; it was "not a readable regular file" for a FIFO, a folder or a missing file).
    io::check_input(path);
    const std::string base = path.substr(path.rfind('/') + 1);
    const std::size_t g = base.rfind("_globalrank-");
    if (g != std::string::npos && ends_with(base, ".log")) {
        const auto r = digits_after(base.substr(g + 12, base.size() - g - 16), "");
        if (r && *r <= 1 << 30) log.rank = static_cast<int>(*r);
    }
    std::ifstream in(path);
    std::string text;
    std::size_t lineno = 0;
    while (std::getline(in, text)) {
        ++lineno;
        const std::size_t it = text.find("iteration=");
        if (it == std::string::npos) continue;  // free text
        auto bad = [&](const std::string& why) {
            return std::runtime_error(fmt::format("{}:{}: {}: {}", path, lineno, why, io::quoted(text, 160)));
        };
        // "{name} \t\t\t\t iteration={iter:06d} \t\t\t\t value={value:.4f}": the name is the
        // whitespace-separated word before "iteration=" (a logging prefix may precede it).
        std::size_t e = it;
        while (e > 0 && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
        std::size_t s = e;
        while (s > 0 && !std::isspace(static_cast<unsigned char>(text[s - 1]))) --s;
        std::size_t v = text.find("value=", it);
        if (s == e || v == std::string::npos) throw bad("a statistics line without a name or value=");
        const std::string full = text.substr(s, e - s);
        std::size_t ie = it + 10;
        while (ie < text.size() && !std::isspace(static_cast<unsigned char>(text[ie]))) ++ie;
        const auto iter = digits_after(std::string_view(text).substr(it, ie - it), "iteration=");
        if (!iter) throw bad("iteration= is not a non-negative integer");
        std::string vtext = text.substr(v + 6);
        while (!vtext.empty() && std::isspace(static_cast<unsigned char>(vtext.back()))) vtext.pop_back();
        char* end = nullptr;
        errno = 0;
        const double value = std::strtod(vtext.c_str(), &end);
        if (vtext.empty() || end != vtext.c_str() + vtext.size()) throw bad("value= is not a number");
        const auto parts = split_stat_name(full);
        if (!parts) {
            log.skipped.push_back(
                dump::Problem{path, full,
                              fmt::format("line {}: not a statistic TransformerEngine logs (the name does not end in "
                                          "_{{tensor}}_{{stat}} with a tensor and statistic of "
                                          "stats_computation.py or log_nvfp4_tensor_stats.py)",
                                          lineno)});
            continue;
        }
        log.lines.push_back(StatLine{*parts, full, *iter, value, log.rank, lineno, significant_digits(vtext)});
    }
    if (in.bad()) throw std::runtime_error(fmt::format("{}: read error", path));
    if (log.lines.empty() && log.skipped.empty())
        throw std::runtime_error(
            fmt::format("{}: no statistics lines (name iteration=N value=V): not a "
                        "nvdlfw_inspect_statistics_logs file",
                        path));
    return log;
}

std::vector<std::string> find_stats_logs(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        throw std::runtime_error(fmt::format("{}: {}", io::quoted(path), std::strerror(errno)));
    if (!S_ISDIR(st.st_mode)) return {path};
    std::string dir = path;
    const std::string sub = path + "/nvdlfw_inspect_statistics_logs";
    if (::stat(sub.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) dir = sub;
    std::vector<std::string> out;
    if (DIR* d = ::opendir(dir.c_str())) {
        while (const dirent* e = ::readdir(d)) {
            const std::string n = e->d_name;
            if (n.rfind("nvdlfw_inspect", 0) == 0 && n.find("_globalrank-") != std::string::npos &&
                ends_with(n, ".log"))
                out.push_back(dir + "/" + n);
        }
        ::closedir(d);
    }
    std::sort(out.begin(), out.end());
    if (out.empty())
        throw std::runtime_error(fmt::format("{}: no nvdlfw_inspect*_globalrank-R.log statistics logs in it{}", path,
                                             dir == path ? " (nor in an nvdlfw_inspect_statistics_logs folder)" : ""));
    return out;
}

std::vector<std::uint8_t> te_rowwise_scales(const std::vector<std::uint8_t>& stored,
                                            const std::vector<std::uint64_t>& shape, std::uint64_t rows,
                                            std::uint64_t blocks, bool swizzled) {
    const std::uint64_t pr = (rows + 127) / 128 * 128, pc = (blocks + 3) / 4 * 4;
    if (shape.size() != 2 || shape[0] != pr || shape[1] != pc || stored.size() != pr * pc)
        throw std::invalid_argument(
            fmt::format("scale_inv is {}, expected {}x{} ({} rows padded to 128, {} blocks "
                        "padded to 4)",
                        fmt::join(shape, "x"), pr, pc, rows, blocks));
    std::vector<std::uint8_t> out(rows * blocks);
    for (std::uint64_t r = 0; r < rows; ++r)
        for (std::uint64_t c = 0; c < blocks; ++c) {
            const std::uint64_t at =
                swizzled ? ((r / 128) * (pc / 4) + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4
                         : r * pc + c;
            out[r * blocks + c] = stored[at];
        }
    return out;
}

int significant_digits(std::string_view t) {
    if (!t.empty() && (t[0] == '-' || t[0] == '+')) t.remove_prefix(1);
    if (t.find_first_of("eE") != std::string_view::npos || t.find('.') == std::string_view::npos) return kExact;
    int n = 0;
    bool started = false;
    for (char c : t) {
        if (c < '0' || c > '9') continue;
        started = started || c != '0';
        if (started) ++n;
    }
    return n;
}

int decimals(std::string_view t) {
    const auto dot = t.find('.');
    return dot == std::string_view::npos ? 0 : static_cast<int>(t.size() - dot - 1);
}

bool unreadable(std::string_view value_text) {
    // Only a fixed-point value written with TE's kFixedDecimals or more decimals lost digits to the
    // writer's precision; a short form such as "1.5" (%g, a CSV) is exact as written.
    return decimals(value_text) >= kFixedDecimals && significant_digits(value_text) < kMinSignificant;
}

Combine combine_of(std::string_view stat) {
    if (stat == "max" || stat == "cur_amax" || stat == "dynamic_range_top" || stat == "scale_inv_max" ||
        stat.rfind("max_blockwise_dynamic_range", 0) == 0)
        return Combine::max;
    if (stat == "min" || stat == "dynamic_range_bottom" || stat == "scale_inv_min") return Combine::min;
    if (stat == "mean") return Combine::mean;
    return Combine::none;
}

std::string_view name(Combine c) {
    switch (c) {
        case Combine::max: return "max";
        case Combine::min: return "min";
        case Combine::mean: return "mean";
        case Combine::none: break;
    }
    return "per rank";
}

Combine combine_of(const StatSeries& s) { return s.rank ? Combine::none : combine_of(s.parts.stat); }

const io::FieldTable<StatSeries>& series_fields() {
    using V = io::FieldValue;
    static const io::FieldTable<StatSeries> t = {
        {"name", [](const StatSeries& s) -> V { return std::string_view(s.name); }},
        {"layer", [](const StatSeries& s) -> V { return std::string_view(s.parts.layer); }},
        {"tensor", [](const StatSeries& s) -> V { return std::string_view(s.parts.tensor); }},
        {"recipe", [](const StatSeries& s) -> V { return std::string_view(s.parts.recipe); }},
        {"stat", [](const StatSeries& s) -> V { return std::string_view(s.parts.stat); }},
        {"columnwise", [](const StatSeries& s) -> V { return s.parts.columnwise; }},
        {"combine", [](const StatSeries& s) -> V { return name(combine_of(s)); }},
        {"rank", [](const StatSeries& s) -> V { return s.rank ? V(std::int64_t{*s.rank}) : V(); }},
        {"ranks", [](const StatSeries& s) -> V { return std::int64_t{s.ranks}; }},
    };
    return t;
}

std::string_view per_rank_reason(std::string_view stat) {
    if (combine_of(stat) != Combine::none) return "";
    const bool count = stat == "sum" || stat == "numel" || stat == "l1_norm" || stat == "l2_norm_square" ||
                       ends_with(stat, "_num") || stat == "total_square_error";
    if (count)
        return "a sum or count over the rank's reduction group: every rank of a group logs the group's value "
               "(stats_buffer.py _Buffer.log), and which ranks share a group is not in the logs, so adding ranks "
               "would count a group more than once";
    return "TE computes it from helper statistics (sums, counts, squares) that the log does not hold for every "
           "rank, so the ranks' logged values do not combine into the run's value";
}

std::vector<StatSeries> combine_ranks(const std::vector<StatsLog>& logs) {
    // numel per ({layer}_{tensor}, rank, step): the weights of a combined mean.
    std::map<std::tuple<std::string, int, std::int64_t>, double> numel;
    for (const auto& log : logs)
        for (const auto& l : log.lines)
            if (l.name.stat == "numel" && l.name.recipe.empty() && !l.name.columnwise)
                numel[{l.name.layer + "_" + l.name.tensor, l.rank, l.iteration}] = l.value;
    auto weight = [&](const StatLine& l) -> std::optional<double> {
        const auto it = numel.find({l.name.layer + "_" + l.name.tensor, l.rank, l.iteration});
        if (it == numel.end() || !(it->second >= 0)) return std::nullopt;
        return it->second;
    };
    // A mean series is combined only when every one of its lines has its numel.
    std::map<std::string, bool> mean_weighted;
    for (const auto& log : logs)
        for (const auto& l : log.lines)
            if (combine_of(l.name.stat) == Combine::mean) {
                auto [it, fresh] = mean_weighted.try_emplace(l.full, true);
                it->second = it->second && weight(l).has_value();
            }
    struct Acc {
        double value = 0, wsum = 0, wtotal = 0;
        int ranks = 0, significant = kExact;
    };
    // (name, rank or -1) -> step -> accumulated value
    std::map<std::pair<std::string, int>, std::map<std::int64_t, Acc>> acc;
    std::map<std::string, StatName> parts;
    for (const auto& log : logs)
        for (const auto& l : log.lines) {
            Combine c = combine_of(l.name.stat);
            if (c == Combine::mean && !mean_weighted.at(l.full)) c = Combine::none;
            auto& slot = acc[{l.full, c == Combine::none ? l.rank : -1}];
            parts.emplace(l.full, l.name);
            auto [it, fresh] = slot.try_emplace(l.iteration);
            Acc& a = it->second;
            if (!fresh && c == Combine::none)
                throw std::runtime_error(fmt::format("{}:{}: {} at iteration {} logged twice by rank {}", log.file,
                                                     l.line, l.full, l.iteration, l.rank));
            a.significant = std::min(a.significant, l.significant);
            ++a.ranks;
            if (c == Combine::mean) {
                const double w = *weight(l);
                a.wsum += w * l.value;
                a.wtotal += w;
                a.value = a.ranks == 1 || !(a.wtotal > 0) ? (a.ranks == 1 ? l.value : a.value) : a.wsum / a.wtotal;
                continue;
            }
            // NaN wins, as torch.max/min propagate it.
            if (fresh)
                a.value = l.value;
            else if (std::isnan(l.value) || std::isnan(a.value))
                a.value = NAN;
            else
                a.value = c == Combine::max ? std::max(a.value, l.value) : std::min(a.value, l.value);
        }
    std::vector<StatSeries> out;
    for (const auto& [key, steps] : acc) {
        StatSeries s;
        s.name = key.first;
        s.parts = parts.at(key.first);
        if (key.second >= 0) s.rank = key.second;
        for (const auto& [step, a] : steps) {
            s.steps.push_back(step);
            s.values.push_back(a.value);
            s.significant.push_back(a.significant);
            s.ranks = std::max(s.ranks, a.ranks);
        }
        out.push_back(std::move(s));
    }
    return out;
}

void keep_series(RunStats& r, const std::vector<std::string>& globs) {
    if (globs.empty()) return;
    auto match = [&](const StatSeries& s) {
        const std::string lt = s.parts.layer + "_" + s.parts.tensor;
        for (const auto& g : globs)
            if (::fnmatch(g.c_str(), s.name.c_str(), 0) == 0 || ::fnmatch(g.c_str(), lt.c_str(), 0) == 0) return true;
        return false;
    };
    r.series.erase(std::remove_if(r.series.begin(), r.series.end(), [&](const StatSeries& s) { return !match(s); }),
                   r.series.end());
}

nlohmann::json stats_json(const RunStats& r) {
    nlohmann::json j;
    j["files"] = r.files;
    j["skipped"] = r.skipped;
    auto& series = j["series"] = nlohmann::json::array();
    for (const auto& s : r.series) {
        nlohmann::json o;
        io::put_fields(o, series_fields(), s);
        o["steps"] = s.steps;
        auto& v = o["values"] = nlohmann::json::array();
        auto& ok = o["readable"] = nlohmann::json::array();
        for (std::size_t k = 0; k < s.steps.size(); ++k) {
            v.push_back(io::json_number(s.values[k]));
            ok.push_back(s.readable(k));
        }
        if (s.rank) {
            const std::string_view why = per_rank_reason(s.parts.stat);
            o["per_rank"] = why.empty() ? std::string(
                                              "a mean whose numel is not logged by every rank that logged it: "
                                              "it cannot be weighted")
                                        : std::string(why);
        }
        series.push_back(std::move(o));
    }
    return j;
}

std::string stats_csv(const RunStats& r) {
    std::string out = "step,name,layer,tensor,recipe,stat,columnwise,combine,rank,ranks,value,readable\n";
    for (const auto& s : r.series) {
        const Combine c = combine_of(s);
        const std::string head =
            fmt::format("{},{},{},{},{},{},{},{},{}", io::csv_field(s.name), io::csv_field(s.parts.layer),
                        s.parts.tensor, s.parts.recipe, io::csv_field(s.parts.stat), s.parts.columnwise ? 1 : 0,
                        name(c), s.rank ? std::to_string(*s.rank) : std::string(), s.ranks);
        for (std::size_t k = 0; k < s.steps.size(); ++k)
            out += fmt::format("{},{},{:.17g},{}\n", s.steps[k], head, s.values[k], s.readable(k) ? 1 : 0);
    }
    return out;
}

void write_stats_text(const RunStats& r, std::size_t width, std::FILE* out) {
    fmt::print(out, "TransformerEngine statistics: {} files, {} series\n\n", r.files.size(), r.series.size());
    // The name column: as wide as the longest name, within `width` (the other columns take 72).
    std::size_t w = 4;
    for (const auto& s : r.series) w = std::max(w, io::printable(s.name).size());
    if (width) w = std::min(w, std::max<std::size_t>(24, width > 72 ? width - 72 : 0));
    fmt::print(out, "{:<{}}  {:<8}  {:>5}  {:>6}  {:>10}  {:>14}  {:>14}  {:>10}\n", "name", w, "combine", "rank",
               "steps", "last step", "last value", "max", "unreadable");
    for (const auto& s : r.series) {
        std::size_t bad = 0;
        double mx = -INFINITY;
        for (std::size_t k = 0; k < s.steps.size(); ++k) {
            if (!s.readable(k)) ++bad;
            mx = std::max(mx, s.values[k]);
        }
        fmt::print(out, "{}  {:<8}  {:>5}  {:>6}  {:>10}  {:>14.6g}  {:>14.6g}  {:>10}\n", io::name_cell(s.name, w, 0),
                   name(combine_of(s)), s.rank ? std::to_string(*s.rank) : "all " + std::to_string(s.ranks),
                   s.steps.size(), s.steps.empty() ? 0 : s.steps.back(), s.values.empty() ? NAN : s.values.back(), mx,
                   bad);
    }
    fmt::print(out,
               "\nranks combined by max, min or numel-weighted mean where the statistic allows it; sums, counts and "
               "derived statistics stay per rank (docs/replay.md); --json or --csv for every step\n");
    for (const auto& n : r.skipped) fmt::print(out, "note: skipped {}\n", io::printable(n.describe()));
}

RunStats read_run_stats(const std::string& path) {
    RunStats r;
    r.files = find_stats_logs(path);
    std::vector<StatsLog> logs;
    for (const auto& f : r.files) {
        logs.push_back(read_stats_log(f));
        for (auto& n : logs.back().skipped) r.skipped.push_back(std::move(n));
    }
    r.series = combine_ranks(logs);
    // Logs whose every line was skipped hold nothing to report: a failure naming the first
    // skipped line, not "0 series" with exit 0 (tests/cli/adversarial.sh).
    if (r.series.empty())
        throw std::runtime_error(
            fmt::format("{}: no TransformerEngine statistic in {} log file(s): {} line(s) skipped{}", io::quoted(path),
                        r.files.size(), r.skipped.size(),
                        r.skipped.empty() ? "" : " (first: " + r.skipped.front().describe() + ")"));
    return r;
}

}  // namespace fp8kit::te
