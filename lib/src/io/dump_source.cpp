// Telling HDF5 from safetensors by content, and what both readers share.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "fp8kit/io/gate.hpp"
#include "io/dump_internal.hpp"
#include "io/torch_dump.hpp"
#include "io/zip_stored.hpp"
#include "fp8kit/convert/quantize.hpp"

namespace fp8kit::dump {
namespace detail {

std::size_t stored_size(DType d) {
    if (fp8_format(d)) return 1;
    return wide_size(delivered_as(d));
}

std::size_t elements_per_read(DType d, const ReadOptions& opts) {
    const std::size_t widest = std::max(stored_size(d), wide_size(delivered_as(d)));
    return std::max<std::size_t>(1, opts.chunk_bytes / widest);
}

void deliver(DType d, const void* stored, std::size_t n, std::uint64_t first, std::vector<std::uint8_t>& scratch,
             const ChunkFn& fn) {
    const Wide w = delivered_as(d);
    if (const auto f = fp8_format(d)) {
        // FP4 / FP6 codes sit in the low bits of a byte: a set high bit means the data is not
        // such codes (packed two per byte, or another type), never a value to decode.
        const int bits = emu::with_format(*f, [](auto fmt) { return decltype(fmt)::total_bits; });
        if (bits < 8) {
            const auto* c = static_cast<const std::uint8_t*>(stored);
            for (std::size_t i = 0; i < n; ++i)
                if (c[i] >> bits)
                    throw BadCodes(
                        fmt::format("{} codes are {}-bit, one per byte, but element {} is 0x{:02x} "
                                    "(packed two per byte? store one code per byte, as ml_dtypes does)",
                                    name(d), bits, first + i, c[i]));
        }
        scratch.resize(n * wide_size(w));
        decode_array(*f, w, static_cast<const std::uint8_t*>(stored), scratch.data(), n);
        fn(Chunk{w, scratch.data(), n, first});
    } else {
        fn(Chunk{w, stored, n, first});
    }
}

void complete_guesses(TensorInfo& t) {
    if (!t.step) {
        // The tensor's name, then the file's path: guess_step keeps the innermost component that
        // names a step, so the file name wins over its folder, and the folder over its parents
        // (run/step_000100/model.safetensors, iter_500/x.h5).
        t.step = guess_step(t.name);
        if (!t.step) t.step = guess_step(t.file);
        t.step_guessed = t.step.has_value();
    }
    if (t.role == Role::unknown && !t.role_guessed) {
        t.role = guess_role(t.name);
        t.role_guessed = t.role != Role::unknown;
    }
}

bool mul_overflows(std::uint64_t a, std::uint64_t b, std::uint64_t& out) { return __builtin_mul_overflow(a, b, &out); }

}  // namespace detail

void Source::read_runs(const TensorInfo& t, const ChunkFn& fn) {
    struct Reset {
        bool& flag;
        ~Reset() { flag = false; }
    } reset{runs_};
    runs_ = true;
    read(t, fn);
}

std::shared_ptr<const void> Source::map(const TensorInfo&) { return nullptr; }

void Source::read_into(const TensorInfo& t, void* dest, const PlacedFn& placed) {
    const std::size_t esize = wide_size(t.wide);
    auto* out = static_cast<unsigned char*>(dest);
    read(t, [&](const Chunk& c) {
        std::memcpy(out + c.first * esize, c.bits, c.count * esize);
        if (placed) placed(c.first, c.count);
    });
}

namespace {

// The first bytes of an input, read through the gate: nothing (false) for what is not a readable
// regular file, so that the probes never block on a FIFO.
bool read_at(const io::InputFile& f, std::uint64_t at, unsigned char* buf, std::size_t n) {
    return at + n <= f.size() && ::pread(f.fd(), buf, n, static_cast<off_t>(at)) == static_cast<ssize_t>(n);
}

bool hdf5_signature(const io::InputFile& f) {
    static const unsigned char kSig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    // The superblock is at 0 or after a user block of 512, 1024, 2048, ... bytes.
    for (std::uint64_t at = 0; at + 8 <= f.size(); at = at == 0 ? 512 : at * 2) {
        unsigned char buf[8];
        if (!read_at(f, at, buf, 8)) return false;
        if (std::memcmp(buf, kSig, 8) == 0) return true;
    }
    return false;
}

bool zip_signature(const io::InputFile& f) {
    unsigned char h[4];
    return read_at(f, 0, h, 4) && h[0] == 'P' && h[1] == 'K' && h[2] == 3 && h[3] == 4;
}

std::optional<io::InputFile> try_open(const std::string& path) {
    try {
        return io::open_input(path);
    } catch (const io::InputError&) {
        return std::nullopt;
    }
}

}  // namespace

bool is_hdf5_file(const std::string& path) {
    const auto f = try_open(path);
    return f && hdf5_signature(*f);
}

bool is_dump_file(const std::string& path) {
    const auto f = try_open(path);
    if (!f) return false;
    if (hdf5_signature(*f) || zip_signature(*f)) return true;
    unsigned char h[9];
    if (!read_at(*f, 0, h, 9)) return false;
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | h[i];
    return n > 1 && n < (std::uint64_t{100} << 20) && h[8] == '{';  // safetensors header
}

std::string folder_hint(const std::string& dir) {
    std::string d = dir;
    while (d.size() > 1 && d.back() == '/') d.pop_back();
    return fmt::format(
        "give the files, or globs in the layout docs/dumps.md documents, such as "
        "'{0}/rank_*/*.pt' '{0}/rank_*/iter_*/*.pt' (TransformerEngine tensor_dumps/)",
        io::quoted(d));
}

std::unique_ptr<Source> open_source(const std::string& path, const ReadOptions& opts) {
    if (io::is_folder(path)) throw DumpError(path, "", "is a directory, not a dump file: " + folder_hint(path));
    std::optional<io::InputFile> f;
    try {
        f = io::open_input(path);
    } catch (const io::InputError& e) {
        throw DumpError(path, "", e.reason);
    }
    if (hdf5_signature(*f)) return detail::open_hdf5(path, opts);
    if (zip_signature(*f)) return detail::open_torch(path, opts);  // torch.save (TE DumpTensors)
    unsigned char head[9] = {};
    const bool got = read_at(*f, 0, head, 9);
    const bool named_st = path.size() >= 12 && path.compare(path.size() - 12, 12, ".safetensors") == 0;
    if ((got && head[8] == '{') || named_st) return detail::open_safetensors(path, opts);
    throw DumpError(path, "",
                    fmt::format("neither an HDF5 file (no HDF5 signature), a safetensors file "
                                "(no JSON header) nor a torch.save zip archive{}",
                                f->size() < 9 ? fmt::format(": only {} bytes", f->size()) : ""));
}

}  // namespace fp8kit::dump
