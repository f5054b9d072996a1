// Exhaustive check of the GPU conversion kernels against the CPU reference (emu::convert run on
// the host with OpenMP): all 2^32 float32 inputs for every FP8 format and every policy
// (6 roundings x 3 overflow x 4 NaN encodings; stochastic with element index = input bits), the
// hardware path quantize_{e4m3,e5m2}_cvt_satfinite against profile cuda-satfinite, and all
// 2^16 float16 / bfloat16 inputs for every format and policy. Prints every mismatch count;
// exit 0 only when all are 0.
// The formats with emulated kernels only (FP4 e2m1, FP6 e2m3 / e3m2, e3m4, e4m3b11fnuz,
// e4m3ieee; issue 16) get all 2^32 float32 inputs under the policies of kNarrowPolicies and all
// f16 / bf16 inputs under every policy. `--formats=new` runs only those (the FP8 part takes
// minutes); `--formats=fp8` only the FP8 part; default both. `--rounding=NAME` (e.g. stochastic)
// runs the 2^32 float32 inputs under that rounding only (the f16/bf16 part, seconds, in full): a
// quick check after a change to one path; the full run is what validates a commit.
//
// Every GPU run covers all 2^32 inputs. The CPU side computes each reference value with
// emu::convert under the exact policy of the GPU run, but does not recompute what the
// reference's definition makes identical (emu/convert.hpp):
// - policy.nan is read only for NaN inputs: NaN inputs (2^24 patterns) get their own CPU table
//   per policy; all other inputs share one table per (format, rounding, overflow);
// - policy.overflow is read only for +-Inf inputs and when the rounded magnitude overflows, which
//   under saturate-finite yields +-max finite: only inputs whose saturate-finite code is +-max
//   finite, or that are +-Inf, are converted again under saturate-all and no-saturate.
#include <cuda_runtime.h>
#include <omp.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fp8kit/cuda/kernels.hpp"
#include "fp8kit/emu/emu.hpp"
#include "fp8kit/convert/names.hpp"
#include "fp8kit/convert/quantize.hpp"

namespace emu = fp8kit::emu;
namespace cu = fp8kit::cuda;
using emu::Format;
using emu::NanEncoding;
using emu::Overflow;
using emu::Policy;
using emu::Rounding;

#define CHECK(x)                                                                                    \
    do {                                                                                            \
        cudaError_t e_ = (x);                                                                       \
        if (e_ != cudaSuccess) {                                                                    \
            std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            std::exit(3);                                                                           \
        }                                                                                           \
    } while (0)

constexpr std::uint64_t kSeed = 0x5EED5EEDull;
constexpr std::uint64_t kSlice = std::uint64_t{1} << 28;
constexpr int kSlices = 16;
constexpr std::uint32_t kNanCount = 1u << 24;  // (sign, 23-bit mantissa); mantissa 0 is Inf, unused
constexpr int kExamples = 4;

__host__ __device__ inline bool is_nan32(std::uint32_t b) { return (b & 0x7FFFFFFFu) > 0x7F800000u; }
__host__ __device__ inline std::uint32_t nan_index(std::uint32_t b) { return ((b >> 31) << 23) | (b & 0x7FFFFFu); }

__global__ void iota(std::uint32_t* x, std::uint64_t base, std::uint64_t n) {
    for (std::uint64_t i = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; i < n;
         i += std::uint64_t(gridDim.x) * blockDim.x)
        x[i] = static_cast<std::uint32_t>(base + i);
}

struct Mismatch {
    unsigned long long count;
    unsigned int n_examples;
    std::uint32_t bits[kExamples];
    std::uint8_t got[kExamples], want[kExamples];
};

__global__ void compare(const std::uint8_t* got, const std::uint8_t* ref, const std::uint8_t* nan_ref,
                        std::uint64_t base, std::uint64_t n, Mismatch* m) {
    unsigned long long local = 0;
    for (std::uint64_t i = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; i < n;
         i += std::uint64_t(gridDim.x) * blockDim.x) {
        const auto b = static_cast<std::uint32_t>(base + i);
        const std::uint8_t want = is_nan32(b) ? nan_ref[nan_index(b)] : ref[i];
        if (got[i] != want) {
            ++local;
            const unsigned k = atomicAdd(&m->n_examples, 1u);
            if (k < kExamples) {
                m->bits[k] = b;
                m->got[k] = got[i];
                m->want[k] = want;
            }
        }
    }
    if (local) atomicAdd(&m->count, local);
}

