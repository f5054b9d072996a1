// cuda_fp8.h's own host functions as an independent oracle, on every float32, float16 and
// bfloat16 input: profiles cuda-satfinite and cuda-nosat, and E8M0 in both roundings. Compiled
// wherever the CUDA toolkit's headers exist (no GPU needed); skipped, and reported so, elsewhere.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "fp8kit/convert/quantize.hpp"
#include "fp8kit/emu/emu.hpp"

#if FP8KIT_HAVE_CUDA_FP8_H
#include <cuda_fp8.h>

using namespace fp8kit::emu;

namespace {

// Every float32 input: fp8kit's side through encode_bit_range (the library's bulk loop: the SIMD
// kernels where they serve the policy, else emu::convert inlined per format), a slice at a time,
// and the oracle's per element. The bulk loop is the one every array conversion takes, and
// test_simd_encode proves it equal to emu::convert on all 2^32 inputs; per-element encode() with
// its run-time format switch cost this test about 7x the CPU time.
template <class Oracle>
std::uint64_t count_mismatches_f32(Format fmt, const Policy& p, Oracle oracle, std::uint64_t* first) {
    constexpr std::size_t kSlice = std::size_t{1} << 24;
    std::vector<std::uint8_t> ours(kSlice);
    std::uint64_t bad = 0;
    std::uint64_t first_bad = ~0ull;
    for (std::uint64_t s = 0; s < (1ull << 32); s += kSlice) {
        fp8kit::encode_bit_range(fmt, Wide::f32, s, kSlice, ours.data(), p);
        const auto count = static_cast<std::int64_t>(kSlice);
#pragma omp parallel for schedule(static) reduction(+ : bad) reduction(min : first_bad)
        for (std::int64_t i = 0; i < count; ++i) {
            if (oracle(s + static_cast<std::uint64_t>(i)) != ours[static_cast<std::size_t>(i)]) {
                ++bad;
                if (s + static_cast<std::uint64_t>(i) < first_bad) first_bad = s + static_cast<std::uint64_t>(i);
            }
        }
    }
    *first = first_bad;
    return bad;
}

float as_float(std::uint64_t b) {
    const auto u = static_cast<std::uint32_t>(b);
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

}  // namespace

TEST_CASE("cuda-satfinite and cuda-nosat equal cuda_fp8.h on all 2^32 float32 inputs", "[emu][cuda-host][exhaustive]") {
    for (auto [sat, profile] :
         {std::pair{__NV_SATFINITE, Profile::cuda_satfinite}, std::pair{__NV_NOSAT, Profile::cuda_nosat}}) {
        for (auto [interp, fmt] : {std::pair{__NV_E4M3, Format::e4m3}, std::pair{__NV_E5M2, Format::e5m2}}) {
            const Policy p = profile_policy(profile, fmt).policy;
            std::uint64_t first = 0;
            const auto bad = count_mismatches_f32(
                fmt, p, [&](std::uint64_t b) { return __nv_cvt_float_to_fp8(as_float(b), sat, interp); }, &first);
            INFO("profile " << int(profile) << " format " << int(fmt) << " first mismatch 0x" << std::hex << first);
            CHECK(bad == 0);
        }
    }
}

#if CUDART_VERSION >= 12080  // __nv_cvt_float_to_e8m0 arrived in CUDA 12.8
TEST_CASE("E8M0 equals __nv_cvt_float_to_e8m0 on all 2^32 float32 inputs", "[emu][cuda-host][exhaustive]") {
    for (auto [sat, profile] :
         {std::pair{__NV_SATFINITE, Profile::cuda_satfinite}, std::pair{__NV_NOSAT, Profile::cuda_nosat}}) {
        for (auto [mode, r] :
             {std::pair{cudaRoundZero, Rounding::toward_zero}, std::pair{cudaRoundPosInf, Rounding::toward_positive}}) {
            const Policy p = profile_policy(profile, Format::e8m0, Wide::f32, r).policy;
            std::uint64_t first = 0;
            const auto bad = count_mismatches_f32(
                Format::e8m0, p, [&](std::uint64_t b) { return __nv_cvt_float_to_e8m0(as_float(b), sat, mode); },
                &first);
            INFO("sat " << int(sat) << " rounding " << int(r) << " first mismatch 0x" << std::hex << first);
            CHECK(bad == 0);
        }
    }
}

#endif

TEST_CASE("cuda profiles equal cuda_fp8.h on all float16 and bfloat16 inputs", "[emu][cuda-host]") {
    for (auto [sat, profile] :
         {std::pair{__NV_SATFINITE, Profile::cuda_satfinite}, std::pair{__NV_NOSAT, Profile::cuda_nosat}}) {
        for (auto [interp, fmt] : {std::pair{__NV_E4M3, Format::e4m3}, std::pair{__NV_E5M2, Format::e5m2}}) {
            const Policy p = profile_policy(profile, fmt).policy;
            for (std::uint32_t b = 0; b < 65536; ++b) {
                __half_raw h;
                h.x = static_cast<unsigned short>(b);
                __nv_bfloat16_raw bf;
                bf.x = static_cast<unsigned short>(b);
                if (__nv_cvt_halfraw_to_fp8(h, sat, interp) != encode(fmt, Wide::f16, b, p))
                    FAIL("f16 0x" << std::hex << b);
                if (__nv_cvt_bfloat16raw_to_fp8(bf, sat, interp) != encode(fmt, Wide::bf16, b, p))
                    FAIL("bf16 0x" << std::hex << b);
            }
        }
#if CUDART_VERSION >= 12080
        for (auto [mode, r] :
             {std::pair{cudaRoundZero, Rounding::toward_zero}, std::pair{cudaRoundPosInf, Rounding::toward_positive}}) {
            const Policy p = profile_policy(profile, Format::e8m0, Wide::f32, r).policy;
            for (std::uint32_t b = 0; b < 65536; ++b) {
                __nv_bfloat16_raw bf;
                bf.x = static_cast<unsigned short>(b);
                if (__nv_cvt_bfloat16raw_to_e8m0(bf, sat, mode) != encode(Format::e8m0, Wide::bf16, b, p))
                    FAIL("bf16 e8m0 0x" << std::hex << b);
            }
        }
#endif
    }
}

TEST_CASE("binary64 inputs round once, as cuda_fp8.h's double conversion does", "[emu][cuda-host]") {
    // Random doubles near every E4M3/E5M2 rounding boundary plus uniform bit patterns.
    std::uint64_t state = 0x9E3779B97F4A7C15ull;
    auto next = [&] {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        return state;
    };
    for (int i = 0; i < 2000000; ++i) {
        std::uint64_t b = next();
        if (i % 2)
            b = (b & 0x800FFFFFFFFFFFFFull) | (std::uint64_t(1023 - 20 + (next() % 40)) << 52);  // |x| in 2^-20..2^20
        double d;
        std::memcpy(&d, &b, 8);
        for (auto [sat, profile] :
             {std::pair{__NV_SATFINITE, Profile::cuda_satfinite}, std::pair{__NV_NOSAT, Profile::cuda_nosat}}) {
            for (auto [interp, fmt] : {std::pair{__NV_E4M3, Format::e4m3}, std::pair{__NV_E5M2, Format::e5m2}}) {
                const auto want = __nv_cvt_double_to_fp8(d, sat, interp);
                const auto got = encode(fmt, Wide::f64, b, profile_policy(profile, fmt, Wide::f64).policy);
                if (want != got) FAIL("double 0x" << std::hex << b << " cuda " << int(want) << " ours " << int(got));
            }
        }
    }
}

#else
TEST_CASE("cuda_fp8.h host oracle", "[emu][cuda-host]") {
    WARN("SKIPPED: the CUDA toolkit's cuda_fp8.h was not found at configure time, so this oracle is not compiled");
}
#endif
