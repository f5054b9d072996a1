// Telling HDF5 from safetensors by content, and what both readers share.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

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

void deliver(DType d, const void* stored, std::size_t n, std::uint64_t first,
             std::vector<std::uint8_t>& scratch, const ChunkFn& fn) {
    const Wide w = delivered_as(d);
    if (const auto f = fp8_format(d)) {
        // FP4 / FP6 codes sit in the low bits of a byte: a set high bit means the data is not
        // such codes (packed two per byte, or another type), never a value to decode.
        const int bits = emu::with_format(*f, [](auto fmt) { return decltype(fmt)::total_bits; });
        if (bits < 8) {
            const auto* c = static_cast<const std::uint8_t*>(stored);
            for (std::size_t i = 0; i < n; ++i)
                if (c[i] >> bits)
                    throw BadCodes(fmt::format("{} codes are {}-bit, one per byte, but element {} is 0x{:02x} "
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

bool mul_overflows(std::uint64_t a, std::uint64_t b, std::uint64_t& out) {
    return __builtin_mul_overflow(a, b, &out);
}

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

bool is_hdf5_file(const std::string& path) {
    static const unsigned char kSig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    std::ifstream in(path, std::ios::binary);
    if (!in) return false;
    in.seekg(0, std::ios::end);
    const std::streamoff size = in.tellg();
    // The superblock is at 0 or after a user block of 512, 1024, 2048, ... bytes.
    for (std::streamoff at = 0; at + 8 <= size; at = at == 0 ? 512 : at * 2) {
        unsigned char buf[8];
        in.seekg(at);
        if (!in.read(reinterpret_cast<char*>(buf), 8)) return false;
        if (std::memcmp(buf, kSig, 8) == 0) return true;
    }
    return false;
}

bool is_dump_file(const std::string& path) {
    if (is_hdf5_file(path) || detail::is_zip_file(path)) return true;
    std::ifstream in(path, std::ios::binary);
    unsigned char h[9];
    if (!in.read(reinterpret_cast<char*>(h), 9)) return false;
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | h[i];
    return n > 1 && n < (std::uint64_t{100} << 20) && h[8] == '{';  // safetensors header
}

std::unique_ptr<Source> open_source(const std::string& path, const ReadOptions& opts) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        throw DumpError(path, "", fmt::format("cannot open: {}", std::strerror(errno)));
    if (S_ISDIR(st.st_mode)) throw DumpError(path, "", "is a directory, not a dump file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw DumpError(path, "", fmt::format("cannot open: {}", std::strerror(errno)));
    if (is_hdf5_file(path)) return detail::open_hdf5(path, opts);
    if (detail::is_zip_file(path)) return detail::open_torch(path, opts);  // torch.save (TE DumpTensors)
    unsigned char head[9] = {};
    in.read(reinterpret_cast<char*>(head), 9);
    const auto got = in.gcount();
    const bool named_st = path.size() >= 12 && path.compare(path.size() - 12, 12, ".safetensors") == 0;
    if ((got == 9 && head[8] == '{') || named_st) return detail::open_safetensors(path, opts);
    throw DumpError(path, "",
                    fmt::format("neither an HDF5 file (no HDF5 signature), a safetensors file "
                                "(no JSON header) nor a torch.save zip archive{}",
                                st.st_size < 9 ? fmt::format(": only {} bytes", st.st_size) : ""));
}

}  // namespace fp8kit::dump
