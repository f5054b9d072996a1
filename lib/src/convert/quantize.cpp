#include "fp8kit/convert/quantize.hpp"

#include <atomic>
#if defined(FP8KIT_X86_SIMD)
#include <cpuid.h>
#endif
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <cstring>

#include "fp8kit/emu/emu.hpp"
#include "convert/encode_serial.hpp"
#include "convert/quantize_simd.hpp"

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

// Element-wise loops below this many elements run on the calling thread: starting an OpenMP team
// costs more than converting them (readers decode small chunks one call at a time), and every
// element's result is independent of the split, so the output is the same either way.
constexpr std::ptrdiff_t kParallelMin = std::ptrdiff_t{1} << 14;

template <class Src, class Dst>
void encode_loop(const void* in, std::uint8_t* out, std::size_t n, const Policy& policy, std::uint64_t seed,
                 std::uint64_t first_index) {
    using S = typename Src::storage_t;
    const auto count = static_cast<std::ptrdiff_t>(n);
    if (policy.rounding == Rounding::stochastic) {
#pragma omp parallel for schedule(static) if (count >= kParallelMin)
        for (std::ptrdiff_t i = 0; i < count; ++i)
            out[i] = emu::convert<Src, Dst>(load<S>(in, i), policy, emu::stochastic_bits(seed, first_index + i));
    } else {
#pragma omp parallel for schedule(static) if (count >= kParallelMin)
        for (std::ptrdiff_t i = 0; i < count; ++i) out[i] = emu::convert<Src, Dst>(load<S>(in, i), policy);
    }
}

// ---- SIMD dispatch -------------------------------------------------------------------------

// The kernels' constants for destination F under `policy`; false where the kernels do not
// implement the policy. Formats other than E4M3/E5M2 differ in zero and NaN handling and stay
// on the scalar path.
template <class F>
bool simd_consts(const Policy& p, simd::EncodeConsts* c) {
    if (p.rounding != Rounding::nearest_even) return false;
    if (p.nan == NanEncoding::signed_quiet_payload) return false;
    const std::uint32_t special =
        F::has_inf ? static_cast<std::uint32_t>(F::inf_code) : static_cast<std::uint32_t>(F::nan_all_ones);
    const auto max = static_cast<std::uint32_t>(F::max_finite_code);
    c->round_shift = 23 - F::man_bits;
    c->rebias = static_cast<std::uint32_t>(127 - F::bias) << F::man_bits;
    c->min_normal = static_cast<std::uint32_t>(127 + F::emin) << 23;
    c->sub_base = static_cast<std::uint32_t>(150 + F::emin - F::man_bits);
    c->max_code = max;
    c->overflow_code = p.overflow == Overflow::no_saturate ? special : max;
    c->inf_code = p.overflow == Overflow::saturate_all ? max : special;
    switch (p.nan) {
        case NanEncoding::positive_max:  // formats with a NaN read these two as canonical (policy.hpp)
        case NanEncoding::negated_zero:
        case NanEncoding::canonical:
            c->nan_code = static_cast<std::uint32_t>(F::nan_all_ones);
            c->nan_sign = 0;
            break;
        case NanEncoding::signed_all_ones:
            c->nan_code = static_cast<std::uint32_t>(F::nan_all_ones);
            c->nan_sign = 0x80;
            break;
        case NanEncoding::signed_quiet:
            c->nan_code = static_cast<std::uint32_t>(F::nan_quiet);
            c->nan_sign = 0x80;
            break;
        case NanEncoding::signed_quiet_payload: return false;
    }
    return true;
}

bool simd_consts(Format to, Wide from, const Policy& p, simd::EncodeConsts* c) {
    if (from != Wide::f32 && from != Wide::f16 && from != Wide::bf16) return false;
    if (to == Format::e4m3) return simd_consts<emu::E4M3>(p, c);
    if (to == Format::e5m2) return simd_consts<emu::E5M2>(p, c);
    return false;
}

EncodePath initial_limit() {
    const char* force = std::getenv("FP8KIT_FORCE_SCALAR");
    const bool scalar = force && *force && std::strcmp(force, "0") != 0;
    return scalar ? EncodePath::scalar : EncodePath::avx512;
}

std::atomic<EncodePath>& limit_ref() {
    static std::atomic<EncodePath> limit{initial_limit()};
    return limit;
}