template <class Fn>
void with_fp8(Format f, Fn&& fn) {
    switch (f) {
        case Format::e4m3: fn(emu::E4M3{}); break;
        case Format::e5m2: fn(emu::E5M2{}); break;
        case Format::e4m3fnuz: fn(emu::E4M3FNUZ{}); break;
        case Format::e5m2fnuz: fn(emu::E5M2FNUZ{}); break;
        case Format::e8m0: fn(emu::E8M0{}); break;
        default: break;  // FP4/FP6 and the other ml_dtypes types have no GPU kernel yet
    }
}

// CPU reference for one slice: ref[o] for overflow o (0 saturate_all, 1 saturate_finite, 2 no_saturate).
template <class D>
void cpu_slice(std::uint64_t base, Rounding rnd, std::uint8_t* ref0, std::uint8_t* ref1, std::uint8_t* ref2) {
    const Policy pf{rnd, Overflow::saturate_finite, NanEncoding::canonical};
    const Policy pa{rnd, Overflow::saturate_all, NanEncoding::canonical};
    const Policy pn{rnd, Overflow::no_saturate, NanEncoding::canonical};
    const bool st = rnd == Rounding::stochastic;
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(kSlice); ++i) {
        const auto b = static_cast<std::uint32_t>(base + static_cast<std::uint64_t>(i));
        const std::uint32_t r = st ? emu::stochastic_bits(kSeed, b) : 0u;
        const std::uint8_t c = emu::convert<emu::Binary32, D>(b, pf, r);
        ref1[i] = c;
        const bool inf = (b & 0x7FFFFFFFu) == 0x7F800000u;
        if (inf || (c & ~static_cast<std::uint8_t>(D::sign_mask)) == D::max_finite_code) {
            ref0[i] = emu::convert<emu::Binary32, D>(b, pa, r);
            ref2[i] = emu::convert<emu::Binary32, D>(b, pn, r);
        } else {
            ref0[i] = ref2[i] = c;
        }
    }
}

template <class D>
void cpu_nan_table(const Policy& p, std::uint8_t* out) {
#pragma omp parallel for schedule(static)
    for (std::int64_t k = 0; k < static_cast<std::int64_t>(kNanCount); ++k) {
        const auto idx = static_cast<std::uint32_t>(k);
        std::uint32_t man = idx & 0x7FFFFFu;
        if (man == 0) man = 1;  // index of +-Inf: never looked up
        const std::uint32_t b = ((idx >> 23) << 31) | 0x7F800000u | man;
        out[k] = emu::convert<emu::Binary32, D>(b, p, emu::stochastic_bits(kSeed, b));
    }
}

// The narrow formats: one reference per (format, policy), every input converted on the CPU.
__global__ void compare_plain(const std::uint8_t* got, const std::uint8_t* ref, std::uint64_t base, std::uint64_t n,
                              Mismatch* m) {
    unsigned long long local = 0;
    for (std::uint64_t i = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; i < n;
         i += std::uint64_t(gridDim.x) * blockDim.x)
        if (got[i] != ref[i]) {
            ++local;
            const unsigned k = atomicAdd(&m->n_examples, 1u);
            if (k < kExamples) {
                m->bits[k] = static_cast<std::uint32_t>(base + i);
                m->got[k] = got[i];
                m->want[k] = ref[i];
            }
        }
    if (local) atomicAdd(&m->count, local);
}

template <class D>
void cpu_plain_slice(std::uint64_t base, const Policy& p, std::uint8_t* ref) {
    const bool st = p.rounding == Rounding::stochastic;
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(kSlice); ++i) {
        const auto b = static_cast<std::uint32_t>(base + static_cast<std::uint64_t>(i));
        ref[i] = emu::convert<emu::Binary32, D>(b, p, st ? emu::stochastic_bits(kSeed, b) : 0u);
    }
}

