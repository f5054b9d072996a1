// validate_scan (cuda/include/fp8kit/cuda/validate.hpp): lib's validate() comparison on the GPU.
// Each element's value is computed as lib's Engine::scaled_bits does (lib/src/validate/
// validate_engine.hpp), its reference code and the codes of the policies the search tries by
// emu::convert (the routine lib calls), and the mismatches are listed for lib's classifier.
//
// Two passes over the data: the first counts the mismatches and ANDs the policy masks (one
// 64-bit mask per thread, ANDed across the warp, one atomicAnd per warp); the second, only when
// something mismatched, appends each mismatch (index, input bits, code) at an atomic slot, and
// the host sorts them by index, so the result does not depend on the order the threads ran in.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "common.cuh"
#include "fp8kit/cuda/validate.hpp"
#include "narrow.cuh"

namespace fp8kit::cuda {
namespace detail {
namespace {

using numerics::BlockLayout;
using numerics::ScaleMode;

struct ScanArgs {
    const void* in;
    const std::uint8_t* codes;
    std::size_t n;
    Policy ref;
    bool scaled;
    BlockLayout layout;
    std::size_t cols;
    const float* mult;          // device: what multiplies each block's elements
    std::uint32_t default_nan;  // the host's float32 NaN for Inf * 0 (see host_product)
    bool detect;
    std::uint64_t threshold;  // numerics::special_threshold in the bits of the rounded type
    unsigned long long* count;
    unsigned long long* policies;
    // Second pass: the mismatches, at most `capacity` of them.
    std::uint64_t* index;
    std::uint64_t* bits;
    std::uint8_t* got;
    unsigned long long capacity;
};

// emu::convert out of line, once per (rounded type, format): keeps ptxas quick.
template <class C, class F>
__device__ __noinline__ std::uint8_t convert_code(std::uint64_t v, Policy p) {
    return static_cast<std::uint8_t>(emu::convert<C, F>(static_cast<typename C::storage_t>(v), p));
}

// Engine::widen: the input as float32, exactly (f16 through emu::convert, as lib's table).
template <class W>
__device__ __forceinline__ std::uint32_t widen_bits(std::uint64_t x) {
    if constexpr (std::is_same_v<W, Binary32>)
        return static_cast<std::uint32_t>(x);
    else if constexpr (std::is_same_v<W, BFloat16>)
        return static_cast<std::uint32_t>(x) << 16;
    else
        return static_cast<std::uint32_t>(
            emu::convert<Binary16, Binary32>(static_cast<std::uint16_t>(x), emu::kDecodePolicy));
}

// lib's float32 product widen(x) * mult on the host CPU, bit for bit: an IEEE multiply rounded to
// nearest even (__fmul_rn: no FMA, no flush), and the host's NaN rules where the GPU's differ
// (the GPU gives one canonical NaN): a NaN operand comes back quieted with its sign and payload
// (x86 SSE and AArch64 alike; when both are NaNs, x86 returns its first operand: the element's
// here), and Inf * 0 gives the host's default NaN, measured on the host (x86: 0xFFC00000).
__device__ __forceinline__ std::uint32_t host_product(std::uint32_t w, float m, std::uint32_t default_nan) {
    const float wf = __uint_as_float(w);
    const float p = __fmul_rn(wf, m);
    if (!isnan(p)) return __float_as_uint(p);
    if (isnan(wf)) return w | 0x00400000u;
    if (isnan(m)) return __float_as_uint(m) | 0x00400000u;
    return default_nan;
}

// The reference code of value v (bits of C) and, with s.detect, the policies (validate_policy
// order) whose code is `a` ANDed into `mask`. As lib's search: for a value that is neither NaN,
// Inf nor past the largest finite code (not "special"), every policy of one rounding gives the
// code of {rounding, ref.overflow, ref.nan}; special values try all twelve per rounding.
template <class C, class F>
__device__ __forceinline__ std::uint8_t check(std::uint64_t v, std::uint8_t a, const ScanArgs& s,
                                              unsigned long long& mask) {
    const std::uint8_t e = convert_code<C, F>(v, s.ref);
    if (!s.detect) return e;
    const bool special = (v & C::code_mask & ~C::sign_mask) > s.threshold;
    unsigned long long keep = 0;
    for (int r = 0; r < 5; ++r) {
        unsigned long long twelve = 0;
        if (special) {
            for (int j = 0; j < 12; ++j)
                if (convert_code<C, F>(v, numerics::validate_policy(12 * r + j)) == a) twelve |= 1ull << j;
        } else {
            const auto rd = static_cast<emu::Rounding>(r);
            const std::uint8_t c =
                rd == s.ref.rounding ? e : convert_code<C, F>(v, Policy{rd, s.ref.overflow, s.ref.nan});
            twelve = c == a ? 0xFFFull : 0ull;
        }
        keep |= twelve << (12 * r);
    }
    mask &= keep;
    return e;
}

template <class W, class F>
__global__ void __launch_bounds__(kThreads) scan_kernel(ScanArgs s, bool collect) {
    using St = typename W::storage_t;
    const auto* in = static_cast<const St*>(s.in);
    unsigned long long mask = ~0ull, mismatches = 0;
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < s.n; i += stride) {
        const std::uint64_t x = in[i];
        const std::uint8_t a = s.codes[i];
        std::uint8_t e;
        if (s.scaled) {
            const std::size_t b = numerics::block_of(s.layout, i, s.cols);
            e = check<Binary32, F>(host_product(widen_bits<W>(x), s.mult[b], s.default_nan), a, s, mask);
        } else {
            e = check<W, F>(x, a, s, mask);
        }
        if (e != a) {
            ++mismatches;
            if (collect) {
                const unsigned long long slot = atomicAdd(s.count, 1ull);
                if (slot < s.capacity) {
                    s.index[slot] = i;
                    s.bits[slot] = x;
                    s.got[slot] = a;
                }
            }
        }
    }
    // Every thread of the block gets here (the loop's exit differs, the code after it does not).
    for (int o = 16; o > 0; o >>= 1) {
        mask &= __shfl_xor_sync(0xFFFFFFFFu, mask, o);
        mismatches += __shfl_xor_sync(0xFFFFFFFFu, mismatches, o);
    }
    if ((threadIdx.x & 31) == 0) {
        if (s.detect) atomicAnd(s.policies, mask);
        if (!collect && mismatches) atomicAdd(s.count, mismatches);
    }
}

// Device memory of one call, from the scratch pool (common.cuh: it keeps up to 64 MiB across
// stream synchronisations, where the default pool gave it back at each), freed on the stream
// however the call ends.
struct DeviceBuffers {
    cudaStream_t stream;
    std::vector<void*> held;
    template <class T>
    T* get(std::size_t count) {
        held.reserve(held.size() + 1);                       // so that recording the pointer cannot throw and leak it
        void* p = scratch_alloc(count * sizeof(T), stream);  // 0 bytes: 1 byte (scratch_alloc)
        held.push_back(p);
        return static_cast<T*>(p);
    }
    ~DeviceBuffers() {
        for (void* p : held) {
            try {
                scratch_free(p, stream);
            } catch (...) {  // a destructor must not throw: the first error is the one reported
            }
        }
    }
};

// The host's NaN for Inf * 0 (what lib's float32 multiply gives there), measured at run time.
std::uint32_t host_default_nan() {
    volatile float inf = INFINITY, zero = 0.0f;
    const float p = inf * zero;
    std::uint32_t b;
    std::memcpy(&b, &p, sizeof b);
    return b;
}

// The S per block on the host (copied from the device when they live there), checked as lib does.
std::vector<float> host_scales(const ValidateScaling& sc, std::size_t n, cudaStream_t stream) {
    if (sc.mode == ScaleMode::none) return {};
    if (sc.layout == BlockLayout::tensor) return {sc.value};
    if (sc.cols == 0 || sc.rows * sc.cols != n)
        throw std::invalid_argument(
            "fp8kit::cuda::validate_scan: block scales need rows x cols equal to the element count");
    const std::size_t want = numerics::block_scale_count(sc.layout, sc.rows, sc.cols);
    if (sc.scales == nullptr || sc.block_count != want)
        throw std::invalid_argument("fp8kit::cuda::validate_scan: a " + std::to_string(sc.rows) + " x " +
                                    std::to_string(sc.cols) + " input needs " + std::to_string(want) +
                                    " block scales, got " + std::to_string(sc.block_count));
    std::vector<float> raw(want);
    if (sc.scales_on_device) {
        FP8KIT_CUDA_CHECK(
            cudaMemcpyAsync(raw.data(), sc.scales, raw.size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
        FP8KIT_CUDA_CHECK(cudaStreamSynchronize(stream));
    } else {
        std::copy(sc.scales, sc.scales + raw.size(), raw.begin());
    }
    return raw;
}

template <class W, class F>
ValidateScan scan(const void* d_input, const std::uint8_t* d_codes, std::size_t n, const Policy& ref,
                  const ValidateScaling& sc, bool detect, cudaStream_t stream) {
    ValidateScan out;
    out.n = n;
    out.scales = host_scales(sc, n, stream);
    std::vector<float> mult;
    for (float s : out.scales) mult.push_back(numerics::scale_multiplier(sc.mode, s));
    DeviceBuffers mem{stream, {}};
    ScanArgs a{};
    a.in = d_input;
    a.codes = d_codes;
    a.n = n;
    a.ref = ref;
    a.scaled = sc.mode != ScaleMode::none;
    a.layout = a.scaled ? sc.layout : BlockLayout::tensor;
    a.cols = a.layout == BlockLayout::tensor ? 1 : sc.cols;
    a.default_nan = host_default_nan();
    a.detect = detect;
    a.threshold = a.scaled ? numerics::special_threshold<Binary32, F>() : numerics::special_threshold<W, F>();
    float* d_mult = mem.get<float>(mult.size());
    if (!mult.empty())
        FP8KIT_CUDA_CHECK(
            cudaMemcpyAsync(d_mult, mult.data(), mult.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
    a.mult = d_mult;
    auto* counters = mem.get<unsigned long long>(2);
    unsigned long long init[2] = {0ull, ~0ull};
    FP8KIT_CUDA_CHECK(cudaMemcpyAsync(counters, init, sizeof init, cudaMemcpyHostToDevice, stream));
    a.count = counters;
    a.policies = counters + 1;
    scan_kernel<W, F><<<grid_for(n), kThreads, 0, stream>>>(a, false);
    check_launch("validate scan_kernel");
    unsigned long long got[2];
    FP8KIT_CUDA_CHECK(cudaMemcpyAsync(got, counters, sizeof got, cudaMemcpyDeviceToHost, stream));
    FP8KIT_CUDA_CHECK(cudaStreamSynchronize(stream));
    out.policies = detect ? got[1] & ((1ull << numerics::kValidatePolicyCount) - 1) : 0;
    const std::size_t m = got[0];
    if (m == 0) return out;

    // Second pass: the mismatches themselves (their number is known, so every one has a slot).
    a.detect = false;
    a.capacity = m;
    a.index = mem.get<std::uint64_t>(m);
    a.bits = mem.get<std::uint64_t>(m);
    a.got = mem.get<std::uint8_t>(m);
    FP8KIT_CUDA_CHECK(cudaMemsetAsync(counters, 0, sizeof(unsigned long long), stream));
    scan_kernel<W, F><<<grid_for(n), kThreads, 0, stream>>>(a, true);
    check_launch("validate scan_kernel (mismatches)");
    std::vector<std::uint64_t> index(m), bits(m);
    std::vector<std::uint8_t> codes(m);
    FP8KIT_CUDA_CHECK(cudaMemcpyAsync(index.data(), a.index, m * 8, cudaMemcpyDeviceToHost, stream));
    FP8KIT_CUDA_CHECK(cudaMemcpyAsync(bits.data(), a.bits, m * 8, cudaMemcpyDeviceToHost, stream));
    FP8KIT_CUDA_CHECK(cudaMemcpyAsync(codes.data(), a.got, m, cudaMemcpyDeviceToHost, stream));
    FP8KIT_CUDA_CHECK(cudaMemcpyAsync(got, counters, sizeof(unsigned long long), cudaMemcpyDeviceToHost, stream));
    FP8KIT_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (got[0] != m)
        throw std::runtime_error("fp8kit::cuda::validate_scan: the two passes disagree on the mismatch count");
    // Slots were taken in whatever order threads ran: sorted by index, the result is deterministic.
    std::vector<std::size_t> order(m);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](std::size_t p, std::size_t q) { return index[p] < index[q]; });
    out.indices.reserve(m);
    out.input_bits.reserve(m);
    out.codes.reserve(m);
    for (std::size_t j : order) {
        out.indices.push_back(index[j]);
        out.input_bits.push_back(bits[j]);
        out.codes.push_back(codes[j]);
    }
    return out;
}

}  // namespace
}  // namespace detail

ValidateScan validate_scan(Format to, Wide from, const void* d_input, const std::uint8_t* d_codes, std::size_t n,
                           const Policy& ref, const ValidateScaling& scaling, bool detect_policies, Stream stream) {
    detail::require_input(from, "validate_scan");
    if (!has_cast_kernels(to))
        throw std::invalid_argument("fp8kit::cuda::validate_scan: format #" + std::to_string(static_cast<int>(to)) +
                                    " has no GPU kernel");
    if (ref.rounding == emu::Rounding::stochastic)
        throw std::invalid_argument(
            "fp8kit::cuda::validate_scan: stochastic rounding has no single reference code per element");
    if (n > 0 && (d_input == nullptr || d_codes == nullptr))
        throw std::invalid_argument("fp8kit::cuda::validate_scan: input or codes is null");
    ValidateScan out;
    detail::with_input(from, [&](auto w) {
        detail::with_cast_format(to, [&](auto f) {
            out = detail::scan<decltype(w), decltype(f)>(d_input, d_codes, n, ref, scaling, detect_policies,
                                                         detail::as_stream(stream));
            return 0;
        });
    });
    return out;
}

}  // namespace fp8kit::cuda