EncodePath active_path(Format to, Wide from, const Policy& policy, simd::EncodeConsts* c) {
    if (!simd_consts(to, from, policy, c)) return EncodePath::scalar;
    const EncodePath limit = limit_ref().load(std::memory_order_relaxed);
    if (limit >= EncodePath::avx512 && encode_path_supported(EncodePath::avx512)) return EncodePath::avx512;
    if (limit >= EncodePath::avx2 && encode_path_supported(EncodePath::avx2)) return EncodePath::avx2;
    return EncodePath::scalar;
}

// One call of the chosen kernel on a contiguous block (path != scalar).
void run_kernel(EncodePath path, Wide from, const simd::EncodeConsts& c, const void* in, std::uint8_t* out,
                std::size_t n, bool stream) {
#if defined(FP8KIT_X86_SIMD)
    const auto* in32 = static_cast<const std::uint32_t*>(in);
    const auto* in16 = static_cast<const std::uint16_t*>(in);
    if (path == EncodePath::avx512) {
        if (from == Wide::f32)
            simd::encode_f32_avx512(c, in32, out, n, stream);
        else if (from == Wide::f16)
            simd::encode_f16_avx512(c, in16, out, n, stream);
        else
            simd::encode_bf16_avx512(c, in16, out, n, stream);
    } else {
        if (from == Wide::f32)
            simd::encode_f32_avx2(c, in32, out, n, stream);
        else if (from == Wide::f16)
            simd::encode_f16_avx2(c, in16, out, n, stream);
        else
            simd::encode_bf16_avx2(c, in16, out, n, stream);
    }
#else
    (void)path, (void)from, (void)c, (void)in, (void)out, (void)n, (void)stream;
#endif
}

void run_range_kernel(EncodePath path, const simd::EncodeConsts& c, std::uint32_t first, std::uint8_t* out,
                      std::size_t n) {
#if defined(FP8KIT_X86_SIMD)
    if (path == EncodePath::avx512)
        simd::encode_f32_range_avx512(c, first, out, n);
    else
        simd::encode_f32_range_avx2(c, first, out, n);
#else
    (void)path, (void)c, (void)first, (void)out, (void)n;
#endif
}

// Blocks handed to one thread at a time: large enough to amortise the call, small enough to
// balance two threads on short arrays.
constexpr std::size_t kBlock = std::size_t{1} << 16;

// Arrays at least this long (2^23 elements: 32 MiB of f32, the size of this class of CPU's
// last-level cache) are written with non-temporal stores: the codes would not stay in cache
// anyway, and skipping the read-for-ownership of `out` saves 1 byte of traffic in 6.
constexpr std::size_t kStreamElements = std::size_t{1} << 23;

}  // namespace

#if defined(FP8KIT_X86_SIMD)
// CPUID leaf 1, ECX bit 29. Read directly: clang 14's __builtin_cpu_supports has no "f16c" (the
// fuzzing build with Debian's clang failed on it).
static bool cpu_has_f16c() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0;
}
#endif

bool encode_path_supported(EncodePath p) {
    switch (p) {
        case EncodePath::scalar: return true;
#if defined(FP8KIT_X86_SIMD)
        case EncodePath::avx2: {
            // cpuid once: in a virtual machine each cpuid traps to the hypervisor, and this is
            // asked per statistics call (10^5 tiny tensors: 9% of inspect's time).
            static const bool f16c = cpu_has_f16c();
            return __builtin_cpu_supports("avx2") && f16c;
        }
        case EncodePath::avx512: return __builtin_cpu_supports("avx512f");
#else
        case EncodePath::avx2:
        case EncodePath::avx512: return false;
#endif
    }
    return false;
}

void set_encode_path_limit(EncodePath p) { limit_ref().store(p); }
EncodePath encode_path_limit() { return limit_ref().load(); }

const char* encode_path(Format to, Wide from, const Policy& policy) {
    simd::EncodeConsts c{};
    switch (active_path(to, from, policy, &c)) {
        case EncodePath::avx512: return "avx512";
        case EncodePath::avx2: return "avx2";
        case EncodePath::scalar: break;
    }
    return "scalar";
}

