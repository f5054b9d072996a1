#include "fp8kit/quantize.hpp"

#include <cstring>

#include "fp8kit/emu/emu.hpp"

namespace fp8kit {

std::size_t wide_size(Wide w) {
    switch (w) {
        case Wide::f64: return 8;
        case Wide::f32: return 4;
        case Wide::f16:
        case Wide::bf16: return 2;
    }
    return 4;
}

namespace {

template <class T>
T load(const void* in, std::size_t i) {
    T v;
    std::memcpy(&v, static_cast<const unsigned char*>(in) + i * sizeof(T), sizeof(T));
    return v;
}

template <class Src, class Dst>
void encode_loop(const void* in, std::uint8_t* out, std::size_t n, const Policy& policy,
                 std::uint64_t seed, std::uint64_t first_index) {
    using S = typename Src::storage_t;
    const auto count = static_cast<std::ptrdiff_t>(n);
    if (policy.rounding == Rounding::stochastic) {
#pragma omp parallel for schedule(static)
        for (std::ptrdiff_t i = 0; i < count; ++i)
            out[i] = emu::convert<Src, Dst>(load<S>(in, i), policy,
                                            emu::stochastic_bits(seed, first_index + i));
    } else {
#pragma omp parallel for schedule(static)
        for (std::ptrdiff_t i = 0; i < count; ++i)
            out[i] = emu::convert<Src, Dst>(load<S>(in, i), policy);
    }
}

}  // namespace

const char* encode_path(Format, Wide, const Policy&) { return "scalar"; }

void encode_array(Format to, Wide from, const void* in, std::uint8_t* out, std::size_t n,
                  const Policy& policy, std::uint64_t seed, std::uint64_t first_index) {
    emu::with_format(to, [&](auto dst) {
        emu::with_wide(from, [&](auto src) {
            encode_loop<decltype(src), decltype(dst)>(in, out, n, policy, seed, first_index);
        });
    });
}

void decode_array(Format from, Wide to, const std::uint8_t* in, void* out, std::size_t n) {
    emu::with_format(from, [&](auto src) {
        emu::with_wide(to, [&](auto dst) {
            using Src = decltype(src);
            using Dst = decltype(dst);
            using D = typename Dst::storage_t;
            D table[256];
            for (int c = 0; c < 256; ++c)
                table[c] = emu::convert<Src, Dst>(static_cast<std::uint8_t>(c), emu::kDecodePolicy);
            auto* o = static_cast<unsigned char*>(out);
            const auto count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for schedule(static)
            for (std::ptrdiff_t i = 0; i < count; ++i)
                std::memcpy(o + i * sizeof(D), &table[in[i]], sizeof(D));
        });
    });
}

void encode_bit_range(Format to, Wide from, std::uint64_t first_bits, std::size_t n,
                      std::uint8_t* out, const Policy& policy) {
    emu::with_format(to, [&](auto dst) {
        emu::with_wide(from, [&](auto src) {
            using Src = decltype(src);
            using Dst = decltype(dst);
            using S = typename Src::storage_t;
            const auto count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for schedule(static)
            for (std::ptrdiff_t i = 0; i < count; ++i)
                out[i] = emu::convert<Src, Dst>(static_cast<S>(first_bits + static_cast<std::uint64_t>(i)),
                                                policy);
        });
    });
}

}  // namespace fp8kit
