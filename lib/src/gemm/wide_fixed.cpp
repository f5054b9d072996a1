// WideFixed: exact sums for the `exact` model.
#include "wide_fixed.hpp"

#include <cmath>
#include <stdexcept>

namespace fp8kit::gemm::detail {

void WideFixed::add(const std::array<std::uint64_t, 3>& mag, bool negative, int exp) {
    const int offset = exp - kLsb;
    if (offset < 0) throw std::logic_error("WideFixed: term below the least significant bit");
    // 1. The magnitude shifted into position: up to 4 limbs from limb `word` on.
    const int word = offset / 64, bit = offset % 64;
    std::array<std::uint64_t, 4> s{};
    for (int i = 0; i < 3; ++i) {
        s[i] |= bit ? mag[i] << bit : mag[i];
        if (bit) s[i + 1] |= mag[i] >> (64 - bit);
    }
    for (int i = 0; i < 4; ++i)
        if (s[i] != 0 && word + i >= kLimbs) throw std::logic_error("WideFixed: term above the most significant bit");
    // 2. Add or subtract with carry through every higher limb (two's complement wraps the sign).
    unsigned __int128 carry = 0;
    bool borrow = false;
    for (int i = word; i < kLimbs; ++i) {
        const std::uint64_t x = i - word < 4 ? s[i - word] : 0;
        if (!negative) {
            const unsigned __int128 t = static_cast<unsigned __int128>(limb_[i]) + x + carry;
            limb_[i] = static_cast<std::uint64_t>(t);
            carry = t >> 64;
            if (carry == 0 && i - word >= 3) break;
        } else {
            const std::uint64_t before = limb_[i];
            const std::uint64_t sub = x + (borrow ? 1 : 0);
            const bool overflow_sub = borrow && x == ~0ull;
            limb_[i] = before - sub;
            borrow = overflow_sub || before < sub;
            if (!borrow && i - word >= 3) break;
        }
    }
}

void WideFixed::add_product(__int128 p, std::uint64_t m, bool negative, int exp) {
    if (p == 0 || m == 0) return;
    if (p < 0) negative = !negative;
    const unsigned __int128 a = p < 0 ? -static_cast<unsigned __int128>(p) : static_cast<unsigned __int128>(p);
    const auto lo = static_cast<std::uint64_t>(a), hi = static_cast<std::uint64_t>(a >> 64);
    const unsigned __int128 l = static_cast<unsigned __int128>(lo) * m;
    const unsigned __int128 h = static_cast<unsigned __int128>(hi) * m + (l >> 64);
    add({static_cast<std::uint64_t>(l), static_cast<std::uint64_t>(h), static_cast<std::uint64_t>(h >> 64)}, negative,
        exp);
}

bool WideFixed::is_zero() const {
    for (auto l : limb_)
        if (l) return false;
    return true;
}

double WideFixed::to_double_sticky() const {
    // 1. Sign and magnitude.
    const bool negative = (limb_[kLimbs - 1] >> 63) != 0;
    std::array<std::uint64_t, kLimbs> m = limb_;
    if (negative) {
        unsigned carry = 1;
        for (auto& l : m) {
            l = ~l + carry;
            carry = (carry && l == 0) ? 1 : 0;
        }
    }
    // 2. The leading bit.
    int top = -1;
    for (int i = kLimbs - 1; i >= 0 && top < 0; --i)
        if (m[i]) top = i * 64 + 63 - __builtin_clzll(m[i]);
    if (top < 0) return 0.0;
    // 3. 41 leading bits (bits top .. lo; below bit 0, zeros), then one sticky bit for every bit
    // below them, read a limb at a time.
    const int lo = top - 40;
    std::uint64_t lead = 0;
    bool sticky = false;
    if (lo >= 0) {
        const int w = lo / 64, off = lo % 64;
        lead = m[w] >> off;
        if (off + 41 > 64 && w + 1 < kLimbs) lead |= m[w + 1] << (64 - off);
        lead &= (std::uint64_t{1} << 41) - 1;
        sticky = (m[w] & ((std::uint64_t{1} << off) - 1)) != 0;
        for (int i = 0; i < w && !sticky; ++i) sticky = m[i] != 0;
    } else {
        lead = m[0] << -lo;  // top < 40: the whole magnitude is in the lowest limb
    }
    lead = (lead << 1) | (sticky ? 1u : 0u);
    const double v = std::ldexp(static_cast<double>(lead), top - 41 + kLsb);
    return negative ? -v : v;
}

}  // namespace fp8kit::gemm::detail
