// The per-element machinery of validate(), templated on the input format W, the format C the
// reference rounds from (W itself when unscaled; float32, or float64 for f64 inputs, when scaled)
// and the target F; Scaled says whether a scale multiplies the input first. Private to lib/src.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "convert/float_bits.hpp"
#include "fp8kit/emu/emu.hpp"
#include "fp8kit/validate.hpp"

namespace fp8kit::validate_detail {

using u64 = std::uint64_t;

// Bit positions of the classes that can explain a mismatch ("other" is the empty set).
enum Bit : unsigned {
    kTie = 1u << static_cast<int>(MismatchClass::tie),
    kDirection = 1u << static_cast<int>(MismatchClass::direction),
    kOverflow = 1u << static_cast<int>(MismatchClass::overflow),
    kNan = 1u << static_cast<int>(MismatchClass::nan_encoding),
    kFtz = 1u << static_cast<int>(MismatchClass::flush_to_zero),
    kDoubleRounding = 1u << static_cast<int>(MismatchClass::double_rounding),
    kScale = 1u << static_cast<int>(MismatchClass::scale),
};
inline constexpr int kMaskCount = 1 << 7;

inline constexpr emu::Overflow kOverflows[] = {emu::Overflow::saturate_all, emu::Overflow::saturate_finite,
                                               emu::Overflow::no_saturate};
// An IEEE cast: what a kernel does when it rounds to an intermediate type first.
inline constexpr Policy kIeeeCast{emu::Rounding::nearest_even, emu::Overflow::no_saturate,
                                  emu::NanEncoding::signed_quiet};

using fp8kit::detail::bit_cast;

template <class W>
double to_double(u64 bits) {
    return bit_cast<double>(
        static_cast<u64>(emu::convert<W, emu::Binary64>(static_cast<typename W::storage_t>(bits), emu::kDecodePolicy)));
}

template <class W>
bool is_subnormal(u64 bits) {
    const u64 mag = bits & W::code_mask & ~W::sign_mask;
    return mag != 0 && (mag >> W::man_bits) == 0;
}

// Facts about the target format's 256 codes, looked up per mismatch.
struct CodeTable {
    double value[256];
    bool nan[256], zero[256], subnormal[256];
    double max_finite, beyond_max, min_subnormal;  // beyond_max: the next value past max with an unbounded exponent
};

template <class F>
CodeTable code_table() {
    CodeTable t{};
    for (int c = 0; c < 256; ++c) {
        const auto u = emu::detail::unpack<F>(static_cast<u64>(c));
        t.value[c] = to_double<F>(static_cast<u64>(c) & F::code_mask);
        t.nan[c] = u.kind == emu::detail::Unpacked::nan || (static_cast<u64>(c) & ~F::code_mask) != 0;
        t.zero[c] = u.kind == emu::detail::Unpacked::zero && (static_cast<u64>(c) & ~F::code_mask) == 0;
        t.subnormal[c] = F::has_subnormals && u.kind == emu::detail::Unpacked::finite &&
                         ((static_cast<u64>(c) & ~F::sign_mask) >> F::man_bits) == 0;
    }
    t.max_finite = t.value[F::max_finite_code];
    t.beyond_max = t.max_finite + std::ldexp(1.0, F::emax - F::man_bits);
    t.min_subnormal = t.value[F::min_subnormal_code];
    return t;
}

// What the reference does with one element's scale.
struct ScaleInfo {
    ScaleMode mode;
    const float* raw;   // S per block (one entry for tensor scaling)
    const float* mult;  // what multiplies x: S (scale) or fl32(1/S) (scale_inv)
};

template <class W, class C, class F, bool Scaled>
struct Engine {
    using S = typename W::storage_t;
    static constexpr bool scaled = Scaled;
    static_assert(Scaled || std::is_same_v<W, C>, "unscaled elements are rounded from their own format");

    const void* input;
    const std::uint8_t* codes;
    Policy ref;
    ScaleInfo scale;
    const CodeTable* table;

    u64 load(std::size_t i) const {
        S v;
        std::memcpy(&v, static_cast<const unsigned char*>(input) + i * sizeof(S), sizeof(S));
        return v;
    }

