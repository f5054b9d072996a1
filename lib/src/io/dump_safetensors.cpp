// safetensors files: u64 little-endian header length N, N bytes of JSON
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the data.
// Everything in the header is checked against the file before a byte of data is trusted.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fp8kit/io/printable.hpp"
#include "fp8kit/parallel/pool.hpp"
#include "io/chunk_task.hpp"
#include "fp8kit/io/gate.hpp"
#include "io/dump_internal.hpp"

namespace fp8kit::dump::detail {
namespace {

constexpr std::uint64_t kMaxHeader = 100'000'000;  // the reference reader's limit

std::optional<DType> parse_st_dtype(const std::string& s) {
    static const std::pair<const char*, DType> kTable[] = {
        {"F64", DType::f64},
        {"F32", DType::f32},
        {"F16", DType::f16},
        {"BF16", DType::bf16},
        {"F8_E4M3", DType::e4m3},
        {"F8_E5M2", DType::e5m2},
        {"F8_E4M3FNUZ", DType::e4m3fnuz},
        {"F8_E5M2FNUZ", DType::e5m2fnuz},
        {"F8_E8M0", DType::e8m0},
    };
    for (const auto& [n, d] : kTable)
        if (s == n) return d;
    return std::nullopt;
}

// A JSON value for a message: short, one line, and never a recursive dump of a deeply nested
// value (nlohmann's dump() recurses, and a shape nested 10^6 deep overflows the stack).
std::string brief(const nlohmann::json& j) {
    if (j.is_array() || j.is_object()) {
        for (const auto& e : j)
            if (e.is_structured())
                return fmt::format("(a{} with {} entries, some of them nested)", j.is_array() ? "n array" : "n object",
                                   j.size());
    }
    return io::quoted(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), 120);
}

bool is_integer_dtype(const std::string& s) {
    static const char* const kInts[] = {"BOOL", "U8", "I8", "U16", "I16", "U32", "I32", "U64", "I64"};
    return std::any_of(std::begin(kInts), std::end(kInts), [&](const char* n) { return s == n; });
}

// The file through the input gate (io/gate.hpp): a FIFO or device is refused without blocking.
int open_gated(const std::string& path) {
    try {
        return io::open_input(path).release();
    } catch (const io::InputError& e) {
        throw DumpError(path, "", e.reason);
    }
}

class Fd {
public:
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    int get() const { return fd_; }

private:
    int fd_;
};

struct Entry {
    std::uint64_t begin, end;  // absolute file offsets
};

class SafetensorsSource final : public Source {
public:
    SafetensorsSource(const std::string& path, const ReadOptions& opts, bool raw, bool int8_bytes)
        : opts_(opts), raw_(raw), int8_bytes_(raw && int8_bytes), fd_(open_gated(path)) {
        path_ = path;
        struct stat st {};
        if (::fstat(fd_.get(), &st) != 0)
            throw DumpError(path, "", fmt::format("cannot stat: {}", std::strerror(errno)));
        const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
        auto bad = [&](const std::string& m) { return DumpError(path, "", "not a valid safetensors file: " + m); };
        if (size < 8) throw bad(fmt::format("{} bytes, shorter than the 8-byte header length", size));
        unsigned char len_bytes[8];
        if (auto e = pread_exact(fd_.get(), len_bytes, 8, 0); !e.empty()) throw bad(e);
        std::uint64_t n = 0;
        for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
        if (n > kMaxHeader) throw bad(fmt::format("header length {} exceeds the 100 MB limit", n));
        if (n > size - 8)
            throw bad(fmt::format("header length {} runs past the end of the file ({} bytes): truncated?", n, size));
        std::string text(static_cast<std::size_t>(n), '\0');
        if (auto e = pread_exact(fd_.get(), text.data(), text.size(), 8); !e.empty()) throw bad(e);
        nlohmann::json header;
        std::set<std::string> names;
        std::string duplicate;
        // JSON objects keep the last of two equal keys: catch the repeat while parsing.
        const auto note_keys = [&](int depth, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
            if (ev == nlohmann::json::parse_event_t::key && depth == 1 && duplicate.empty() &&
                !names.insert(parsed.get<std::string>()).second)
                duplicate = parsed.get<std::string>();
            return true;
        };
        try {
            header = nlohmann::json::parse(text, note_keys);
        } catch (const nlohmann::json::exception& e) {  // also out_of_range: a number past double (fuzz)
            throw bad(fmt::format("header is not JSON ({})", io::quoted(e.what(), 300)));
        }
        if (!header.is_object()) throw bad("header is not a JSON object");
        // The reference reader refuses a repeated name (which of the two is meant?).
        if (!duplicate.empty())
            throw bad(fmt::format("tensor name '{}' appears twice in the header", io::quoted(duplicate)));
        names.clear();
        const std::uint64_t data_start = 8 + n, data_size = size - data_start;
        check_coverage(header, data_size, bad);

        read_role_metadata(header);
        std::vector<std::pair<Entry, std::string>> spans;  // for the overlap check
        for (auto it = header.begin(); it != header.end(); ++it) {
            if (it.key() == "__metadata__") continue;
            std::string why;
            TensorInfo t;
            Entry e{};
            if (!parse_entry(it.key(), it.value(), data_size, t, e, why)) {
                if (why.rfind("skip:", 0) == 0)
                    notes_.push_back({path_, it.key(), why.substr(6)});
                else
                    errors_.push_back({path_, it.key(), why});
                continue;
            }
            e.begin += data_start;
            e.end += data_start;
            spans.push_back({e, it.key()});
            entries_[t.name] = e;
            tensors_.push_back(std::move(t));
        }
        // Overlapping tensors: neither can be trusted.
        std::sort(spans.begin(), spans.end(),
                  [](const auto& a, const auto& b) { return a.first.begin < b.first.begin; });
        std::map<std::string, std::string> overlapping;
        std::size_t reach = 0;  // the span seen so far that ends last
        for (std::size_t i = 1; i < spans.size(); ++i) {
            if (spans[i].first.begin < spans[reach].first.end) {
                overlapping.emplace(spans[i].second, spans[reach].second);
                overlapping.emplace(spans[reach].second, spans[i].second);
            }
            if (spans[i].first.end > spans[reach].first.end) reach = i;
        }
        if (!overlapping.empty()) {
            std::vector<TensorInfo> keep;
            for (auto& t : tensors_) {
                const auto o = overlapping.find(t.name);
                if (o == overlapping.end()) {
                    keep.push_back(std::move(t));
                } else {
                    errors_.push_back(
                        {path_, t.name, fmt::format("data_offsets overlap those of '{}'", io::printable(o->second))});
                    entries_.erase(t.name);
                }
            }
            tensors_ = std::move(keep);
        }
        // JSON objects are unordered; list in file order of the data, like the writer did.
        std::sort(tensors_.begin(), tensors_.end(), [&](const TensorInfo& a, const TensorInfo& b) {
            return entries_.at(a.name).begin < entries_.at(b.name).begin;
        });
    }

