// Choosing files and tensors: glob expansion, --include/--exclude, --steps, and the Dump that
// lists many files while keeping one open.
#include <fnmatch.h>
#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

#include "fp8kit/io/dump.hpp"
#include "fp8kit/io/gate.hpp"
#include "io/dump_internal.hpp"

namespace fp8kit::dump {
namespace {

std::int64_t parse_step_number(std::string_view part, std::string_view whole) {
    if (part.empty() || part.size() > 18 ||
        !std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; }))
        throw std::invalid_argument(
            fmt::format("--steps '{}': '{}' is not a step number (use ranges like 0-100,200,300-)", whole, part));
    return std::stoll(std::string(part));
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    return s;
}

bool has_glob_chars(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

}  // namespace

std::vector<StepRange> parse_steps(std::string_view s) {
    std::vector<StepRange> out;
    std::size_t pos = 0;
    if (trim(s).empty()) throw std::invalid_argument("--steps is empty (use ranges like 0-100,200,300-)");
    while (pos <= s.size()) {
        const std::size_t comma = std::min(s.find(',', pos), s.size());
        const std::string_view item = trim(s.substr(pos, comma - pos));
        const std::size_t dash = item.find('-');
        StepRange r{};
        if (dash == std::string_view::npos) {
            r.lo = r.hi = parse_step_number(item, s);
        } else {
            r.lo = parse_step_number(trim(item.substr(0, dash)), s);
            const std::string_view hi = trim(item.substr(dash + 1));
            r.hi = hi.empty() ? std::numeric_limits<std::int64_t>::max() : parse_step_number(hi, s);
            if (r.hi < r.lo)
                throw std::invalid_argument(fmt::format("--steps '{}': range '{}' ends before it starts", s, item));
        }
        out.push_back(r);
        pos = comma + 1;
    }
    return out;
}

bool Selection::matches(const TensorInfo& t) const {
    auto match = [&](const std::string& pat) { return fnmatch(pat.c_str(), t.name.c_str(), 0) == 0; };
    if (!include.empty() && std::none_of(include.begin(), include.end(), match)) return false;
    if (std::any_of(exclude.begin(), exclude.end(), match)) return false;
    if (!steps.empty()) {
        if (!t.step) return false;
        const std::int64_t s = *t.step;
        if (std::none_of(steps.begin(), steps.end(), [&](const StepRange& r) { return r.lo <= s && s <= r.hi; }))
            return false;
    }
    return true;
}

namespace {

// Dumps are read from regular files only (and folders, read as their documented layout): a FIFO
// would block for ever, and a device such as /dev/zero never ends (io/gate.hpp).
bool readable_kind(const std::string& path, const struct stat& st, std::vector<Problem>& problems) {
    if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) return true;
    problems.push_back({path, "",
                        fmt::format("{}, not a regular file: not read (dumps are read from regular files only)",
                                    io::kind_name(st.st_mode))});
    return false;
}

std::vector<std::string> glob_sorted(const std::string& pattern) {
    std::vector<std::string> found;
    glob_t g{};
    if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) found.assign(g.gl_pathv, g.gl_pathv + g.gl_pathc);
    globfree(&g);
    std::sort(found.begin(), found.end());
    return found;
}

// A path kept as an input: a folder becomes its layout's files (or a Problem naming the globs).
void keep(const std::string& path, const struct stat& st, std::vector<std::string>& out,
          std::vector<Problem>& problems) {
    if (!readable_kind(path, st, problems)) return;
    if (!S_ISDIR(st.st_mode)) {
        out.push_back(path);
        return;
    }
    const auto files = folder_files(path);
    if (files.empty())
        problems.push_back({path, "", "a directory with no dump file in a documented layout: " + folder_hint(path)});
    // Every file the layout matched is an input: one the gate refuses (a folder named *.pt, a
    // symbolic link loop, a dangling link) is a named failure there, never silently left out (a
    // folder holding only such entries was "0 files", exit 0: tests/cli/adversarial.sh).
    for (const auto& f : files) {
        struct stat fs {};
        if (::stat(f.c_str(), &fs) != 0 || S_ISDIR(fs.st_mode) || readable_kind(f, fs, problems)) out.push_back(f);
    }
}

}  // namespace

