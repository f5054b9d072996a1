// cuda_fp4.h and cuda_fp6.h host functions as an independent oracle for E2M1, E2M3 and E3M2:
// every float32 input ([exhaustive]), every float16 and bfloat16 input, the packed x2 variants,
// binary64 inputs and the decodes, in both roundings the headers offer (cudaRoundNearest and
// cudaRoundZero; they always saturate, and a NaN becomes +MAXNORM). Compiled wherever the CUDA
// toolkit's headers exist (CUDA 12.8+, no GPU needed); skipped, and reported so, elsewhere.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "fp8kit/convert/quantize.hpp"
#include "fp8kit/emu/emu.hpp"
#include "fp8kit/emu/pack.hpp"

#if FP8KIT_HAVE_CUDA_FP8_H && __has_include(<cuda_fp4.h>)
#include <cuda_fp4.h>  // includes cuda_fp6.h
#endif

#if defined(__CUDA_FP4_H__) && CUDART_VERSION >= 12080

using namespace fp8kit::emu;

namespace {

float as_float(std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// The two roundings of the headers as fp8kit policies: cudaRoundNearest is the cuda-satfinite
// profile; cudaRoundZero is the same with truncation.
struct Mode {
    cudaRoundMode cuda;
    Rounding rounding;
};
const Mode kModes[] = {{cudaRoundNearest, Rounding::nearest_even}, {cudaRoundZero, Rounding::toward_zero}};

Policy policy_of(Format f, Rounding r) {
    const ProfileResult pr = profile_policy(Profile::cuda_satfinite, f);
    REQUIRE(pr.ok);
    Policy p = pr.policy;
    p.rounding = r;
    return p;
}

// The header's conversion of one float32 to format f, through its public functions.
std::uint8_t cuda_from_float(Format f, float x, cudaRoundMode m) {
    if (f == Format::e2m1) return __nv_cvt_float_to_fp4(x, __NV_E2M1, m);
    return __nv_cvt_float_to_fp6(x, f == Format::e2m3 ? __NV_E2M3 : __NV_E3M2, m);
}
std::uint8_t cuda_from_double(Format f, double x, cudaRoundMode m) {
    if (f == Format::e2m1) return __nv_cvt_double_to_fp4(x, __NV_E2M1, m);
    return __nv_cvt_double_to_fp6(x, f == Format::e2m3 ? __NV_E2M3 : __NV_E3M2, m);
}
__nv_fp6_interpretation_t fp6_kind(Format f) { return f == Format::e2m3 ? __NV_E2M3 : __NV_E3M2; }

const Format kFormats[] = {Format::e2m1, Format::e2m3, Format::e3m2};

}  // namespace

TEST_CASE("E2M1/E2M3/E3M2 equal cuda_fp4.h / cuda_fp6.h on all 2^32 float32 inputs", "[emu][cuda-host][exhaustive]") {
    for (Format f : kFormats) {
        for (const Mode& m : kModes) {
            const Policy p = policy_of(f, m.rounding);
            // fp8kit's side through encode_bit_range, the library's bulk loop (emu::convert inlined
            // per format), a slice at a time: per-element encode() with its run-time format
            // switch cost about twice the CPU time.
            constexpr std::size_t kSlice = std::size_t{1} << 24;
            std::vector<std::uint8_t> ours(kSlice);
            std::uint64_t bad = 0, first = ~0ull;
            for (std::uint64_t s = 0; s < (1ull << 32); s += kSlice) {
                fp8kit::encode_bit_range(f, Wide::f32, s, kSlice, ours.data(), p);
#pragma omp parallel for schedule(static) reduction(+ : bad) reduction(min : first)
                for (std::int64_t i = 0; i < static_cast<std::int64_t>(kSlice); ++i) {
                    const auto b = static_cast<std::uint32_t>(s + static_cast<std::uint64_t>(i));
                    if (cuda_from_float(f, as_float(b), m.cuda) != ours[static_cast<std::size_t>(i)]) {
                        ++bad;
                        if (b < first) first = b;
                    }
                }
            }
            INFO("format " << int(f) << " rounding " << int(m.rounding) << " first mismatch 0x" << std::hex << first);
            CHECK(bad == 0);
        }
    }
}

// The packing order is a layout property, so this needs no 2^32 loop (each element's conversion
// is checked exhaustively above): 2^26 pairs spread over the whole float32 range (a stride of 64,
// the second element drawn from another part of the range) cover every code in both nibbles.
TEST_CASE("__nv_cvt_float2_to_fp4x2 packs .x in the low nibble", "[emu][cuda-host]") {
    for (const Mode& m : kModes) {
        const Policy p = policy_of(Format::e2m1, m.rounding);
        std::uint64_t bad = 0;
        std::uint32_t seen_low = 0, seen_high = 0;  // one bit per code seen in each nibble
#pragma omp parallel for schedule(static) reduction(+ : bad) reduction(| : seen_low, seen_high)
        for (std::int64_t i = 0; i < (std::int64_t{1} << 26); ++i) {
            const auto b = static_cast<std::uint32_t>(i) * 64u + 17u;
            const std::uint32_t c = (b << 16) | (b >> 16);  // a second input from every part of the range
            const float2 v{as_float(b), as_float(c)};
            const std::uint8_t want = pack_fp4(encode(Format::e2m1, Wide::f32, b, p),
                                               encode(Format::e2m1, Wide::f32, c, p), NibbleOrder::low_first);
            const std::uint8_t got = __nv_cvt_float2_to_fp4x2(v, __NV_E2M1, m.cuda);
            if (got != want) ++bad;
            seen_low |= 1u << (got & 0xF);
            seen_high |= 1u << (got >> 4);
        }
        CHECK(bad == 0);
        CHECK(seen_low == 0xFFFFu);
        CHECK(seen_high == 0xFFFFu);
    }
}

TEST_CASE("E2M1/E2M3/E3M2 equal cuda_fp4.h / cuda_fp6.h on all float16 and bfloat16 inputs", "[emu][cuda-host]") {
    for (Format f : kFormats) {
        for (const Mode& m : kModes) {
            const Policy p = policy_of(f, m.rounding);
            for (std::uint32_t b = 0; b < 65536; ++b) {
                __half_raw h;
                h.x = static_cast<unsigned short>(b);
                __nv_bfloat16_raw bf;
                bf.x = static_cast<unsigned short>(b);
                const bool fp4 = f == Format::e2m1;
                const std::uint8_t got_h = fp4 ? __nv_cvt_halfraw_to_fp4(h, __NV_E2M1, m.cuda)
                                               : __nv_cvt_halfraw_to_fp6(h, fp6_kind(f), m.cuda);
                const std::uint8_t got_bf = fp4 ? __nv_cvt_bfloat16raw_to_fp4(bf, __NV_E2M1, m.cuda)
                                                : __nv_cvt_bfloat16raw_to_fp6(bf, fp6_kind(f), m.cuda);
                if (got_h != encode(f, Wide::f16, b, p)) FAIL("f16 0x" << std::hex << b << " format " << int(f));
                if (got_bf != encode(f, Wide::bf16, b, p)) FAIL("bf16 0x" << std::hex << b << " format " << int(f));

                // The x2 variants: .x then .y, each its own code (fp6x2: one per byte, .x low).
                const std::uint32_t c = b ^ 0xA5C3u;
                __half2_raw h2;
                h2.x = static_cast<unsigned short>(b);
                h2.y = static_cast<unsigned short>(c);
                __nv_bfloat162_raw bf2;
                bf2.x = static_cast<unsigned short>(b);
                bf2.y = static_cast<unsigned short>(c);
                const std::uint8_t ex = encode(f, Wide::f16, b, p), ey = encode(f, Wide::f16, c, p);
                const std::uint8_t bx = encode(f, Wide::bf16, b, p), by = encode(f, Wide::bf16, c, p);
                if (fp4) {
                    REQUIRE(__nv_cvt_halfraw2_to_fp4x2(h2, __NV_E2M1, m.cuda) ==
                            pack_fp4(ex, ey, NibbleOrder::low_first));
                    REQUIRE(__nv_cvt_bfloat16raw2_to_fp4x2(bf2, __NV_E2M1, m.cuda) ==
                            pack_fp4(bx, by, NibbleOrder::low_first));
                } else {
                    REQUIRE(__nv_cvt_halfraw2_to_fp6x2(h2, fp6_kind(f), m.cuda) == (ey << 8 | ex));
                    REQUIRE(__nv_cvt_bfloat16raw2_to_fp6x2(bf2, fp6_kind(f), m.cuda) == (by << 8 | bx));
                }
            }
        }
    }
}

TEST_CASE("binary64 inputs round once, as cuda_fp4.h / cuda_fp6.h's double conversions do", "[emu][cuda-host]") {
    std::uint64_t state = 0x9E3779B97F4A7C15ull;
    auto next = [&] {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        return state;
    };
    for (int i = 0; i < 1000000; ++i) {
        std::uint64_t b = next();
        if (i % 2)
            b = (b & 0x800FFFFFFFFFFFFFull) | (std::uint64_t(1023 - 12 + (next() % 24)) << 52);  // |x| in 2^-12..2^12
        double d;
        std::memcpy(&d, &b, 8);
        for (Format f : kFormats)
            for (const Mode& m : kModes) {
                const std::uint8_t want = cuda_from_double(f, d, m.cuda);
                const std::uint8_t got = encode(f, Wide::f64, b, policy_of(f, m.rounding));
                if (want != got) FAIL("double 0x" << std::hex << b << " cuda " << int(want) << " ours " << int(got));
            }
    }
}

TEST_CASE("every E2M1/E2M3/E3M2 code decodes as __nv_cvt_fp4/fp6_to_halfraw does", "[emu][cuda-host]") {
    for (Format f : kFormats) {
        for (int c = 0; c < code_count(f); ++c) {
            const auto code = static_cast<std::uint8_t>(c);
            const __half_raw h = f == Format::e2m1 ? __nv_cvt_fp4_to_halfraw(code, __NV_E2M1)
                                                   : __nv_cvt_fp6_to_halfraw(code, fp6_kind(f));
            CHECK(h.x == decode(f, Wide::f16, code));
        }
    }
    for (int c = 0; c < 256; ++c) {  // both nibbles of a packed byte: .x from the low one
        const __half2_raw h2 = __nv_cvt_fp4x2_to_halfraw2(static_cast<__nv_fp4x2_storage_t>(c), __NV_E2M1);
        const auto [lo, hi] = unpack_fp4(static_cast<std::uint8_t>(c), NibbleOrder::low_first);
        CHECK(h2.x == decode(Format::e2m1, Wide::f16, lo));
        CHECK(h2.y == decode(Format::e2m1, Wide::f16, hi));
    }
}

#else
TEST_CASE("cuda_fp4.h / cuda_fp6.h host oracle", "[emu][cuda-host]") {
    WARN(
        "SKIPPED: the CUDA toolkit's cuda_fp4.h (CUDA 12.8+) was not found at configure time, so this oracle is not "
        "compiled");
}
#endif
