// TransformerEngine's NVFP4 random Hadamard transform (convert/hadamard.hpp has the steps).
#include "fp8kit/convert/hadamard.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

#include "fp8kit/numerics/hadamard.hpp"

namespace fp8kit {

namespace {

constexpr emu::Policy kRne{emu::Rounding::nearest_even, emu::Overflow::no_saturate,
                           emu::NanEncoding::signed_quiet_payload};

// Element i as binary64 (exact for every accepted type).
double element(const unsigned char* p, Wide type, std::size_t i) {
    return emu::with_wide(type, [&](auto src) {
        using S = decltype(src);
        typename S::storage_t b;
        std::memcpy(&b, p + sizeof b * i, sizeof b);
        const std::uint64_t d = emu::convert<S, emu::Binary64>(b, kRne);
        double v;
        std::memcpy(&v, &d, 8);
        return v;
    });
}

// v rounded once to `type` (nearest even), stored at element i.
void store(unsigned char* p, Wide type, std::size_t i, double v) {
    std::uint64_t d;
    std::memcpy(&d, &v, 8);
    emu::with_wide(type, [&](auto dst) {
        using D = decltype(dst);
        const typename D::storage_t b = emu::convert<emu::Binary64, D>(d, kRne);
        std::memcpy(p + sizeof b * i, &b, sizeof b);
        return 0;
    });
}

}  // namespace

std::vector<unsigned char> te_rht16_columnwise(const void* data, Wide type, std::size_t rows, std::size_t cols,
                                               bool random_signs) {
    if (type == Wide::f64)
        throw std::invalid_argument("te_rht16_columnwise: input type f64 is not supported (f32, f16, bf16, as TE)");
    if (rows % 16 != 0)
        throw std::invalid_argument("te_rht16_columnwise: the row count " + std::to_string(rows) +
                                    " must be a multiple of the Hadamard dimension 16 (TE raises the same)");
    const auto* in = static_cast<const unsigned char*>(data);
    const std::size_t es = type == Wide::f32 ? 4 : 2;
    std::vector<unsigned char> out(rows * cols * es);
    // Step 4: out[c, g*16 + j] = sum_i x[g*16 + i, c] * T[i][j], T = diag(s) H16 / 4.
#pragma omp parallel for schedule(static) if (rows * cols > (1u << 16))
    for (std::ptrdiff_t c = 0; c < static_cast<std::ptrdiff_t>(cols); ++c)
        for (std::size_t g = 0; g < rows; g += 16) {
            double v[16], y[16];
            for (int i = 0; i < 16; ++i) v[i] = element(in, type, (g + i) * cols + static_cast<std::size_t>(c));
            numerics::te_rht16_group(v, random_signs, y);  // steps 1-3
            for (int j = 0; j < 16; ++j) store(out.data(), type, static_cast<std::size_t>(c) * rows + g + j, y[j]);
        }
    return out;
}

}  // namespace fp8kit