    // The input as float32, exactly (f16 and bf16 widen without rounding; f16 through a table
    // of emu::convert results set up by the caller).
    const float* widen_f16 = nullptr;
    float widen(u64 x) const {
        if constexpr (std::is_same_v<W, emu::Binary32>)
            return bit_cast<float>(static_cast<std::uint32_t>(x));
        else if constexpr (std::is_same_v<W, emu::BFloat16>)
            return bit_cast<float>(static_cast<std::uint32_t>(x) << 16);
        else if constexpr (std::is_same_v<W, emu::Binary16>)
            return widen_f16[x];
        else
            return 0.0f;  // f64 inputs are scaled in float64
    }

    // The bits (in C) of the value the reference rounds.
    u64 scaled_bits(u64 x, std::size_t block) const {
        if constexpr (!scaled) {
            (void)block;
            return x;
        } else if constexpr (std::is_same_v<C, emu::Binary32>) {
            return bit_cast<std::uint32_t>(widen(x) * scale.mult[block]);
        } else {
            return bit_cast<u64>(bit_cast<double>(x) * static_cast<double>(scale.mult[block]));
        }
    }

    static std::uint8_t round(u64 v, Policy p) {
        return static_cast<std::uint8_t>(emu::convert<C, F>(static_cast<typename C::storage_t>(v), p));
    }

    // Magnitude bits above which an element may depend on the overflow or NaN policy.
    // numerics/validate_rules.hpp, shared with the GPU scan.
    static u64 special_threshold() { return numerics::special_threshold<C, F>(); }
    static bool special(u64 v, u64 threshold) { return (v & C::code_mask & ~C::sign_mask) > threshold; }

    // The classes that explain a mismatch (bit set; 0: other).
    unsigned explain(u64 x, u64 v, std::size_t block, std::uint8_t e, std::uint8_t a) const {
        const CodeTable& t = *table;
        unsigned mask = 0;
        if (t.nan[e] && t.nan[a]) mask |= kNan;
        for (emu::Overflow o : kOverflows)
            if (o != ref.overflow && round(v, {ref.rounding, o, ref.nan}) == a) mask |= kOverflow;

        const double vd = to_double<C>(v);
        if (t.zero[a]) {
            if (is_subnormal<W>(x) || (scaled && is_subnormal<C>(v)) || t.subnormal[e]) mask |= kFtz;
        }

        if (std::isfinite(vd)) {
            const double mag = std::fabs(vd);
            const bool negative = F::has_sign && std::signbit(vd);
            const emu::Rounding away = negative ? emu::Rounding::toward_negative : emu::Rounding::toward_positive;
            const std::uint8_t down = round(v, {emu::Rounding::toward_zero, ref.overflow, ref.nan});
            const double down_val = std::fabs(t.value[down]);
            const double up_val = mag > t.max_finite
                                      ? t.beyond_max
                                      : std::fabs(t.value[round(v, {away, emu::Overflow::saturate_finite, ref.nan})]);
            if (mag < t.beyond_max && mag != down_val) {
                bool neighbour = a == down;
                for (emu::Overflow o : kOverflows) neighbour = neighbour || a == round(v, {away, o, ref.nan});
                if (neighbour) mask |= (mag == (down_val + up_val) / 2) ? kTie : kDirection;
            }
        }

        auto through = [&](auto mid) {
            using H = decltype(mid);
            if constexpr (!std::is_same_v<H, C>) {
                const auto h = emu::convert<C, H>(static_cast<typename C::storage_t>(v), kIeeeCast);
                if (static_cast<std::uint8_t>(emu::convert<H, F>(h, ref)) == a) mask |= kDoubleRounding;
            }
        };
        through(emu::Binary16{});
        through(emu::BFloat16{});
        if constexpr (std::is_same_v<C, emu::Binary64>) through(emu::Binary32{});

        if constexpr (scaled) {
            if (scale_alternative(x, block, a)) mask |= kScale;
        }
        return mask;
    }

