// The kernels of issue 16 against lib, bit for bit: quantize / dequantize for FP4 (e2m1), FP6
// (e2m3, e3m2), e3m4, e4m3b11fnuz and e4m3ieee against encode_array / decode_array, and the GPU
// block quantiser (cuda/blocks.hpp) against fp8kit::quantize_blocks for the NVFP4 (TE, torchao),
// MXFP4 and MXFP6 presets, packed and not. No rule is written here: every expected value is lib's.
// Inputs: random bits and normals over 2^-20 .. 2^20, and adversarial values (ties between
// adjacent codes of every new format, float32 subnormals, the overflow boundary, NaN with
// payloads and both signs, +-Inf, +-0), all-zero and single-outlier blocks, all-zero tensors, and
// shapes not divisible by the block.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "fp8kit/convert/format_info.hpp"
#include "fp8kit/convert/quantize.hpp"
#include "fp8kit/convert/hadamard.hpp"
#include "fp8kit/cuda/blocks.hpp"
#include "fp8kit/cuda/fake_quantize.hpp"
#include "fp8kit/cuda/hadamard.hpp"
#include "fp8kit/cuda/kernels.hpp"
#include "fp8kit/emu/pack.hpp"
#include "fp8kit/recipes.hpp"
#include "fp8kit/stats/block_quantize.hpp"

namespace cu = fp8kit::cuda;
using fp8kit::Format;
using fp8kit::Policy;
using fp8kit::Wide;
using fp8kit::emu::NanEncoding;
using fp8kit::emu::Overflow;
using fp8kit::emu::Rounding;

