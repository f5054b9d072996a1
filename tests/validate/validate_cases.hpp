// Kernel outputs with mismatches of every class injected, and a deliberately plain host scan of
// them (every element, every one of the 60 policies through emu::encode, no tables, no grouping),
// for the tests of validate_mismatches() (tests/validate) and of the GPU scan (tests/gpu).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "fp8kit/emu/emu.hpp"
#include "fp8kit/validate.hpp"

namespace validate_cases {

using namespace fp8kit;

struct Case {
    Wide from = Wide::f32;
    Format to = Format::e4m3;
    Policy ref{Rounding::nearest_even, Overflow::saturate_all, NanEncoding::canonical};
    ScaleMode mode = ScaleMode::none;
    BlockLayout layout = BlockLayout::tensor;
    std::size_t rows = 1, cols = 1;
    // Injected: each element's code is replaced with probability `inject` by another rule's code
    // (another rounding, overflow or NaN encoding, zero, rounding through bfloat16, the unscaled
    // input, a random code). `follow`: without injection, the codes of this policy instead of ref.
    double inject = 0.05;
    bool use_follow = false;
    Policy follow{};
    std::uint64_t seed = 1;
};

struct Data {
    Case c;
    std::vector<std::uint64_t> bits;   // input bits per element
    std::vector<unsigned char> input;  // the same as stored (1, 2, 4 or 8 bytes each)
    std::vector<std::uint8_t> codes;
    std::vector<float> scales;  // raw S per block (one for tensor scaling)
    std::size_t n() const { return bits.size(); }

    ValidateRequest request() const {
        ValidateRequest rq;
        rq.from = c.from;
        rq.to = c.to;
        rq.policy = c.ref;
        rq.input = input.data();
        rq.codes = codes.data();
        rq.n = n();
        rq.scaling.mode = c.mode;
        rq.scaling.layout = c.layout;
        rq.scaling.rows = c.rows;
        rq.scaling.cols = c.cols;
        if (c.mode != ScaleMode::none && c.layout == BlockLayout::tensor) rq.scaling.value = scales[0];
        if (c.layout != BlockLayout::tensor) {
            rq.scaling.blocks = scales.data();
            rq.scaling.block_count = scales.size();
        }
        return rq;
    }
};

inline std::size_t wide_bytes(Wide w) { return w == Wide::f64 ? 8 : w == Wide::f32 ? 4 : 2; }

template <class T, class U>
T bits_as(U u) {
    T t;
    std::memcpy(&t, &u, sizeof t);
    return t;
}

// float32 bits narrowed to `w` (nearest even, IEEE), or widened to float64.
inline std::uint64_t from_f32(Wide w, std::uint32_t f) {
    constexpr Policy ieee{Rounding::nearest_even, Overflow::no_saturate, NanEncoding::signed_quiet};
    switch (w) {
        case Wide::f64: return bits_as<std::uint64_t>(static_cast<double>(bits_as<float>(f)));
        case Wide::f16: return emu::convert<emu::Binary32, emu::Binary16>(f, ieee);
        case Wide::bf16: return emu::convert<emu::Binary32, emu::BFloat16>(f, ieee);
        case Wide::f32: break;
    }
    return f;
}

// The value the reference rounds, as the bits of float32 (scaled f32/f16/bf16), float64 (f64) or
// the input itself (unscaled): validate.hpp's definition, transcribed.
struct Scaled {
    Wide type;
    std::uint64_t bits;
};
inline Scaled scaled_value(const Data& d, std::size_t i) {
    const std::uint64_t x = d.bits[i];
    if (d.c.mode == ScaleMode::none) return {d.c.from, x};
    std::size_t b = 0;
    if (d.c.layout != BlockLayout::tensor)
        b = (d.c.layout == BlockLayout::rowwise) ? i / d.c.cols
            : d.c.layout == BlockLayout::b1x128  ? (i / d.c.cols) * ((d.c.cols + 127) / 128) + (i % d.c.cols) / 128
            : d.c.layout == BlockLayout::mx32    ? (i / d.c.cols) * ((d.c.cols + 31) / 32) + (i % d.c.cols) / 32
                                              : (i / d.c.cols / 128) * ((d.c.cols + 127) / 128) + (i % d.c.cols) / 128;
    const float s = d.scales[b];
    const float m = d.c.mode == ScaleMode::scale ? s : 1.0f / s;
    if (d.c.from == Wide::f64) return {Wide::f64, bits_as<std::uint64_t>(bits_as<double>(x) * static_cast<double>(m))};
    float w;
    if (d.c.from == Wide::f32)
        w = bits_as<float>(static_cast<std::uint32_t>(x));
    else if (d.c.from == Wide::bf16)
        w = bits_as<float>(static_cast<std::uint32_t>(x) << 16);
    else
        w = bits_as<float>(static_cast<std::uint32_t>(
            emu::convert<emu::Binary16, emu::Binary32>(static_cast<std::uint16_t>(x), emu::kDecodePolicy)));
    return {Wide::f32, bits_as<std::uint32_t>(w * m)};
}

inline std::uint8_t code_of(const Data& d, const Scaled& v, const Policy& p) {
    return emu::encode(d.c.to, v.type, v.bits, p);
}

// One random input element (as float32 first), with specials, subnormals and ties mixed in.
inline std::uint64_t random_input(Wide w, std::mt19937_64& rng) {
    const std::uint64_t r = rng();
    switch (r % 16) {
        case 0: return w == Wide::f64 ? rng() : w == Wide::f32 ? (rng() & 0xFFFFFFFFu) : (rng() & 0xFFFFu);  // any bits
        case 1: return from_f32(w, 0x7F800000u | static_cast<std::uint32_t>(rng() & 0x807FFFFFu));  // Inf / NaN
        case 2: return from_f32(w, static_cast<std::uint32_t>(rng() & 0x807FFFFFu));                // f32 subnormal
        case 3: {  // near a tie of an 8-bit grid: few mantissa bits set
            const std::uint32_t e = 127 - 20 + static_cast<std::uint32_t>(rng() % 40);
            return from_f32(w, static_cast<std::uint32_t>(rng() & 0x80700000u) | 0x00080000u | (e << 23));
        }
        default: {
            const std::uint32_t e = 127 - 24 + static_cast<std::uint32_t>(rng() % 48);  // 2^-24 .. 2^23
            return from_f32(w, static_cast<std::uint32_t>(rng() & 0x807FFFFFu) | (e << 23));
        }
    }
}

inline float random_scale(std::mt19937_64& rng) {
    const int e = static_cast<int>(rng() % 17) - 8;
    const float frac = (rng() % 3 == 0) ? 1.0f : 1.0f + static_cast<float>(rng() % 1000) / 1000.0f;
    return std::ldexp(frac, e);
}

inline constexpr Policy kIeee{Rounding::nearest_even, Overflow::no_saturate, NanEncoding::signed_quiet};

// A scaled value as float32 bits (exact except from float64: one IEEE cast).
inline std::uint32_t as_f32(const Scaled& v) {
    switch (v.type) {
        case Wide::f64: return static_cast<std::uint32_t>(emu::convert<emu::Binary64, emu::Binary32>(v.bits, kIeee));
        case Wide::f16:
            return static_cast<std::uint32_t>(
                emu::convert<emu::Binary16, emu::Binary32>(static_cast<std::uint16_t>(v.bits), emu::kDecodePolicy));
        case Wide::bf16: return static_cast<std::uint32_t>(v.bits) << 16;
        case Wide::f32: break;
    }
    return static_cast<std::uint32_t>(v.bits);
}

// Another rule's code for element i (see Case::inject).
inline std::uint8_t injected(const Data& d, std::size_t i, const Scaled& v, std::mt19937_64& rng) {
    const Policy ref = d.c.ref;
    const Overflow other_ov[] = {Overflow::saturate_all, Overflow::saturate_finite, Overflow::no_saturate};
    const NanEncoding other_nan[] = {NanEncoding::canonical, NanEncoding::signed_all_ones, NanEncoding::signed_quiet,
                                     NanEncoding::signed_quiet_payload};
    switch (rng() % 8) {
        case 0: return code_of(d, v, {Rounding::toward_zero, ref.overflow, ref.nan});
        case 1:
            return code_of(d, v,
                           {rng() % 2 ? Rounding::toward_positive : Rounding::toward_negative, ref.overflow, ref.nan});
        case 2: return code_of(d, v, {ref.rounding, other_ov[rng() % 3], ref.nan});
        case 3: return code_of(d, v, {ref.rounding, ref.overflow, other_nan[rng() % 4]});
        case 4: return 0;
        case 5: {  // through bfloat16 first (an IEEE cast)
            const auto h = emu::convert<emu::Binary32, emu::BFloat16>(as_f32(v), kIeee);
            return emu::encode(d.c.to, Wide::bf16, h, ref);
        }
        case 6: return emu::encode(d.c.to, d.c.from, d.bits[i], ref);  // the scale not applied
        default: return static_cast<std::uint8_t>(rng() % static_cast<std::uint64_t>(emu::code_count(d.c.to)));
    }
}

}  // namespace validate_cases