std::vector<std::string> folder_files(const std::string& dir) {
    std::string d = dir;
    while (d.size() > 1 && d.back() == '/') d.pop_back();
    // TransformerEngine DumpTensors (transformer_engine/debug/features/dump_tensors.py):
    // {log_dir}/tensor_dumps/rank_N/{layer}_{tensor}_iter_{iter:06d}.pt, or, in older versions,
    // .../rank_N/iter_{iter:06d}/{layer}_{tensor}.pt.
    static const char* const kLayouts[] = {
        "rank_*/*.pt", "rank_*/iter_*/*.pt", "tensor_dumps/rank_*/*.pt", "tensor_dumps/rank_*/iter_*/*.pt",
        "*.pt",        "iter_*/*.pt"};
    std::vector<std::string> out;
    for (const char* l : kLayouts)
        for (auto& f : glob_sorted(d + "/" + l)) out.push_back(std::move(f));
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

std::vector<std::string> expand_inputs(const std::vector<std::string>& args, std::vector<Problem>& problems) {
    std::vector<std::string> out;
    for (const auto& a : args) {
        struct stat st {};
        if (::stat(a.c_str(), &st) == 0 || !has_glob_chars(a)) {
            // A missing plain path is reported when it is opened, with the system's reason.
            if (::stat(a.c_str(), &st) != 0)
                out.push_back(a);
            else
                keep(a, st, out, problems);
            continue;
        }
        glob_t g{};
        const int rc = ::glob(a.c_str(), 0, nullptr, &g);
        if (rc == 0) {
            std::vector<std::string> found(g.gl_pathv, g.gl_pathv + g.gl_pathc);
            std::sort(found.begin(), found.end());
            for (const auto& f : found) {
                if (::stat(f.c_str(), &st) != 0)
                    out.push_back(f);
                else
                    keep(f, st, out, problems);
            }
        } else {
            problems.push_back(
                {a, "", rc == GLOB_NOMATCH ? "no file matches this pattern" : "cannot expand this pattern"});
        }
        globfree(&g);
    }
    return out;
}

Dump::Dump(const std::vector<std::string>& files, Selection selection, ReadOptions opts) : opts_(opts) {
    for (const auto& f : files) {
        std::unique_ptr<Source> src;
        try {
            src = open_source(f, opts_);
        } catch (const DumpError& e) {
            errors_.push_back({e.file, e.name, e.message});
            continue;
        }
        ++files_opened_;
        for (auto t : src->tensors()) {
            for (const auto& [pattern, role] : selection.roles)
                if (fnmatch(pattern.c_str(), t.name.c_str(), 0) == 0) {
                    t.role = role;
                    t.role_guessed = false;
                    break;
                }
            if (selection.matches(t)) {
                tensors_.push_back(t);
            } else {
                ++unselected_;
                if (unselected_sample_.size() < 5)
                    unselected_sample_.push_back(t.step ? fmt::format("{} (step {})", t.name, *t.step) : t.name);
            }
        }
        // Unreadable datasets count when they would have been selected by name; their step and
        // role may be unknown, so only the name patterns apply.
        Selection by_name = selection;
        by_name.steps.clear();
        for (const auto& p : src->errors()) {
            TensorInfo probe;
            probe.name = p.name;
            if (p.name.empty() || by_name.matches(probe)) errors_.push_back(p);
        }
        // A skipped dataset that --include/--exclude leaves out is not worth a note either.
        for (const auto& p : src->notes()) {
            TensorInfo probe;
            probe.name = p.name;
            if (p.name.empty() || by_name.matches(probe)) notes_.push_back(p);
        }
        // A file that holds no tensor is a failed input, not a report of nothing ("0 tensors from 1
        // file", exit 0, read as a complete analysis: tests/cli/adversarial.sh).
        if (src->tensors().empty() && src->errors().empty())
            errors_.push_back(
                {f, "",
                 src->notes().empty()
                     ? std::string("holds no tensor: nothing to analyse")
                     : fmt::format("holds no tensor fp8kit reads ({} skipped, each noted)", src->notes().size())});
        open_ = std::move(src);
    }
}

Dump::~Dump() = default;

namespace {

// The source of t's file: `open` when it is that file, else the file opened in its place (one file
// is kept open, so that consecutive reads from one file open it once).
Source& source_of(std::unique_ptr<Source>& open, const TensorInfo& t, const ReadOptions& opts) {
    if (!open || open->path() != t.file) {
        open.reset();
        open = open_source(t.file, opts);
    }
    return *open;
}

// Runs `read`; codes its reader found bad become a DumpError naming the file and tensor.
template <class Read>
void naming_bad_codes(const TensorInfo& t, const Read& read) {
    try {
        read();
    } catch (const detail::BadCodes& e) {
        throw DumpError(t.file, t.name, e.what());
    }
}

}  // namespace

void Dump::read(std::size_t i, const ChunkFn& fn) {
    const TensorInfo& t = tensors_.at(i);
    Source& s = source_of(open_, t, opts_);
    naming_bad_codes(t, [&] { s.read(t, fn); });
}

void Dump::read_runs(std::size_t i, const ChunkFn& fn) {
    const TensorInfo& t = tensors_.at(i);
    Source& s = source_of(open_, t, opts_);
    naming_bad_codes(t, [&] { s.read_runs(t, fn); });
}

std::shared_ptr<const void> Dump::map(std::size_t i) {
    const TensorInfo& t = tensors_.at(i);
    return source_of(open_, t, opts_).map(t);
}

void Dump::read_into(std::size_t i, void* dest, const PlacedFn& placed) {
    const TensorInfo& t = tensors_.at(i);
    source_of(open_, t, opts_).read_into(t, dest, placed);
}

}  // namespace fp8kit::dump