namespace {

const Format kNew[] = {Format::e2m1, Format::e2m3, Format::e3m2, Format::e3m4, Format::e4m3b11fnuz, Format::e4m3ieee};
const Wide kInputs[] = {Wide::f32, Wide::f16, Wide::bf16};

struct Buf {
    void* p;
    explicit Buf(std::size_t b) : p(cu::device_alloc(b + 16)) {}
    ~Buf() { cu::device_free(p); }
    Buf(const Buf&) = delete;
    Buf& operator=(const Buf&) = delete;
    template <class T>
    T* as() {
        return static_cast<T*>(p);
    }
};

template <class T>
std::vector<T> host(const void* d, std::size_t n) {
    std::vector<T> h(n);
    if (n) cu::copy_to_host(h.data(), d, n * sizeof(T));
    return h;
}

std::uint32_t b_of(float f) {
    std::uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}

// Codes, their negatives, the midpoints between neighbours (ties) and the floats next to them, and
// the overflow boundary, for every new format; then special bits; then random values.
std::vector<float> adversarial_f32(std::size_t n_random, unsigned seed) {
    std::vector<float> v;
    for (Format f : kNew) {
        const int codes = 1 << fp8kit::format_info(f).total_bits;
        for (int c = 0; c + 1 < codes; ++c) {
            const double a = fp8kit::decode_value(f, static_cast<std::uint8_t>(c));
            const double b = fp8kit::decode_value(f, static_cast<std::uint8_t>(c + 1));
            if (!std::isfinite(a)) continue;
            v.push_back(static_cast<float>(a));
            v.push_back(static_cast<float>(-a));
            if (std::isfinite(b) && b != a) {
                const float mid = static_cast<float>((a + b) / 2);
                for (float m : {mid, -mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) v.push_back(m);
            }
        }
        const float mx = static_cast<float>(fp8kit::format_info(f).max_finite);
        for (float x : {mx, std::nextafter(mx, INFINITY), mx * 1.0625f, mx * 1.25f, -mx * 1.25f, mx * 4})
            v.push_back(x);
    }
    for (std::uint32_t b :
         {0u, 0x80000000u, 1u, 0x80000001u, 0x007FFFFFu, 0x00800000u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F800000u,
          0xFF800000u, 0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FA5A5A5u, 0xFFFFFFFFu}) {
        float f;
        std::memcpy(&f, &b, 4);
        v.push_back(f);
    }
    std::mt19937 g(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (std::size_t i = 0; i < n_random; ++i) {
        const std::uint32_t r = g();
        float f;
        std::memcpy(&f, &r, 4);
        v.push_back(i % 2 ? f : nd(g) * std::ldexp(1.0f, static_cast<int>(g() % 40) - 20));
    }
    return v;
}

// The same values in `w` (f16 / bf16 by lib's own RNE narrowing) as raw bytes.
std::vector<unsigned char> as_bytes(Wide w, const std::vector<float>& f) {
    const std::size_t es = fp8kit::wide_size(w);
    std::vector<unsigned char> out(f.size() * es);
    if (w == Wide::f32) {
        std::memcpy(out.data(), f.data(), out.size());
        return out;
    }
    fp8kit::emu::with_wide(w, [&](auto dst) {
        using D = decltype(dst);
        for (std::size_t i = 0; i < f.size(); ++i) {
            const auto h = static_cast<std::uint16_t>(fp8kit::emu::convert<fp8kit::emu::Binary32, D>(
                b_of(f[i]), {Rounding::nearest_even, Overflow::no_saturate, NanEncoding::signed_quiet_payload}));
            std::memcpy(out.data() + i * es, &h, 2);
        }
        return 0;
    });
    return out;
}

std::vector<Policy> policies() {
    std::vector<Policy> v;
    for (int r = 0; r < 6; ++r)
        for (int o = 0; o < 3; ++o)
            for (int n = 0; n < 4; ++n)
                v.push_back({static_cast<Rounding>(r), static_cast<Overflow>(o), static_cast<NanEncoding>(n)});
    return v;
}

std::size_t mismatches(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
    std::size_t m = a.size() == b.size() ? 0 : 1 + a.size() + b.size();
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) m += a[i] != b[i];
    return m;
}

// float32 bits equal, or both NaN (x86 and the GPU make NaNs with different payloads: the
// scale of a block whose rule gives NaN; documented in blocks.hpp).
bool same_float(float a, float b) { return (std::isnan(a) && std::isnan(b)) || b_of(a) == b_of(b); }

}  // namespace

TEST_CASE("FP4/FP6/ml_dtypes formats: quantize equals encode_array for every policy and input type", "[gpu][fp4]") {
    const auto f32 = adversarial_f32(20000, 7);
    for (Wide w : kInputs) {
        const auto bytes = as_bytes(w, f32);
        const std::size_t es = fp8kit::wide_size(w), n = f32.size();
        Buf din(bytes.size()), dout(n);
        cu::copy_to_device(din.p, bytes.data(), bytes.size());
        for (Format f : kNew) {
            REQUIRE(cu::has_cast_kernels(f));
            REQUIRE_FALSE(cu::has_kernels(f));
            for (const Policy& p : policies()) {
                std::vector<std::uint8_t> want(n);
                fp8kit::encode_array(f, w, bytes.data(), want.data(), n, p, 0xABCDEFull, 13);
                cu::quantize(f, w, din.p, dout.as<std::uint8_t>(), n, p, 1.0f, 0xABCDEFull, 13);
                INFO(fp8kit::name(w) << " -> " << fp8kit::name(f) << " " << fp8kit::describe(p));
                REQUIRE(mismatches(host<std::uint8_t>(dout.p, n), want) == 0);
            }
        }
        (void)es;
    }
}

TEST_CASE("FP4/FP6/ml_dtypes formats: dequantize equals decode_array", "[gpu][fp4]") {
    std::vector<std::uint8_t> codes(256 * 3 + 5);
    for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<std::uint8_t>(i * 37u);
    for (Format f : kNew) {
        const int bits = fp8kit::format_info(f).total_bits;
        std::vector<std::uint8_t> c(codes);
        for (auto& x : c) x = static_cast<std::uint8_t>(x & ((1u << bits) - 1u));  // valid codes only
        const std::size_t n = c.size();
        Buf din(n), dout(n * 4);
        cu::copy_to_device(din.p, c.data(), n);
        for (Wide w : kInputs) {
            const std::size_t es = fp8kit::wide_size(w);
            std::vector<unsigned char> want(n * es);
            fp8kit::decode_array(f, w, c.data(), want.data(), n);
            cu::dequantize(f, w, din.as<std::uint8_t>(), dout.p, n, 1.0f);
            INFO(fp8kit::name(f) << " -> " << fp8kit::name(w));
            REQUIRE(host<unsigned char>(dout.p, n * es) == want);
        }
    }
}

namespace {

struct Case {
    std::string preset;
    fp8kit::Role role;
};

// One preset / role on one tensor: GPU block quantiser against lib's quantize_blocks.
// in_offset: bytes the input starts past a 16-byte boundary (the kernels' unvectorised loads);
// out_offset: the same for the codes and the scale bytes (their stores' fallbacks).
void check_blocks(const Case& k, Wide w, const std::vector<float>& x, std::size_t rows, std::size_t cols, bool packed,
                  std::uint64_t seed, const Policy* policy_override = nullptr, std::size_t in_offset = 0,
                  std::size_t out_offset = 0) {
    fp8kit::BlockRecipe br = fp8kit::block_recipe(fp8kit::parse_recipe(k.preset), k.role, cols);
    if (policy_override) br.policy = *policy_override;
    const auto bytes = as_bytes(w, x);
    const fp8kit::BlockQuantized want = fp8kit::quantize_blocks(bytes.data(), w, rows, cols, br, seed);
    // Every field of lib's BlockRecipe, the role's rounding and columnwise_rht included: one call
    // gives the recipe's bits (with columnwise_rht, those of the cols x rows copy).
    const cu::BlockSpec spec{br.format,  br.rule, br.block_rows,    br.block_cols,    br.policy,
                             br.epsilon, br.pow2, br.value_for_inf, br.columnwise_rht};
    REQUIRE(want.rows * want.cols == rows * cols);
    const std::size_t blocks = want.grid_rows * want.grid_cols, ncode = packed ? rows * cols / 2 : rows * cols;
    // The codes' buffer has room for one code per byte, marked: a packed request must leave every
    // byte past the packed size as it was (a layout error shows as such, not as "codes differ").
    constexpr std::uint8_t kMarker = 0xA5;
    Buf din(bytes.size()), dcodes(rows * cols), dsc(blocks), ds(blocks * 4), dsi(blocks * 4), damax(4);
    std::uint8_t* codes = dcodes.as<std::uint8_t>() + out_offset;  // Buf keeps 16 bytes spare
    std::uint8_t* scale_codes = dsc.as<std::uint8_t>() + out_offset;
    cu::copy_to_device(codes, std::vector<std::uint8_t>(rows * cols, kMarker).data(), rows * cols);
    void* in = static_cast<unsigned char*>(din.p) + in_offset;
    cu::copy_to_device(in, bytes.data(), bytes.size());
    cu::quantize_blocks(spec, w, in, rows, cols, codes, packed, scale_codes, ds.as<float>(), dsi.as<float>(),
                        damax.as<float>(), seed);
    std::vector<std::uint8_t> want_codes = want.codes;
    if (packed) {
        want_codes.assign(ncode, 0);
        for (std::size_t r = 0; r < want.rows; ++r)  // rows of what was quantised (the copy's with RHT)
            fp8kit::emu::pack_fp4_array(want.codes.data() + r * want.cols, want_codes.data() + r * want.cols / 2,
                                        want.cols, fp8kit::emu::NibbleOrder::low_first);
    }
    INFO(k.preset << " role " << fp8kit::numerics::name(k.role) << " " << fp8kit::name(w) << " " << rows << "x" << cols
                  << (packed ? " packed" : "") << (in_offset ? " offset" : "") << " output offset " << out_offset << " "
                  << fp8kit::describe(br.policy) << (br.columnwise_rht ? " columnwise_rht" : ""));
    const std::vector<std::uint8_t> got_all = host<std::uint8_t>(codes, rows * cols);
    std::size_t overwritten = 0;
    for (std::size_t i = ncode; i < rows * cols; ++i) overwritten += got_all[i] != kMarker;
    REQUIRE(overwritten == 0);
    REQUIRE(mismatches(std::vector<std::uint8_t>(got_all.begin(), got_all.begin() + ncode), want_codes) == 0);
    REQUIRE(host<std::uint8_t>(scale_codes, blocks) == want.scale_codes);
    const auto ga = host<float>(damax.p, 1), s = host<float>(ds.p, blocks), si = host<float>(dsi.p, blocks);
    REQUIRE(b_of(ga[0]) == b_of(want.global_amax));
    std::size_t bad_scales = 0;
    for (std::size_t b = 0; b < blocks; ++b)
        bad_scales += !same_float(s[b], want.scale[b]) || !same_float(si[b], want.scale_inv[b]);
    REQUIRE(bad_scales == 0);
}

// The kernel quantises the data as given: nvfp4-rowwise for inputs and gradients (nvfp4's own
// statistics of those are of the column-wise copy after TE's RHT, a host step; docs/recipes.md).
const Case kCases[] = {{"nvfp4-rowwise", fp8kit::Role::activation},
                       {"nvfp4", fp8kit::Role::weight},
                       {"nvfp4-rowwise", fp8kit::Role::gradient},
                       {"nvfp4-torchao", fp8kit::Role::activation},
                       {"mxfp4", fp8kit::Role::activation},
                       {"mxfp4-ocp", fp8kit::Role::activation},
                       {"mxfp6-e2m3", fp8kit::Role::weight},
                       {"mxfp6-e2m3-ocp", fp8kit::Role::weight},
                       {"mxfp6-e3m2", fp8kit::Role::gradient},
                       {"mxfp6-e3m2-ocp", fp8kit::Role::gradient},
                       {"mxfp8", fp8kit::Role::activation},
                       {"mx-ocp", fp8kit::Role::activation},
                       // torchao's modes: a block holding a NaN has amax NaN (rule_block_amax)
                       {"mxfp4-torchao-floor", fp8kit::Role::weight},
                       {"mxfp8-torchao-ceil", fp8kit::Role::weight},
                       {"mxfp6-e2m3-torchao-even", fp8kit::Role::weight},
                       {"mxfp6-e3m2-torchao-rceil", fp8kit::Role::weight},
                       {"nvfp4-torchao-single", fp8kit::Role::weight}};

// A tensor whose blocks are: random normals at one of 40 magnitudes, all zero, one outlier,
// all ties, subnormal, NaN / Inf holding, and the adversarial values, in row-major order.
std::vector<float> block_tensor(std::size_t rows, std::size_t cols, unsigned seed) {
    const auto adv = adversarial_f32(0, seed);
    std::mt19937 g(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(rows * cols);
    for (std::size_t i = 0; i < x.size(); ++i) {
        const std::size_t blk = i / 16;
        switch (blk % 9) {
            case 0: x[i] = 0.0f; break;                                                        // all-zero block
            case 1: x[i] = (i % 16 == 3) ? 3.0e4f : nd(g) * 1e-3f; break;                      // one outlier
            case 2: x[i] = static_cast<float>(static_cast<int>(g() % 13) - 6) * 0.25f; break;  // ties at scale 1
            case 3: x[i] = std::ldexp(nd(g), -130); break;                                     // float32 subnormals
            case 4: x[i] = adv[g() % adv.size()]; break;                                       // NaN, Inf, boundaries
            default: x[i] = nd(g) * std::ldexp(1.0f, static_cast<int>(g() % 40) - 20); break;
        }
    }
    return x;
}

}  // namespace

TEST_CASE("block quantiser equals quantize_blocks: NVFP4 (TE, torchao), MXFP4, MXFP6, MXFP8", "[gpu][fp4]") {
    // Shapes: multiples of the blocks, and not (edge blocks partial in both directions).
    const std::pair<std::size_t, std::size_t> shapes[] = {{64, 128}, {37, 70}, {16, 16}, {1, 2}, {129, 34}};
    for (const auto& [rows, cols] : shapes)
        for (Wide w : kInputs) {
            const auto x = block_tensor(rows, cols, static_cast<unsigned>(rows * 131 + cols));
            for (const Case& k : kCases) {
                const bool fp4 = k.preset.rfind("nvfp4", 0) == 0 || k.preset.rfind("mxfp4", 0) == 0;
                check_blocks(k, w, x, rows, cols, false, 5);
                if (fp4 && cols % 2 == 0) check_blocks(k, w, x, rows, cols, true, 5);
            }
        }
}

TEST_CASE("block quantiser: stochastic rounding draws lib's bits; all-zero and Inf tensors", "[gpu][fp4]") {
    const Policy sr{Rounding::stochastic, Overflow::saturate_all, NanEncoding::positive_max};
    const auto x = block_tensor(48, 96, 3);
    for (const Case& k : kCases)
        for (std::uint64_t seed : {std::uint64_t{1}, std::uint64_t{0xDEADBEEFull}})
            check_blocks(k, Wide::f32, x, 48, 96, false, seed, &sr);
    // All zero (global amax 0: TE's S_enc = 1, torchao's per-tensor scale 0 -> NaN scales), one
    // +Inf (global amax Inf), all NaN.
    for (float fill : {0.0f, -0.0f, NAN}) {
        std::vector<float> z(32 * 48, fill);
        for (const Case& k : kCases) check_blocks(k, Wide::f32, z, 32, 48, false, 1);
        z[100] = INFINITY;
        for (const Case& k : kCases) check_blocks(k, Wide::bf16, z, 32, 48, false, 1);
    }
    // A subnormal global amax (TE: S_enc capped at FLT_MAX; torchao: a per-tensor scale that is
    // subnormal or 0) and one near FLT_MAX: the NVFP4 rules' numbers from extreme tensor numbers
    // (block_rows.cu tabulates them over the scale bytes per launch).
    std::mt19937 g(17);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (float mag : {0x1p-128f, 0x1p-145f, 1e37f}) {
        std::vector<float> t(32 * 48);
        for (std::size_t i = 0; i < t.size(); ++i) t[i] = (i / 16) % 5 == 0 ? 0.0f : nd(g) * mag;
        for (const Case& k : kCases) {
            const bool fp4 = k.preset.rfind("nvfp4", 0) == 0 || k.preset.rfind("mxfp4", 0) == 0;
            for (Wide w : {Wide::f32, Wide::bf16}) check_blocks(k, w, t, 32, 48, fp4, 1);
        }
    }
}

// The warp kernel of the NVFP4 / MX block shapes (cuda/src/block_rows.cu) on tensors of many
// warps: vectorised rows (cols a multiple of 16), rows that are not, an input that is not 16-byte
// aligned, every input type, packed and not, and every rounding with the saturating and the
// non-saturating overflow policies (the other roundings and the overflowing elements take
// emu::convert itself; nearest-even and stochastic rounding of in-range E2M1 / E2M3 / E3M2
// elements take the kernel's own exact steps).
TEST_CASE("block quantiser, warp kernel: large shapes, unaligned input, every rounding", "[gpu][fp4]") {
    const std::pair<std::size_t, std::size_t> shapes[] = {{96, 512}, {50, 272}, {33, 90}};
    for (const auto& [rows, cols] : shapes) {
        const auto x = block_tensor(rows, cols, static_cast<unsigned>(rows + cols));
        for (Wide w : kInputs)
            for (const Case& k : kCases) {
                const bool fp4 = k.preset.rfind("nvfp4", 0) == 0 || k.preset.rfind("mxfp4", 0) == 0;
                check_blocks(k, w, x, rows, cols, false, 9);
                check_blocks(k, w, x, rows, cols, false, 9, nullptr, fp8kit::wide_size(w));
                if (fp4) check_blocks(k, w, x, rows, cols, true, 9);
                if (fp4) check_blocks(k, w, x, rows, cols, true, 9, nullptr, 2 * fp8kit::wide_size(w));
            }
    }
    const auto x = block_tensor(32, 160, 77);
    for (int r = 0; r < 6; ++r)
        for (Overflow o : {Overflow::saturate_all, Overflow::no_saturate})
            for (const Case& k : kCases) {
                const Policy p{static_cast<Rounding>(r), o, NanEncoding::canonical};
                check_blocks(k, Wide::f32, x, 32, 160, false, 0xABCDull, &p);
                check_blocks(k, Wide::bf16, x, 32, 160, false, 0xABCDull, &p);
            }
}

// The warp kernel's grid-stride loop: with the grid capped (set_row_blocks_grid_cap) each thread
// takes several items (1 x 16, 16 x 16 and 1 x 32 blocks) on tensors lib can check, with the last
// pass partial (items not a multiple of the grid's threads), partial edge blocks, unvectorised
// rows and unaligned input, for every input type. 96 x 512 at 1 x 16: 3072 items, 12 a thread on
// one CTA and 4 on three; 50 x 272: 850 items, the fourth pass a part on one CTA.
TEST_CASE("block quantiser, warp kernel: threads of several items each", "[gpu][fp4]") {
    struct CapGuard {
        unsigned old;
        ~CapGuard() { cu::set_row_blocks_grid_cap(old); }
    };
    const std::pair<std::size_t, std::size_t> shapes[] = {{96, 512}, {50, 272}, {33, 90}, {67, 1000}};
    for (unsigned cap : {1u, 3u}) {
        const CapGuard guard{cu::set_row_blocks_grid_cap(cap)};
        for (const auto& [rows, cols] : shapes) {
            const auto x = block_tensor(rows, cols, static_cast<unsigned>(rows * 7 + cols + cap));
            for (Wide w : kInputs)
                for (const Case& k : kCases) {
                    const bool fp4 = k.preset.rfind("nvfp4", 0) == 0 || k.preset.rfind("mxfp4", 0) == 0;
                    check_blocks(k, w, x, rows, cols, false, 11);
                    check_blocks(k, w, x, rows, cols, false, 11, nullptr, fp8kit::wide_size(w));
                    if (fp4 && cols % 2 == 0) check_blocks(k, w, x, rows, cols, true, 11);
                }
        }
    }
    REQUIRE(cu::set_row_blocks_grid_cap(0) == 0);  // the guard put the default back
}

// TE's 16 x 16 weight blocks from bf16 and float32 take tile16_blocks_kernel and
// tile16_f32_blocks_kernel (block_rows.cu: a warp a tile of 16 rows x 256 (bf16) or 128 (float32)
// columns, two or four lanes a block, a lane's 16 rows in its registers; from float32 the next
// tile's rows load during the encode): shapes that straddle the tiles and blocks (cols 16, 250, 256, 264, 520:
// partial last tiles, a partial last block; rows 16, 7, 40: partial block rows), codes and scale
// bytes 16-byte aligned, 8 bytes past (the packed codes' vector stores, the others' byte stores)
// and 1 byte past, the input one element past (element loads), a NaN or an Inf in one row of some
// blocks (from bf16 the block's other rows then take the element steps), nearest-even and
// stochastic rounding, packed and not, with the grid capped at 1 and 3 CTAs (several tiles a warp)
// and not, against lib's quantize_blocks bit for bit.
TEST_CASE("block quantiser, 16 x 16 tiles: tile-straddling shapes, unaligned outputs, NaN rows", "[gpu][fp4]") {
    struct CapGuard {
        unsigned old;
        ~CapGuard() { cu::set_row_blocks_grid_cap(old); }
    };
    const Case k{"nvfp4", fp8kit::Role::weight};
    REQUIRE(fp8kit::block_recipe(fp8kit::parse_recipe(k.preset), k.role, 64).block_rows == 16);
    const Policy sr{Rounding::stochastic, Overflow::saturate_all, NanEncoding::canonical};
    const std::pair<std::size_t, std::size_t> shapes[] = {{16, 16}, {7, 250}, {40, 256}, {40, 264}, {16, 520}};
    for (unsigned cap : {0u, 1u, 3u})
        for (const auto& [rows, cols] : shapes) {
            const CapGuard guard{cu::set_row_blocks_grid_cap(cap)};
            auto x = block_tensor(rows, cols, static_cast<unsigned>(rows * 5 + cols + cap));
            for (std::size_t c = 3; c < cols; c += 37) x[(c / 16 % rows) * cols + c] = c % 2 ? NAN : -INFINITY;
            for (std::size_t out_offset : {0, 8, 1})
                for (bool packed : {false, true})
                    for (Wide w : {Wide::bf16, Wide::f32}) {
                        if (packed && cols % 2 != 0) continue;
                        check_blocks(k, w, x, rows, cols, packed, 5, nullptr, 0, out_offset);
                        check_blocks(k, w, x, rows, cols, packed, 5, &sr, 0, out_offset);
                        check_blocks(k, w, x, rows, cols, packed, 5, nullptr, fp8kit::wide_size(w), out_offset);
                    }
        }
    REQUIRE(cu::set_row_blocks_grid_cap(0) == 0);  // the guard put the default back
}

// The kernel's nearest-even and stochastic steps for E2M1 / E2M3 / E3M2, element by element over a
// sweep of float32 values: every 32-element MX block holds the format's largest finite value (so
// that the E8M0 rules give the scale 1, or 1/2 where the round-up rule's fl32(1 / fmax) rounds
// up: the products stay exact and the sweep's ties stay ties) and 31 values of a sweep over
// [-fmax, fmax]: float32 bits 0 .. fmax in steps of 2^11 units in the
// last place, with both signs, the format's codes, their midpoints and the floats beside them.
TEST_CASE("block quantiser, warp kernel: E2M1 / E2M3 / E3M2 steps over a float32 sweep", "[gpu][fp4]") {
    const std::pair<Format, const char*> fmts[] = {
        {Format::e2m1, "mxfp4"}, {Format::e2m3, "mxfp6-e2m3"}, {Format::e3m2, "mxfp6-e3m2"}};
    const auto adv = adversarial_f32(0, 1);
    for (const auto& [f, stem] : fmts) {
        const float fmax = static_cast<float>(fp8kit::format_info(f).max_finite);
        std::vector<float> sweep;
        for (std::uint32_t b = 0; b <= b_of(fmax); b += 1u << 11) {
            float v;
            std::memcpy(&v, &b, 4);
            sweep.push_back(v);
            sweep.push_back(-v);
        }
        for (float v : adv)
            if (std::fabs(v) <= fmax) sweep.push_back(v);
        const std::size_t cols = 32 * 64, rows = (sweep.size() / 31 + 64) / 64;
        std::vector<float> x(rows * cols, 0.0f);
        for (std::size_t i = 0, j = 0; i < x.size(); ++i) x[i] = i % 32 == 0 ? fmax : sweep[j++ % sweep.size()];
        for (const char* suffix : {"", "-ocp"}) {
            const Case k{std::string(stem) + suffix, fp8kit::Role::activation};
            check_blocks(k, Wide::f32, x, rows, cols, false, 0);
            const Policy sr{Rounding::stochastic, Overflow::saturate_all, NanEncoding::canonical};
            check_blocks(k, Wide::f32, x, rows, cols, false, 0x1234ull, &sr);
            if (f == Format::e2m1) check_blocks(k, Wide::f32, x, rows, cols, true, 0);
            // bf16: the sweep rounded to bf16 holds every bf16 magnitude up to fmax, with both
            // signs, through the kernel's word steps (mx_narrow_bf16_four).
            check_blocks(k, Wide::bf16, x, rows, cols, false, 0);
            if (f == Format::e2m1) check_blocks(k, Wide::bf16, x, rows, cols, true, 0);
        }
    }
}

// bf16 inputs take the warp kernel's word steps (cuda/src/block_rows.cu: the amax of the packed
// halves, mx_narrow_bf16_four) on lanes without a NaN whose scale st = scale 2^kTwinExp is exact,
// and the element steps otherwise. Blocks near bf16's largest value (2^127) give NVFP4 encode
// scales near 2^-125, whose st is a float32 subnormal and mostly inexact; blocks at 2^120, 2^100
// and 2^0 give ordinary scales, and the MX rules powers of two from 2^-125 up (every st exact).
// Lanes of both kinds share warps (block_tensor's NaN blocks cover lanes with a NaN).
TEST_CASE("block quantiser, warp kernel: bf16 word steps and their fallbacks at extreme scales", "[gpu][fp4]") {
    const std::size_t rows = 48, cols = 256;
    std::mt19937 g(11);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> x(rows * cols);
    const int exps[] = {127, 120, 100, 0};
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::ldexp(u(g), exps[(i / 16 + i / cols) % 4]);
    for (const Case& k : kCases) {
        const bool fp4 = k.preset.rfind("nvfp4", 0) == 0 || k.preset.rfind("mxfp4", 0) == 0;
        check_blocks(k, Wide::bf16, x, rows, cols, false, 3);
        if (fp4) check_blocks(k, Wide::bf16, x, rows, cols, true, 3);
    }
}

TEST_CASE("block quantiser refuses bad arguments; the sm_100 FP4 cvt fails loudly before sm_100", "[gpu][fp4]") {
    Buf d(4096);
    const Policy p{Rounding::nearest_even, Overflow::saturate_all, NanEncoding::positive_max};
    cu::BlockSpec s{Format::e2m3, fp8kit::ScaleRule::mx_roundup, 1, 32, p};
    REQUIRE_THROWS_WITH(cu::quantize_blocks(s, Wide::f32, d.p, 2, 64, d.as<std::uint8_t>(), true, nullptr, nullptr,
                                            nullptr, d.as<float>()),
                        Catch::Contains("quantize_blocks") && Catch::Contains("e2m1"));
    s.format = Format::e2m1;
    s.block_cols = 15;
    REQUIRE_THROWS_WITH(cu::quantize_blocks(s, Wide::f32, d.p, 2, 64, d.as<std::uint8_t>(), true, nullptr, nullptr,
                                            nullptr, d.as<float>()),
                        Catch::Contains("even"));
    s.format = Format::e8m0;
    REQUIRE_THROWS_WITH(cu::quantize_blocks(s, Wide::f32, d.p, 2, 64, d.as<std::uint8_t>(), false, nullptr, nullptr,
                                            nullptr, d.as<float>()),
                        Catch::Contains("e8m0"));
    REQUIRE_THROWS_WITH(cu::quantize_blocks(s, Wide::f64, d.p, 2, 64, d.as<std::uint8_t>(), false, nullptr, nullptr,
                                            nullptr, d.as<float>()),
                        Catch::Contains("f64"));
    // H100 (sm_90): the hardware FP4 path does not exist; the call must say so, not fall back.
    REQUIRE_THROWS_WITH(cu::quantize_e2m1_cvt_satfinite(d.as<float>(), static_cast<std::uint8_t*>(d.p) + 1024, 16),
                        Catch::Contains("sm_100"));
}

namespace {

// cu::te_rht16_columnwise of x (as w's elements, rows x cols) equals lib's, with and without
// random signs.
void check_rht_columnwise(Wide w, const std::vector<float>& x, std::size_t rows, std::size_t cols) {
    const auto bytes = as_bytes(w, x);
    for (bool signs : {true, false}) {
        const auto want = fp8kit::te_rht16_columnwise(bytes.data(), w, rows, cols, signs);
        Buf din(bytes.size()), dout(bytes.size());
        cu::copy_to_device(din.p, bytes.data(), bytes.size());
        cu::te_rht16_columnwise(w, din.p, rows, cols, dout.p, signs);
        INFO(fp8kit::name(w) << (signs ? " with" : " without") << " signs");
        REQUIRE(host<unsigned char>(dout.p, bytes.size()) == want);
    }
}

}  // namespace

TEST_CASE("TE NVFP4 random Hadamard transform on the GPU equals lib's te_rht16_columnwise", "[gpu][fp4]") {
    const std::size_t rows = 48, cols = 37;
    const auto x = block_tensor(rows, cols, 11);  // normals at many scales, zeros, NaN, Inf, subnormals
    for (Wide w : kInputs) check_rht_columnwise(w, x, rows, cols);
    Buf d(64);
    REQUIRE_THROWS_WITH(cu::te_rht16_columnwise(Wide::f32, d.p, 8, 1, d.p),
                        Catch::Contains("multiple of the Hadamard dimension 16"));
}

// rht16.cuh adds a group by the fast Walsh-Hadamard transform where all its sums are exact: in
// binary32 for f16 / bf16 groups whose exponents span at most 19 - m binades (9 for f16, 12 for
// bf16), in binary64 up to 48 - m (25 for f32, 38 for f16, 41 for bf16), and by lib's ordered sum
// beyond. Groups whose span runs across each bound (a column's groups take spans bound - 3 ..
// bound + 4), with signed zeros, subnormals and, every eighth column, sums past the type's largest
// finite value. In 61 columns (te_rht16_columnwise, one column a thread), and in 64 through the
// nvfp4 preset's quantize_blocks with the transform in the cast (rht_col_amax_kernel takes 2 (f32)
// or 4 (bf16) columns a thread from an 8-byte aligned tensor, and one from a tensor that is not:
// the input one element past an aligned address).
TEST_CASE("TE NVFP4 random Hadamard transform: the exact-sum path at its bound equals lib", "[gpu][fp4]") {
    const std::size_t rows = 16 * 24;
    for (Wide w : kInputs) {
        const int lo = w == Wide::f16 ? -24 : -140, hi = w == Wide::f16 ? 15 : 127;
        const int m = w == Wide::f32 ? 23 : w == Wide::f16 ? 10 : 7;
        for (int bound : {19 - m, 48 - m}) {
            if (bound < 0) continue;  // f32: no binary32 path
            for (std::size_t cols : {61, 64}) {
                std::mt19937 g(static_cast<unsigned>(bound));
                std::uniform_real_distribution<float> frac(1.0f, 2.0f);
                std::vector<float> x(rows * cols);
                for (std::size_t gr = 0; gr < rows / 16; ++gr)
                    for (std::size_t c = 0; c < cols; ++c) {
                        const int span = std::min(bound - 3 + static_cast<int>((gr * cols + c) % 8), hi - lo);
                        const int base = (c % 8 == 7) ? hi - span : lo + static_cast<int>(g() % (hi - lo - span + 1));
                        for (std::size_t i = 0; i < 16; ++i) {
                            const int e = i == gr % 16         ? base
                                          : i == (gr + 5) % 16 ? base + span
                                                               : base + static_cast<int>(g() % (span + 1));
                            float v = std::ldexp(frac(g), e) * ((g() & 1u) ? -1.0f : 1.0f);
                            if (g() % 23 == 0) v = (g() & 1u) ? -0.0f : 0.0f;
                            x[(gr * 16 + i) * cols + c] = v;
                        }
                    }
                INFO("span bound " << bound << ", " << cols << " columns");
                check_rht_columnwise(w, x, rows, cols);
                if (cols % 8 != 0 || w == Wide::f16) continue;
                const Case k{"nvfp4", fp8kit::Role::activation};
                for (std::size_t in_offset : {std::size_t{0}, fp8kit::wide_size(w)}) {
                    const std::uint64_t before = cu::quantize_blocks_fused_rht_calls();
                    check_blocks(k, w, x, rows, cols, false, 0, nullptr, in_offset);
                    REQUIRE(cu::quantize_blocks_fused_rht_calls() - before == 1u);
                }
            }
        }
    }
}

// Issue 16: the nvfp4 preset from one GPU call. The recipe's columnwise_rht (inputs, gradients)
// makes quantize_blocks run TE's random Hadamard transform itself, and the gradient role's own
// rounding (stochastic, TE's fp4_quant_bwd_grad) comes with BlockRecipe's policy: codes, scale
// bytes, scales and the global amax equal lib's quantize_blocks for the same recipe and role.
// From f32 and bf16 the transform is applied in the cast (issue 48, rht_col_blocks_kernel), and the
// test requires that it was, on each of its instantiations.
TEST_CASE("block quantiser applies the recipe's columnwise_rht and the role's rounding: nvfp4 equals lib",
          "[gpu][fp4]") {
    const fp8kit::RecipeSpec r = fp8kit::parse_recipe("nvfp4");
    REQUIRE(fp8kit::block_recipe(r, fp8kit::Role::gradient, 64).columnwise_rht);
    REQUIRE(fp8kit::block_recipe(r, fp8kit::Role::gradient, 64).policy.rounding == Rounding::stochastic);
    REQUIRE(fp8kit::block_recipe(r, fp8kit::Role::activation, 64).policy.rounding == Rounding::nearest_even);
    const Case cases[] = {{"nvfp4", fp8kit::Role::activation},
                          {"nvfp4", fp8kit::Role::gradient},
                          {"nvfp4", fp8kit::Role::weight},
                          {"nvfp4-rowwise", fp8kit::Role::gradient}};
    // Tensors: block_tensor's (NaN, Inf, subnormals, ties, all-zero blocks) in shapes whose row
    // counts are multiples of 16 and whose column counts are not multiples of anything (37, 1); an
    // all-zero tensor (global amax 0); and TE's groups of specials (16 rows of one column): one
    // +Inf (the whole group Inf), +Inf with -Inf and a NaN (the group NaN), beside finite groups.
    struct Tensor {
        std::size_t rows, cols;
        std::vector<float> x;
    };
    std::vector<Tensor> tensors;
    const std::pair<std::size_t, std::size_t> shapes[] = {{64, 128}, {48, 37}, {16, 16}, {32, 70}, {16, 1}};
    for (const auto& [rows, cols] : shapes)
        tensors.push_back({rows, cols, block_tensor(rows, cols, static_cast<unsigned>(rows * 7 + cols))});
    tensors.push_back({32, 37, std::vector<float>(32 * 37, 0.0f)});
    std::vector<float> specials(48 * 37);
    for (std::size_t r = 0; r < 48; ++r)
        for (std::size_t c = 0; c < 37; ++c) {
            const std::size_t g = r % 16;
            float v = std::ldexp(static_cast<float>(static_cast<int>((r * 37 + c) % 23) - 11), static_cast<int>(c % 9));
            if (c % 4 == 0 && g == 5) v = INFINITY;
            if (c % 4 == 1 && (g == 2 || g == 9)) v = g == 2 ? INFINITY : -INFINITY;
            if (c % 4 == 2 && g == 11) v = r < 16 ? NAN : -NAN;
            specials[r * 37 + c] = v;
        }
    tensors.push_back({48, 37, specials});
    // The cases that apply the transform in the cast (cu::quantize_blocks_fused_rht_calls): f32 and
    // bf16, nearest-even and stochastic, packed and not; f16 takes the copy.
    std::set<std::string> fused_kinds;
    for (const Tensor& t : tensors)
        for (Wide w : kInputs)
            for (const Case& k : cases)
                for (std::uint64_t seed : {std::uint64_t{0}, std::uint64_t{0x1234ull}}) {
                    const fp8kit::BlockRecipe br = fp8kit::block_recipe(fp8kit::parse_recipe(k.preset), k.role, t.cols);
                    // packed pairs along the rows of what is quantised: the copy's rows hold `rows` codes
                    for (bool packed : {false, true}) {
                        if (packed && (br.columnwise_rht ? t.rows : t.cols) % 2 != 0) continue;
                        const std::uint64_t before = cu::quantize_blocks_fused_rht_calls();
                        check_blocks(k, w, t.x, t.rows, t.cols, packed, seed);
                        const bool fused = br.columnwise_rht && w != Wide::f16;
                        REQUIRE(cu::quantize_blocks_fused_rht_calls() - before == (fused ? 1u : 0u));
                        if (fused)
                            fused_kinds.insert(std::string(fp8kit::name(w)) + " " + fp8kit::describe(br.policy) +
                                               (packed ? " packed" : ""));
                    }
                }
    INFO(fused_kinds.size() << " kinds applied the transform in the cast");
    REQUIRE(fused_kinds.size() == 8);
    // Refusals name the remedy: a row count that is not a multiple of 16, blocks other than 1 x 16.
    Buf d(8192);
    const fp8kit::BlockRecipe br = fp8kit::block_recipe(r, fp8kit::Role::activation, 64);
    cu::BlockSpec s{br.format,  br.rule, br.block_rows,    br.block_cols, br.policy,
                    br.epsilon, br.pow2, br.value_for_inf, true};
    REQUIRE_THROWS_WITH(cu::quantize_blocks(s, Wide::f32, d.p, 8, 64, d.as<std::uint8_t>(), false, nullptr, nullptr,
                                            nullptr, d.as<float>()),
                        Catch::Contains("multiple of 16"));
    s.block_cols = 32;
    REQUIRE_THROWS_WITH(cu::quantize_blocks(s, Wide::f32, d.p, 16, 64, d.as<std::uint8_t>(), false, nullptr, nullptr,
                                            nullptr, d.as<float>()),
                        Catch::Contains("1 x 16"));
}

// The transform in the cast works on tiles of 32 columns of X by 16 groups of 16 rows, one a CTA,
// and stages each tile's codes and scale bytes for 8-byte stores along C's rows (block_rows.cu
// rht_col_tiles): shapes that straddle the tiles both ways (rows / 16 = 1, 3: one partial tile,
// one scale unit a row; 11: one partial tile, a whole scale unit and a part; 16: one whole tile,
// each row of scale bytes 8-byte aligned; 17, 24, 33: whole tiles and a part; cols 1, 31, 33,
// 100), with the codes and scale bytes 16-byte aligned, 8 bytes past (the 8-byte stores) and 1
// byte past (the byte stores), nearest-even and stochastic, packed and not, against lib's
// quantize_blocks (the cols x rows copy after the transform) bit for bit; and with the grid capped
// at 1 and 3 CTAs (set_row_blocks_grid_cap), so that CTAs take several tiles (528 x 100: 12 tiles).
TEST_CASE("block quantiser, columnwise_rht in the cast: tile-straddling shapes and unaligned outputs equal lib",
          "[gpu][fp4]") {
    struct CapGuard {
        unsigned old;
        ~CapGuard() { cu::set_row_blocks_grid_cap(old); }
    };
    const Case cases[] = {{"nvfp4", fp8kit::Role::activation}, {"nvfp4", fp8kit::Role::gradient}};
    for (unsigned cap : {0u, 1u, 3u})
        for (std::size_t groups : {1, 3, 11, 16, 17, 24, 33})
            for (std::size_t cols : {1, 31, 33, 100}) {
                const CapGuard guard{cu::set_row_blocks_grid_cap(cap)};
                const std::size_t rows = 16 * groups;
                const auto x = block_tensor(rows, cols, static_cast<unsigned>(rows * 3 + cols));
                for (Wide w : {Wide::f32, Wide::bf16})
                    for (const Case& k : cases) {
                        REQUIRE(fp8kit::block_recipe(fp8kit::parse_recipe(k.preset), k.role, cols).columnwise_rht);
                        for (std::size_t out_offset : {0, 8, 1})
                            for (bool packed : {false, true}) {
                                const std::uint64_t before = cu::quantize_blocks_fused_rht_calls();
                                check_blocks(k, w, x, rows, cols, packed, 77, nullptr, 0, out_offset);
                                REQUIRE(cu::quantize_blocks_fused_rht_calls() - before == 1u);
                            }
                    }
            }
    REQUIRE(cu::set_row_blocks_grid_cap(0) == 0);  // the guard put the default back
}

// Fake quantisation in one call (cuda::fake_quantize_blocks) against lib's dequantize_blocks of
// lib's quantize_blocks, bytes for bytes, into float32, float16 and bfloat16: the dequantised
// values (each block's scale_inv), and the block-scaled GEMM operand (the block part) with its
// tensor factor (lib's tensor_factor). Every preset of kCases, the nvfp4 preset's gradient role
// (stochastic rounding, TE's column-wise copy after the RHT), partial edge blocks (rows not a
// multiple of 16 under 16 x 16 blocks: 37 x 70, 40 x 48; row ends inside a 1 x 32 block: 40 x 48).
// Into bf16 the NVFP4 and MX presets of the block-scaled GEMM from f32 / bf16 run as one kernel
// (row_fake_kernel), and the test requires that they did: its 16-byte stores where cols % 16 == 0
// (64 x 128, 16 x 16, 48 x 96, 40 x 48), its element stores where not (37 x 70, 32 x 1, 24 x 36)
// and where the output is not 16-byte aligned (every shape again at d_out + 2 bytes). 24 x 36 also
// takes dequantize_blocks_kernel's four-code steps with vector stores (cols % 4 == 0, not % 16).
TEST_CASE("fake_quantize_blocks equals lib's dequantize_blocks of quantize_blocks", "[gpu][fp4]") {
    std::vector<Case> cases(std::begin(kCases), std::end(kCases));
    cases.push_back({"nvfp4", fp8kit::Role::gradient});
    // The presets whose roles take the one kernel (fake_quantize.hpp), where columnwise_rht is off:
    // not MXFP6 (E2M3 / E3M2) or torchao's MXFP8 policy.
    const std::set<std::string> one_kernel = {"nvfp4-rowwise",        "nvfp4", "nvfp4-torchao",
                                              "nvfp4-torchao-single", "mxfp4", "mxfp4-ocp",
                                              "mxfp4-torchao-floor",  "mxfp8", "mx-ocp"};
    std::set<std::string> one_kernel_kinds;  // the kernel's instantiations run, and 16 x 16 blocks
    const std::pair<std::size_t, std::size_t> shapes[] = {{64, 128}, {37, 70}, {16, 16}, {32, 1},
                                                          {48, 96},  {40, 48}, {24, 36}};
    for (const auto& [rows, cols] : shapes)
        for (Wide w : kInputs) {
            const auto x = block_tensor(rows, cols, static_cast<unsigned>(rows * 17 + cols));
            const auto bytes = as_bytes(w, x);
            Buf din(bytes.size()), dout(rows * cols * 4), dtf(4);
            cu::copy_to_device(din.p, bytes.data(), bytes.size());
            for (const Case& k : cases) {
                const fp8kit::BlockRecipe br = fp8kit::block_recipe(fp8kit::parse_recipe(k.preset), k.role, cols);
                if (br.columnwise_rht && rows % 16 != 0) continue;  // TE's copy needs rows in 16s
                const cu::BlockSpec spec{br.format,  br.rule, br.block_rows,    br.block_cols,    br.policy,
                                         br.epsilon, br.pow2, br.value_for_inf, br.columnwise_rht};
                const fp8kit::BlockQuantized q = fp8kit::quantize_blocks(bytes.data(), w, rows, cols, br, 9);
                for (Wide to : kInputs)
                    for (bool block_part : {false, true})
                        for (std::size_t offset : {0, 2}) {  // bytes: d_out 16-byte aligned, or not (bf16)
                            if (offset != 0 && to != Wide::bf16) continue;
                            INFO(k.preset << " role " << fp8kit::numerics::name(k.role) << " " << fp8kit::name(w)
                                          << " -> " << fp8kit::name(to) << " " << rows << "x" << cols
                                          << (block_part ? " block part" : "") << " d_out + " << offset);
                            const std::vector<std::uint8_t> want = fp8kit::dequantize_blocks(q, br, to, block_part);
                            void* out = dout.as<std::uint8_t>() + offset;
                            const std::uint64_t before = cu::fake_quantize_blocks_one_kernel_calls();
                            cu::fake_quantize_blocks(spec, w, din.p, rows, cols, to, out,
                                                     block_part ? dtf.as<float>() : nullptr, 9);
                            const bool one = to == Wide::bf16 && w != Wide::f16 && !br.columnwise_rht &&
                                             one_kernel.count(k.preset) > 0;
                            REQUIRE(cu::fake_quantize_blocks_one_kernel_calls() - before == (one ? 1u : 0u));
                            if (one)
                                one_kernel_kinds.insert(
                                    std::string(fp8kit::name(w)) + " " + std::to_string(static_cast<int>(br.format)) +
                                    " " + std::to_string(br.block_rows) + "x" + std::to_string(br.block_cols) +
                                    (br.policy.rounding == Rounding::stochastic ? " sr" : ""));
                            REQUIRE(mismatches(host<std::uint8_t>(out, want.size()), want) == 0);
                            if (block_part)
                                REQUIRE(b_of(host<float>(dtf.p, 1)[0]) == b_of(fp8kit::tensor_factor(q, br)));
                        }
            }
        }
    // f32 and bf16 inputs each: e2m1 in 1 x 16 (nearest, stochastic), 16 x 16 and 1 x 32, e4m3 in 1 x 32.
    INFO(one_kernel_kinds.size() << " kinds ran as one kernel");
    REQUIRE(one_kernel_kinds.size() == 10);
}

// The operand X^T fake-quantised where X lies (cuda::fake_quantize_blocks_transposed, the wgrad and
// dgrad-weight operands of fp8kit.torch's block-scaled GEMM) against lib: dequantize_blocks of
// quantize_blocks of X^T made on the host, into bfloat16, transposed back to X's layout, bytes for
// bytes, with both factor forms and the tensor factor. X^T is block_tensor's (its 1 x 16 / 1 x 32
// blocks hold the adversarial patterns), X its transpose; shapes with partial last blocks of X^T's
// rows (rows not a multiple of the block); f32 and bf16 inputs; every NVFP4 and MX rule of the
// block-scaled model, and the nvfp4 preset's roles with columnwise_rht off (its gradient role
// rounds stochastically: the element indices are X^T's).
TEST_CASE("fake_quantize_blocks_transposed equals lib's fake quantisation of X^T, transposed", "[gpu][fp4]") {
    const Case cases[] = {{"nvfp4-rowwise", fp8kit::Role::activation},   {"nvfp4-rowwise", fp8kit::Role::gradient},
                          {"nvfp4-torchao", fp8kit::Role::activation},   {"nvfp4-torchao-single", fp8kit::Role::weight},
                          {"nvfp4", fp8kit::Role::activation},           {"nvfp4", fp8kit::Role::gradient},
                          {"mxfp4", fp8kit::Role::activation},           {"mxfp4-ocp", fp8kit::Role::activation},
                          {"mxfp4-torchao-floor", fp8kit::Role::weight}, {"mxfp8", fp8kit::Role::activation},
                          {"mx-ocp", fp8kit::Role::activation}};
    REQUIRE(fp8kit::block_recipe(fp8kit::parse_recipe("nvfp4"), fp8kit::Role::gradient, 64).policy.rounding ==
            Rounding::stochastic);
    const std::pair<std::size_t, std::size_t> shapes[] = {{37, 70}, {64, 128}, {16, 16}, {70, 33}, {1, 5}};
    for (const auto& [rows, cols] : shapes)
        for (Wide w : {Wide::f32, Wide::bf16}) {
            // X^T (cols x rows) as the blocks are laid out, and X (rows x cols) read by the kernel.
            const auto xt = block_tensor(cols, rows, static_cast<unsigned>(rows * 29 + cols));
            std::vector<float> x(rows * cols);
            for (std::size_t r = 0; r < rows; ++r)
                for (std::size_t c = 0; c < cols; ++c) x[r * cols + c] = xt[c * rows + r];
            const auto xt_bytes = as_bytes(w, xt), x_bytes = as_bytes(w, x);
            Buf din(x_bytes.size()), dout(rows * cols * 2), dtf(4);
            cu::copy_to_device(din.p, x_bytes.data(), x_bytes.size());
            for (const Case& k : cases) {
                fp8kit::BlockRecipe br = fp8kit::block_recipe(fp8kit::parse_recipe(k.preset), k.role, rows);
                br.columnwise_rht = false;  // the row-wise operand, as fp8kit.torch's _block_spec
                const cu::BlockSpec spec{br.format,  br.rule, br.block_rows,    br.block_cols, br.policy,
                                         br.epsilon, br.pow2, br.value_for_inf, false};
                for (std::uint64_t seed : {std::uint64_t{9}, std::uint64_t{0x1234ull}}) {
                    const fp8kit::BlockQuantized q = fp8kit::quantize_blocks(xt_bytes.data(), w, cols, rows, br, seed);
                    for (bool block_part : {false, true}) {
                        INFO(k.preset << " role " << fp8kit::numerics::name(k.role) << " " << fp8kit::name(w) << " "
                                      << rows << "x" << cols << " seed " << seed << (block_part ? " block part" : ""));
                        const std::vector<std::uint8_t> want_t =
                            fp8kit::dequantize_blocks(q, br, Wide::bf16, block_part);
                        REQUIRE(want_t.size() == rows * cols * 2);
                        std::vector<std::uint8_t> want(rows * cols * 2);
                        for (std::size_t r = 0; r < rows; ++r)
                            for (std::size_t c = 0; c < cols; ++c)
                                std::memcpy(&want[(r * cols + c) * 2], &want_t[(c * rows + r) * 2], 2);
                        cu::fake_quantize_blocks_transposed(spec, w, din.p, rows, cols, Wide::bf16, dout.p,
                                                            block_part ? dtf.as<float>() : nullptr, seed);
                        REQUIRE(mismatches(host<std::uint8_t>(dout.p, want.size()), want) == 0);
                        if (block_part) REQUIRE(b_of(host<float>(dtf.p, 1)[0]) == b_of(fp8kit::tensor_factor(q, br)));
                    }
                }
            }
        }
    // Refusals name what: 16 x 16 blocks (nvfp4's weights), TE's column-wise copy, an output other
    // than bf16, f16 inputs, stochastic rounding in MXFP4's 1 x 32 blocks, torchao's E4M3 policy,
    // E4M3 in 1 x 16 blocks.
    Buf d(8192);
    const fp8kit::BlockRecipe bw = fp8kit::block_recipe(fp8kit::parse_recipe("nvfp4"), fp8kit::Role::weight, 64);
    cu::BlockSpec s{bw.format,  bw.rule, bw.block_rows,    bw.block_cols, bw.policy,
                    bw.epsilon, bw.pow2, bw.value_for_inf, false};
    REQUIRE(s.block_rows == 16);
    REQUIRE_THROWS_WITH(cu::fake_quantize_blocks_transposed(s, Wide::f32, d.p, 16, 64, Wide::bf16, d.p, nullptr),
                        Catch::Contains("1 x 16 or 1 x 32"));
    s.block_rows = 1;
    s.columnwise_rht = true;
    REQUIRE_THROWS_WITH(cu::fake_quantize_blocks_transposed(s, Wide::f32, d.p, 16, 64, Wide::bf16, d.p, nullptr),
                        Catch::Contains("columnwise_rht"));
    s.columnwise_rht = false;
    REQUIRE_THROWS_WITH(cu::fake_quantize_blocks_transposed(s, Wide::f32, d.p, 16, 64, Wide::f32, d.p, nullptr),
                        Catch::Contains("only bf16 output"));
    REQUIRE_THROWS_WITH(cu::fake_quantize_blocks_transposed(s, Wide::f16, d.p, 16, 64, Wide::bf16, d.p, nullptr),
                        Catch::Contains("f32 and bf16 inputs"));
    s.block_cols = 32;
    s.policy.rounding = Rounding::stochastic;
    REQUIRE_THROWS_WITH(cu::fake_quantize_blocks_transposed(s, Wide::f32, d.p, 16, 64, Wide::bf16, d.p, nullptr),
                        Catch::Contains("spec.policy"));
    // torchao's E4M3 policy (NaN with its sign: the cvt path with a fix-up), which the block-scaled
    // model's rules do not take.
    const fp8kit::BlockRecipe bt =
        fp8kit::block_recipe(fp8kit::parse_recipe("mxfp8-torchao-ceil"), fp8kit::Role::weight, 64);
    const cu::BlockSpec st{bt.format,  bt.rule, bt.block_rows,    bt.block_cols, bt.policy,
                           bt.epsilon, bt.pow2, bt.value_for_inf, false};
    REQUIRE_THROWS_WITH(cu::fake_quantize_blocks_transposed(st, Wide::f32, d.p, 16, 64, Wide::bf16, d.p, nullptr),
                        Catch::Contains("spec.policy"));
    s.block_cols = 16;
    s.policy.rounding = Rounding::nearest_even;
    s.format = Format::e4m3;
    REQUIRE_THROWS_WITH(cu::fake_quantize_blocks_transposed(s, Wide::f32, d.p, 16, 64, Wide::bf16, d.p, nullptr),
                        Catch::Contains("spec.format"));
}