    std::shared_ptr<const void> map(const TensorInfo& t) override {
        const auto it = entries_.find(t.name);
        // Raw mode delivers the stored elements as they are, which is what the mapping holds.
        if (fp8_format(t.dtype) || it == entries_.end()) return nullptr;
        // The offsets were checked against the file's size when it was listed.
        return map_extent(fd_.get(), it->second.begin, it->second.end - it->second.begin);
    }

    // Pieces of the read budget, pread by the thread pool's workers (the same component as the
    // HDF5 chunk tasks) and delivered in order: the same pieces for any thread count.
    void read(const TensorInfo& t, const ChunkFn& fn) override {
        const auto it = entries_.find(t.name);
        if (it == entries_.end()) throw DumpError(path_, t.name, "no such tensor in this file");
        const std::size_t ssize = stored_size(t.dtype);
        const std::size_t per = elements_per_read(t.dtype, opts_);
        const std::uint64_t pieces = (t.numel + per - 1) / per;
        struct Slot {
            unsigned char* bytes = nullptr;
            std::string bad;
        };
        const std::size_t window = parallel::default_window();
        std::vector<Slot> slots(window);
        reserve_pieces(window, per * ssize);
        for (std::size_t s = 0; s < window; ++s) slots[s].bytes = pieces_[s].get();
        auto count = [&](std::size_t i) {
            return static_cast<std::size_t>(std::min<std::uint64_t>(per, t.numel - i * per));
        };
        auto offset = [&](std::size_t i) { return it->second.begin + i * per * ssize; };
        parallel::ordered(
            static_cast<std::size_t>(pieces), window, [](std::size_t, std::size_t) {},
            [&](std::size_t i, std::size_t s) {
                slots[s].bad = pread_exact(fd_.get(), slots[s].bytes, count(i) * ssize, offset(i));
            },
            [&](std::size_t i, std::size_t s) {
                if (!slots[s].bad.empty())
                    throw DumpError(path_, t.name,
                                    fmt::format("cannot read bytes at offset {}: {}", offset(i), slots[s].bad));
                if (raw_)
                    fn(Chunk{t.wide, slots[s].bytes, count(i), i * per});  // stored elements as they are
                else
                    deliver(t.dtype, slots[s].bytes, count(i), i * per, scratch_, fn);
            });
    }