template <class Fn>
void with_narrow(Format f, Fn&& fn) {
    switch (f) {
        case Format::e2m1: fn(emu::E2M1{}); break;
        case Format::e2m3: fn(emu::E2M3{}); break;
        case Format::e3m2: fn(emu::E3M2{}); break;
        case Format::e3m4: fn(emu::E3M4{}); break;
        case Format::e4m3b11fnuz: fn(emu::E4M3B11FNUZ{}); break;
        case Format::e4m3ieee: fn(emu::E4M3IEEE{}); break;
        default: break;
    }
}

// All 2^32 float32 inputs: nearest-even and stochastic, each with the MX / cuda_fp4.h element
// policy (saturate-all, NaN -> +max) and with ml_dtypes' (no-saturate, NaN -> negated zero for
// the formats without NaN, signed quiet NaN with payload for the others).
const Policy kNarrowPolicies[] = {
    {Rounding::nearest_even, Overflow::saturate_all, NanEncoding::positive_max},
    {Rounding::nearest_even, Overflow::no_saturate, NanEncoding::negated_zero},
    {Rounding::nearest_even, Overflow::no_saturate, NanEncoding::signed_quiet_payload},
    {Rounding::stochastic, Overflow::saturate_all, NanEncoding::positive_max},
};

int main(int argc, char** argv) {
    bool run_fp8 = true, run_new = true;
    int only_rounding = -1;  // --rounding=NAME: that rounding only
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--formats=new")
            run_fp8 = false;
        else if (a == "--formats=fp8")
            run_new = false;
        else if (a.rfind("--rounding=", 0) == 0) {
            for (int r = 0; r < 6; ++r)
                if (a.substr(11) == fp8kit::name(static_cast<Rounding>(r))) only_rounding = r;
            if (only_rounding < 0) {
                std::fprintf(stderr, "%s: unknown rounding in %s\n", argv[0], a.c_str());
                return 2;
            }
        } else {
            std::fprintf(stderr, "usage: %s [--formats=new|--formats=fp8] [--rounding=NAME]\n", argv[0]);
            return 2;
        }
    }
    const auto skip_rounding = [&](int r) { return only_rounding >= 0 && r != only_rounding; };
    std::string why;
    if (cu::device_count(&why) == 0) {
        std::printf("SKIPPED: no CUDA device: %s\n", why.c_str());
        return 77;
    }
    std::printf("device %s, %d CPU threads\n", cu::device_name().c_str(), omp_get_max_threads());
    const auto t_start = std::chrono::steady_clock::now();
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));

    std::uint8_t* h_ref[2];
    for (auto& h : h_ref) CHECK(cudaMallocHost(&h, 3 * kSlice));
    cudaEvent_t uploaded[2];
    for (auto& e : uploaded) CHECK(cudaEventCreate(&e));
    std::uint8_t* h_nan;
    CHECK(cudaMallocHost(&h_nan, 12ull * kNanCount));
    std::uint32_t* d_in;
    std::uint8_t *d_out, *d_ref, *d_nan;
    CHECK(cudaMalloc(&d_in, kSlice * 4));
    CHECK(cudaMalloc(&d_out, kSlice));
    CHECK(cudaMalloc(&d_ref, 3 * kSlice));
    CHECK(cudaMalloc(&d_nan, 12ull * kNanCount));
    Mismatch* d_mm;
    const int kVariants = 13;  // 3 overflow x 4 NaN + the hardware path
    CHECK(cudaMalloc(&d_mm, kVariants * sizeof(Mismatch)));

    std::uint64_t total_mismatches = 0, runs = 0;
    auto report = [&](const std::string& what, const Mismatch& m) {
        ++runs;
        total_mismatches += m.count;
        if (m.count == 0) return;
        std::printf("MISMATCH %s: %llu inputs", what.c_str(), m.count);
        for (unsigned k = 0; k < m.n_examples && k < kExamples; ++k)
            std::printf("  [x=0x%08x gpu 0x%02x cpu 0x%02x]", m.bits[k], m.got[k], m.want[k]);
        std::printf("\n");
    };

    for (Format f : emu::kAllFormats) {
        if (!run_fp8) break;
        with_fp8(f, [&](auto dfmt) {
            using D = decltype(dfmt);
            const int n_nan = 4;  // FNUZ and E8M0 have one NaN code, but every policy is run
            const bool hw = f == Format::e4m3 || f == Format::e5m2;
            for (int ri = 0; ri < 6; ++ri) {
                if (skip_rounding(ri)) continue;
                const auto rnd = static_cast<Rounding>(ri);
                const auto t0 = std::chrono::steady_clock::now();
                for (int o = 0; o < 3; ++o)
                    for (int ne = 0; ne < n_nan; ++ne)
                        cpu_nan_table<D>({rnd, static_cast<Overflow>(o), static_cast<NanEncoding>(ne)},
                                         h_nan + (o * 4 + ne) * std::uint64_t(kNanCount));
                CHECK(cudaMemcpyAsync(d_nan, h_nan, 12ull * kNanCount, cudaMemcpyHostToDevice, s));
                CHECK(cudaMemsetAsync(d_mm, 0, kVariants * sizeof(Mismatch), s));
                const bool run_hw = hw && rnd == Rounding::nearest_even;
                for (int sl = 0; sl < kSlices; ++sl) {
                    const int k = sl & 1;
                    CHECK(cudaEventSynchronize(uploaded[k]));  // host buffer k free again
                    const std::uint64_t base = sl * kSlice;
                    cpu_slice<D>(base, rnd, h_ref[k], h_ref[k] + kSlice, h_ref[k] + 2 * kSlice);
                    CHECK(cudaMemcpyAsync(d_ref, h_ref[k], 3 * kSlice, cudaMemcpyHostToDevice, s));
                    CHECK(cudaEventRecord(uploaded[k], s));
                    iota<<<2048, 256, 0, s>>>(d_in, base, kSlice);
                    for (int o = 0; o < 3; ++o)
                        for (int ne = 0; ne < n_nan; ++ne) {
                            const Policy p{rnd, static_cast<Overflow>(o), static_cast<NanEncoding>(ne)};
                            cu::quantize(f, emu::Wide::f32, d_in, d_out, kSlice, p, 1.0f, kSeed, base, s);
                            compare<<<2048, 256, 0, s>>>(d_out, d_ref + o * kSlice,
                                                         d_nan + (o * 4 + ne) * std::uint64_t(kNanCount), base, kSlice,
                                                         d_mm + o * 4 + ne);
                        }
                    if (run_hw) {
                        if (f == Format::e4m3)
                            cu::quantize_e4m3_cvt_satfinite(reinterpret_cast<const float*>(d_in), d_out, kSlice, 1.0f,
                                                            s);
                        else
                            cu::quantize_e5m2_cvt_satfinite(reinterpret_cast<const float*>(d_in), d_out, kSlice, 1.0f,
                                                            s);
                        compare<<<2048, 256, 0, s>>>(d_out, d_ref /* saturate_all */, d_nan /* sat-all, canonical */,
                                                     base, kSlice, d_mm + 12);
                    }
                    CHECK(cudaGetLastError());
                }
                Mismatch mm[kVariants];
                CHECK(cudaMemcpyAsync(mm, d_mm, sizeof mm, cudaMemcpyDeviceToHost, s));
                CHECK(cudaStreamSynchronize(s));
                for (int o = 0; o < 3; ++o)
                    for (int ne = 0; ne < n_nan; ++ne) {
                        const Policy p{rnd, static_cast<Overflow>(o), static_cast<NanEncoding>(ne)};
                        report("f32 -> " + std::string(fp8kit::name(f)) + " " + fp8kit::describe(p), mm[o * 4 + ne]);
                    }
                if (run_hw)
                    report(std::string("hardware cvt.rn.satfinite f32 -> ") + std::string(fp8kit::name(f)), mm[12]);
                const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                std::printf("f32 -> %-8s %-16s all 2^32 inputs, %d policies%s: %.1f s, mismatches so far %llu\n",
                            std::string(fp8kit::name(f)).c_str(), std::string(fp8kit::name(rnd)).c_str(), 3 * n_nan,
                            run_hw ? " + hardware path" : "", secs, static_cast<unsigned long long>(total_mismatches));
                std::fflush(stdout);
            }
        });
    }

    for (Format f : emu::kAllFormats) {
        if (!run_new) break;
        with_narrow(f, [&](auto dfmt) {
            using D = decltype(dfmt);
            for (const Policy& p : kNarrowPolicies) {
                if (skip_rounding(static_cast<int>(p.rounding))) continue;
                const auto t0 = std::chrono::steady_clock::now();
                CHECK(cudaMemsetAsync(d_mm, 0, sizeof(Mismatch), s));
                for (int sl = 0; sl < kSlices; ++sl) {
                    const int k = sl & 1;
                    CHECK(cudaEventSynchronize(uploaded[k]));  // host buffer k free again
                    const std::uint64_t base = sl * kSlice;
                    cpu_plain_slice<D>(base, p, h_ref[k]);
                    CHECK(cudaMemcpyAsync(d_ref, h_ref[k], kSlice, cudaMemcpyHostToDevice, s));
                    CHECK(cudaEventRecord(uploaded[k], s));
                    iota<<<2048, 256, 0, s>>>(d_in, base, kSlice);
                    cu::quantize(f, emu::Wide::f32, d_in, d_out, kSlice, p, 1.0f, kSeed, base, s);
                    compare_plain<<<2048, 256, 0, s>>>(d_out, d_ref, base, kSlice, d_mm);
                    CHECK(cudaGetLastError());
                }
                Mismatch mm;
                CHECK(cudaMemcpyAsync(&mm, d_mm, sizeof mm, cudaMemcpyDeviceToHost, s));
                CHECK(cudaStreamSynchronize(s));
                report("f32 -> " + std::string(fp8kit::name(f)) + " " + fp8kit::describe(p), mm);
                const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                std::printf("f32 -> %-12s %-40s all 2^32 inputs: %.1f s, mismatches so far %llu\n",
                            std::string(fp8kit::name(f)).c_str(), fp8kit::describe(p).c_str(), secs,
                            static_cast<unsigned long long>(total_mismatches));
                std::fflush(stdout);
            }
        });
    }

    // float16 and bfloat16: all 2^16 inputs, every format and policy, against encode_array.
    {
        std::vector<std::uint16_t> in(65536);
        for (std::uint32_t i = 0; i < 65536; ++i) in[i] = static_cast<std::uint16_t>(i);
        std::vector<std::uint8_t> want(65536), got(65536);
        void* d16 = cu::device_alloc(65536 * 2);
        cu::copy_to_device(d16, in.data(), 65536 * 2);
        std::uint64_t mism16 = 0, runs16 = 0;
        for (emu::Wide w : {emu::Wide::f16, emu::Wide::bf16})
            for (Format f : emu::kAllFormats)
                if (static_cast<int>(f) <= static_cast<int>(Format::e8m0) ? run_fp8
                                                                          : run_new)  // FP8 part / narrow part
                    for (int r = 0; r < 6; ++r)
                        for (int o = 0; o < 3; ++o)
                            for (int ne = 0; ne < 4; ++ne) {
                                const Policy p{static_cast<Rounding>(r), static_cast<Overflow>(o),
                                               static_cast<NanEncoding>(ne)};
                                fp8kit::encode_array(f, w, in.data(), want.data(), 65536, p, kSeed, 0);
                                cu::quantize(f, w, d16, d_out, 65536, p, 1.0f, kSeed, 0);
                                cu::copy_to_host(got.data(), d_out, 65536);
                                std::uint64_t m = 0;
                                for (int i = 0; i < 65536; ++i) m += got[i] != want[i];
                                ++runs16;
                                if (m)
                                    std::printf("MISMATCH %s -> %s %s: %llu inputs\n",
                                                std::string(fp8kit::name(w)).c_str(),
                                                std::string(fp8kit::name(f)).c_str(), fp8kit::describe(p).c_str(),
                                                static_cast<unsigned long long>(m));
                                mism16 += m;
                            }
        cu::device_free(d16);
        std::printf("f16/bf16: all 2^16 inputs, %llu (input, format, policy) runs, mismatches %llu\n",
                    static_cast<unsigned long long>(runs16), static_cast<unsigned long long>(mism16));
        total_mismatches += mism16;
        runs += runs16;
    }

    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    std::printf("exhaustive check: %llu runs, %llu mismatches, %.0f s -> %s\n", static_cast<unsigned long long>(runs),
                static_cast<unsigned long long>(total_mismatches), secs, total_mismatches == 0 ? "PASS" : "FAIL");
    return total_mismatches == 0 ? 0 : 1;
}