    // Does `a` equal the reference with the scale applied another way?
    bool scale_alternative(u64 x, std::size_t block, std::uint8_t a) const {
        const float s = scale.raw[block];
        auto hit32 = [&](float v) { return round32(v) == a; };
        auto hit64 = [&](double v) {
            return static_cast<std::uint8_t>(emu::convert<emu::Binary64, F>(bit_cast<u64>(v), ref)) == a;
        };
        const float pow2 = bit_cast<float>(bit_cast<std::uint32_t>(s) & 0xFF800000u);  // floored to 2^k
        if constexpr (std::is_same_v<C, emu::Binary32>) {
            const float xf = widen(x);
            if (hit32(xf)) return true;  // the scale not applied at all
            if (scale.mode == ScaleMode::scale) {
                const float inv = 1.0f / s;
                return hit32(xf / inv) || hit64(static_cast<double>(xf) * static_cast<double>(s)) || hit32(xf * pow2);
            }
            return hit32(xf / s) || hit32(xf * s) || hit64(static_cast<double>(xf) / static_cast<double>(s)) ||
                   hit32(static_cast<float>(static_cast<double>(xf) * (1.0 / static_cast<double>(s))));
        } else {
            const double xd = bit_cast<double>(x);
            if (hit64(xd)) return true;
            if (scale.mode == ScaleMode::scale) {
                const float inv = 1.0f / s;
                return hit64(xd / static_cast<double>(inv)) || hit64(xd * static_cast<double>(pow2));
            }
            return hit64(xd / static_cast<double>(s)) || hit64(xd * static_cast<double>(s)) ||
                   hit64(xd * (1.0 / static_cast<double>(s)));
        }
    }

    std::uint8_t round32(float v) const {
        return static_cast<std::uint8_t>(emu::convert<emu::Binary32, F>(bit_cast<std::uint32_t>(v), ref));
    }
};

// The reference codes of one policy as a table, so the bulk loops do one small lookup per
// element. 16-bit sources: all 65536 codes. float32: the code depends only on the sign, the
// exponent, the top K = man_bits + 2 mantissa bits and whether any bit below them is set. The
// rounding bit of an 8-bit target is always among those K bits: for normal float32 inputs it
// sits man_bits + 1 bits down (or higher, for subnormal results), and for subnormal float32
// inputs only E8M0 (down to 2^-127) rounds inside the mantissa, at its second bit. The bits
// below are then only a sticky bit (directed modes, ties) or NaN payload past what a NaN code
// keeps. Entries are emu::convert of a representative with those low bits 0 or 1;
// tests/validate checks the tables against emu::convert element by element. Other sources
// (float64) call emu::convert.
template <class C, class F>
struct FastRound {
    Policy policy;
    std::vector<std::uint8_t> table;
    static constexpr bool f32 = std::is_same_v<C, emu::Binary32>;
    static constexpr bool b16 = sizeof(typename C::storage_t) == 2;
    static constexpr int kLow = 23 - (F::man_bits + 2);  // float32 mantissa bits folded into sticky
    static_assert(kLow > 0, "the float32 table needs an 8-bit target");
    static constexpr std::uint32_t kLowMask = (1u << kLow) - 1;

    static constexpr bool tabulable = f32 || b16;
    static constexpr std::size_t size() { return f32 ? (std::size_t{1} << (32 - kLow + 1)) : 65536; }
    static std::size_t index(u64 v) {
        if constexpr (f32)
            return static_cast<std::size_t>(((v >> kLow) << 1) | ((v & kLowMask) != 0));
        else
            return static_cast<std::size_t>(v);
    }
    // A value whose code is the code of every value with this index.
    static u64 representative(std::size_t k) {
        if constexpr (f32)
            return ((static_cast<u64>(k) >> 1) << kLow) | (static_cast<u64>(k) & 1);
        else
            return k;
    }

    FastRound(Policy p, bool build) : policy(p) {
        if (!build || !tabulable) return;
        table.resize(size());
        for (std::size_t k = 0; k < table.size(); ++k)
            table[k] =
                static_cast<std::uint8_t>(emu::convert<C, F>(static_cast<typename C::storage_t>(representative(k)), p));
    }
    std::uint8_t operator()(u64 v) const {
        if (!table.empty()) return table[index(v)];
        return static_cast<std::uint8_t>(emu::convert<C, F>(static_cast<typename C::storage_t>(v), policy));
    }
};

// Tables pay off from this many elements on (a float32 table is at most 64 Ki conversions).
inline constexpr std::size_t kTableMinElements = std::size_t{1} << 16;

}  // namespace fp8kit::validate_detail