    // Raw mode (the stored elements as they are): pool workers pread each piece straight into
    // `dest`, one copy from the page cache instead of two (checkpoint check reads multi-GB
    // shards this way). Converting reads go through read() (Source::read_into).
    void read_into(const TensorInfo& t, void* dest, const PlacedFn& placed) override {
        if (!raw_) return Source::read_into(t, dest, placed);
        const auto it = entries_.find(t.name);
        if (it == entries_.end()) throw DumpError(path_, t.name, "no such tensor in this file");
        const std::size_t ssize = stored_size(t.dtype);
        const std::size_t per = elements_per_read(t.dtype, opts_);
        const std::uint64_t pieces = (t.numel + per - 1) / per;
        const std::size_t window = parallel::default_window();
        std::vector<std::string> bad(window);
        auto count = [&](std::size_t i) {
            return static_cast<std::size_t>(std::min<std::uint64_t>(per, t.numel - i * per));
        };
        auto offset = [&](std::size_t i) { return it->second.begin + i * per * ssize; };
        auto* out = static_cast<unsigned char*>(dest);
        parallel::ordered(
            static_cast<std::size_t>(pieces), window, [](std::size_t, std::size_t) {},
            [&](std::size_t i, std::size_t s) {
                bad[s] = pread_exact(fd_.get(), out + i * per * ssize, count(i) * ssize, offset(i));
            },
            [&](std::size_t i, std::size_t s) {
                if (!bad[s].empty())
                    throw DumpError(path_, t.name,
                                    fmt::format("cannot read bytes at offset {}: {}", offset(i), bad[s]));
                if (placed) placed(i * per, count(i));
            });
    }

private:
    // The reference reader (huggingface/safetensors, src/tensor.rs: Metadata::validate and the
    // MetadataIncompleteBuffer check of read_metadata) requires the tensors' data_offsets to
    // tile the data exactly: bytes that no tensor covers are refused. Checked here over every
    // entry whose offsets are themselves valid; when some entry's offsets are not, that entry's
    // own error explains the hole and the other tensors are still read.
    template <class Bad>
    static void check_coverage(const nlohmann::json& header, std::uint64_t data_size, const Bad& bad) {
        std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
        for (auto it = header.begin(); it != header.end(); ++it) {
            if (it.key() == "__metadata__") continue;
            const auto& v = it.value();
            const nlohmann::json* offs = v.is_object() && v.contains("data_offsets") ? &v["data_offsets"] : nullptr;
            if (!offs || !offs->is_array() || offs->size() != 2 || !(*offs)[0].is_number_unsigned() ||
                !(*offs)[1].is_number_unsigned())
                return;
            const auto b = (*offs)[0].get<std::uint64_t>(), e = (*offs)[1].get<std::uint64_t>();
            if (e < b || e > data_size) return;
            spans.emplace_back(b, e);
        }
        std::sort(spans.begin(), spans.end());
        std::uint64_t reach = 0;
        for (const auto& [b, e] : spans) {
            if (b > reach)
                throw bad(
                    fmt::format("data bytes [{}, {}) belong to no tensor (a name given twice, or a "
                                "tensor removed by hand?)",
                                reach, b));
            reach = std::max(reach, e);
        }
        if (reach < data_size)
            throw bad(fmt::format("data bytes [{}, {}) after the last tensor belong to no tensor", reach, data_size));
    }