void encode_array(Format to, Wide from, const void* in, std::uint8_t* out, std::size_t n, const Policy& policy,
                  std::uint64_t seed, std::uint64_t first_index) {
    simd::EncodeConsts c{};
    const EncodePath path = active_path(to, from, policy, &c);
    if (path != EncodePath::scalar) {
        const std::size_t size = wide_size(from);
        const auto blocks = static_cast<std::ptrdiff_t>((n + kBlock - 1) / kBlock);
        // Blocks are dealt out as threads come free: on a shared machine a thread that loses its
        // core does not hold the others at the barrier with a fixed half of the work. Every
        // element's code is independent of the split.
#pragma omp parallel for schedule(dynamic)
        for (std::ptrdiff_t b = 0; b < blocks; ++b) {
            const std::size_t first = static_cast<std::size_t>(b) * kBlock;
            const std::size_t m = n - first < kBlock ? n - first : kBlock;
            run_kernel(path, from, c, static_cast<const unsigned char*>(in) + first * size, out + first, m,
                       n >= kStreamElements);
        }
        return;
    }
    emu::with_format(to, [&](auto dst) {
        emu::with_wide(
            from, [&](auto src) { encode_loop<decltype(src), decltype(dst)>(in, out, n, policy, seed, first_index); });
    });
}

namespace detail {

void encode_array_serial(Format to, Wide from, const void* in, std::uint8_t* out, std::size_t n, const Policy& policy) {
    simd::EncodeConsts c{};
    const EncodePath path = active_path(to, from, policy, &c);
    if (path != EncodePath::scalar) {
        run_kernel(path, from, c, in, out, n, false);
        return;
    }
    emu::with_format(to, [&](auto dst) {
        emu::with_wide(from, [&](auto src) {
            using S = typename decltype(src)::storage_t;
            for (std::size_t i = 0; i < n; ++i)
                out[i] = emu::convert<decltype(src), decltype(dst)>(load<S>(in, i), policy);
        });
    });
}

}  // namespace detail

void decode_array(Format from, Wide to, const std::uint8_t* in, void* out, std::size_t n) {
    // FP4 and FP6 codes sit in the low bits of a byte: a set high bit is not a code of the format
    // (most likely packed or mislabelled data), and is refused rather than silently masked.
    const int count_codes = emu::code_count(from);
    if (count_codes < 256) {
        for (std::size_t i = 0; i < n; ++i)
            if (in[i] >= count_codes) {
                char msg[160];
                std::snprintf(msg, sizeof msg,
                              "decode: byte %zu holds 0x%02x, not a %s code (0x00..0x%02x, one code per byte)", i,
                              in[i], std::string(name(from)).c_str(), count_codes - 1);
                throw std::invalid_argument(msg);
            }
    }
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
#pragma omp parallel for schedule(static) if (count >= kParallelMin)
            for (std::ptrdiff_t i = 0; i < count; ++i) std::memcpy(o + i * sizeof(D), &table[in[i]], sizeof(D));
        });
    });
}

void encode_bit_range(Format to, Wide from, std::uint64_t first_bits, std::size_t n, std::uint8_t* out,
                      const Policy& policy) {
    simd::EncodeConsts c{};
    const EncodePath path = active_path(to, from, policy, &c);
    if (path != EncodePath::scalar) {
        constexpr std::size_t kBits = 4096;
        const auto blocks = static_cast<std::ptrdiff_t>((n + kBits - 1) / kBits);
#pragma omp parallel for schedule(dynamic, 4)  // as in encode_array
        for (std::ptrdiff_t b = 0; b < blocks; ++b) {
            const std::size_t first = static_cast<std::size_t>(b) * kBits;
            const std::size_t m = n - first < kBits ? n - first : kBits;
            const std::uint64_t base = first_bits + first;
            if (from == Wide::f32) {
                run_range_kernel(path, c, static_cast<std::uint32_t>(base), out + first, m);
            } else {  // 16-bit sources: the patterns go through a block that stays in L1
                std::uint16_t bits[kBits];
                for (std::size_t i = 0; i < m; ++i) bits[i] = static_cast<std::uint16_t>(base + i);
                run_kernel(path, from, c, bits, out + first, m, false);
            }
        }
        return;
    }
    emu::with_format(to, [&](auto dst) {
        emu::with_wide(from, [&](auto src) {
            using Src = decltype(src);
            using Dst = decltype(dst);
            using S = typename Src::storage_t;
            const auto count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for schedule(static) if (count >= kParallelMin)
            for (std::ptrdiff_t i = 0; i < count; ++i)
                out[i] = emu::convert<Src, Dst>(static_cast<S>(first_bits + static_cast<std::uint64_t>(i)), policy);
        });
    });
}

}  // namespace fp8kit