namespace validate_cases {

// The case's data: inputs, scales, and codes (the reference's, or `follow`'s, with injections).
inline Data make(const Case& c) {
    Data d;
    d.c = c;
    std::mt19937_64 rng(c.seed);
    const std::size_t n = c.rows * c.cols;
    const std::size_t nb = c.mode == ScaleMode::none         ? 0
                           : c.layout == BlockLayout::tensor ? 1
                                                             : block_scale_count(c.layout, c.rows, c.cols);
    for (std::size_t b = 0; b < nb; ++b) d.scales.push_back(random_scale(rng));
    const std::size_t wb = wide_bytes(c.from);
    d.input.resize(n * wb);
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t x = random_input(c.from, rng);
        d.bits.push_back(x);
        std::memcpy(d.input.data() + i * wb, &x, wb);  // little-endian: the low bytes
    }
    std::uniform_real_distribution<double> u(0, 1);
    for (std::size_t i = 0; i < n; ++i) {
        const Scaled v = scaled_value(d, i);
        std::uint8_t a = code_of(d, v, c.use_follow ? c.follow : c.ref);
        if (u(rng) < c.inject) a = injected(d, i, v, rng);
        d.codes.push_back(a);
    }
    return d;
}

// The plain scan: every element against the reference, every policy on every element.
inline MismatchScan plain_scan(const Data& d) {
    MismatchScan s;
    s.n = d.n();
    s.policies = (std::uint64_t{1} << kValidatePolicyCount) - 1;
    for (std::size_t i = 0; i < d.n(); ++i) {
        const Scaled v = scaled_value(d, i);
        const std::uint8_t a = d.codes[i];
        if (code_of(d, v, d.c.ref) != a) {
            s.indices.push_back(i);
            s.input_bits.push_back(d.bits[i]);
            s.codes.push_back(a);
        }
        for (int p = 0; p < kValidatePolicyCount; ++p)
            if (((s.policies >> p) & 1u) && code_of(d, v, validate_policy(p)) != a)
                s.policies &= ~(std::uint64_t{1} << p);
    }
    return s;
}

}  // namespace validate_cases