    bool parse_entry(const std::string& key, const nlohmann::json& v, std::uint64_t data_size, TensorInfo& t, Entry& e,
                     std::string& why) {
        if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets")) {
            why = "header entry lacks dtype, shape or data_offsets";
            return false;
        }
        const auto& dt = v["dtype"];
        const auto& shape = v["shape"];
        const auto& offs = v["data_offsets"];
        if (!dt.is_string()) {
            why = "dtype is not a string";
            return false;
        }
        const std::string dts = dt.get<std::string>();
        const bool one_byte = raw_ && (dts == "U8" || (int8_bytes_ && dts == "I8"));
        const auto d = one_byte ? std::optional<DType>(DType::e4m3) : parse_st_dtype(dts);
        if (!d) {
            why = is_integer_dtype(dts) ? fmt::format("skip: {} tensor: not analysed", dts)
                                        : fmt::format("unsupported dtype '{}'", io::quoted(dts, 64));
            return false;
        }
        if (!shape.is_array()) {
            why = "shape is not an array";
            return false;
        }
        std::uint64_t numel = 1;
        for (const auto& s : shape) {
            if (!s.is_number_unsigned()) {
                why = fmt::format("shape {} has a non-integer or negative entry", brief(shape));
                return false;
            }
            const std::uint64_t x = s.get<std::uint64_t>();
            if (mul_overflows(numel, x, numel)) {
                why = fmt::format("shape {} overflows 64 bits", brief(shape));
                return false;
            }
            t.shape.push_back(x);
        }
        if (!offs.is_array() || offs.size() != 2 || !offs[0].is_number_unsigned() || !offs[1].is_number_unsigned()) {
            why = "data_offsets is not [begin, end]";
            return false;
        }
        e.begin = offs[0].get<std::uint64_t>();
        e.end = offs[1].get<std::uint64_t>();
        if (e.end < e.begin) {
            why = fmt::format("data_offsets [{}, {}] end before they begin", e.begin, e.end);
            return false;
        }
        if (e.end > data_size) {
            why = fmt::format("data_offsets [{}, {}] run past the end of the data ({} bytes): truncated file?", e.begin,
                              e.end, data_size);
            return false;
        }
        std::uint64_t bytes = 0;
        if (mul_overflows(numel, stored_size(*d), bytes) || bytes != e.end - e.begin) {
            why = fmt::format("shape {} of {} needs {} bytes but data_offsets [{}, {}] hold {}", brief(shape), dts,
                              bytes == 0 && numel != 0 ? std::string("more than 2^64") : std::to_string(bytes), e.begin,
                              e.end, e.end - e.begin);
            return false;
        }
        if (numel == 0) {
            why = fmt::format("empty tensor (shape {})", brief(shape));
            return false;
        }
        t.file = path_;
        t.name = key;
        t.numel = numel;
        t.storage = dts;
        t.dtype = *d;
        t.wide = delivered_as(*d);
        if (const auto r = meta_roles_.find(key); r != meta_roles_.end()) t.role = r->second;  // stored, not guessed
        complete_guesses(t);
        return true;
    }

    // Roles stored in the header: "__metadata__": {"role:<tensor name>": "<role>"} (safetensors
    // metadata values are strings; docs/dumps.md). A value that is no role is a note, not a guess.
    void read_role_metadata(const nlohmann::json& header) {
        const auto m = header.find("__metadata__");
        if (m == header.end() || !m->is_object()) return;
        for (auto it = m->begin(); it != m->end(); ++it) {
            if (it.key().rfind("role:", 0) != 0) continue;
            const std::string tensor = it.key().substr(5);
            const auto role = it.value().is_string() ? parse_role(it.value().get<std::string>()) : std::nullopt;
            if (role)
                meta_roles_[tensor] = *role;
            else
                notes_.push_back(
                    {path_, tensor,
                     fmt::format(
                         "__metadata__ '{}' = {} is not a role (activation, weight, "
                         "gradient, optimizer_state): ignored",
                         io::quoted(it.key(), 80),
                         io::quoted(it.value().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), 80))});
        }
    }

    ReadOptions opts_;
    bool raw_ = false;
    bool int8_bytes_ = false;  // raw: I8 tensors listed as one-byte codes too (INT8 weights)
    std::map<std::string, Role> meta_roles_;
    Fd fd_;
    std::map<std::string, Entry> entries_;
    std::vector<std::uint8_t> buf_, scratch_;

    // read()'s piece buffers, kept across tensors and allocated without initialisation (pread
    // overwrites every byte it delivers): a std::vector per piece and tensor zero-filled each
    // buffer first, an extra pass over the data (7% of `checkpoint check`'s time in perf, besides
    // the page faults of fresh allocations).
    std::vector<std::unique_ptr<unsigned char[]>> pieces_;
    std::size_t piece_bytes_ = 0;
    void reserve_pieces(std::size_t n, std::size_t bytes) {
        if (bytes > piece_bytes_) {
            pieces_.clear();
            piece_bytes_ = bytes;
        }
        while (pieces_.size() < n) pieces_.emplace_back(new unsigned char[piece_bytes_]);
    }
};

}  // namespace

std::unique_ptr<Source> open_safetensors(const std::string& path, const ReadOptions& opts, bool raw, bool int8_bytes) {
    return std::make_unique<SafetensorsSource>(path, opts, raw, int8_bytes);
}

}  // namespace fp8kit::dump::detail
