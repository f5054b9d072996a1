// The aligned and fp32 GEMM models on the GPU (docs/gemm.md, "The CUDA model"). Every rule is
// numerics/gemm_model.hpp's: the step (numerics::gemm::aligned_step, here on a 4 x 4 tile of
// outputs per thread), promotion, split-K reduction, epilogue, output rounding, the special
// (NaN/Inf) sum and the fp32 sum; this file only tiles and schedules them.
//
// Layout: a block computes 64 x 64 outputs with 16 x 16 threads; thread (tx, ty) owns rows
// ty + 16 i and columns tx + 16 j (i, j < 4), so a warp's shared-memory reads are broadcasts or
// consecutive words. Each step's codes (at most kGemmMaxGroup = 32 k) are decoded once into
// shared memory as CodeTerms, k-major. The step loop (splits, chunks, steps) is uniform over
// the block, so its boundaries are lib's (lib/src/gemm/accumulate.cpp, aligned_range).
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "common.cuh"
#include "fp8kit/cuda/gemm.hpp"
#include "fp8kit/numerics/gemm_model.hpp"

namespace fp8kit::cuda {
namespace {

namespace ng = numerics::gemm;
using ng::CodeTerm;

constexpr int kTile = 64, kThreads = 16, kPer = 4;  // kTile = kThreads * kPer

struct Side {
    const std::uint8_t* codes;
    const float* scales;
    const CodeTerm* terms;             // 256, device
    const float* values;               // 256, device (fp32 model and special elements)
    const std::uint8_t* special_rows;  // rows flags, or nullptr when the format has no NaN/Inf
    ng::ScaleKind kind;
    std::size_t rows;
};

struct Args {
    Side a, b;
    std::size_t k;
    ng::ModelParams m;
    ng::OutType out;
    std::uint32_t* d;
};

__device__ __forceinline__ float scale_at(const Side& s, bool is_b, std::size_t row, std::size_t kb,
                                          std::size_t kblocks) {
    return s.scales[ng::scale_index(s.kind, is_b, row < s.rows ? row : 0, kb, kblocks)];
}

// One step's codes [k0, k0 + n) of the block's 64 rows of one operand, decoded into sm[q * 64 + r].
__device__ __forceinline__ void load_stage(CodeTerm* sm, const CodeTerm* table, const Side& s, std::size_t row0,
                                           std::size_t k, std::size_t k0, int n) {
    const CodeTerm zero = ng::zero_term();
    for (int idx = threadIdx.y * kThreads + threadIdx.x; idx < kTile * n; idx += kThreads * kThreads) {
        const int r = idx / n, q = idx - r * n;
        const std::size_t row = row0 + r;
        sm[q * kTile + r] = row < s.rows ? table[s.codes[row * k + k0 + q]] : zero;
    }
}

// FAST: exp=nominal, align=trunc, sticky=0 fixed at compile time and 32-bit sums (the named sm90
// models); otherwise every parameter is read at run time with 64-bit sums.
template <bool FAST, class Int>
__global__ void __launch_bounds__(kThreads* kThreads) aligned_kernel(Args args) {
    extern __shared__ __align__(16) CodeTerm smem[];
    CodeTerm* ta = smem;
    CodeTerm* tb = ta + 256;
    CodeTerm* as = tb + 256;
    CodeTerm* bs = as + kGemmMaxGroup * kTile;
    const int tid = threadIdx.y * kThreads + threadIdx.x;
    for (int c = tid; c < 256; c += kThreads * kThreads) {
        ta[c] = args.a.terms[c];
        tb[c] = args.b.terms[c];
    }
    ng::ModelParams m = args.m;
    if constexpr (FAST) {
        m.nominal_exponent = true;
        m.align = ng::AlignRound::toward_zero;
        m.sticky = false;
    }
    const std::size_t row0 = static_cast<std::size_t>(blockIdx.y) * kTile,
                      col0 = static_cast<std::size_t>(blockIdx.x) * kTile;
    const std::size_t K = args.k, kblocks = (K + 127) / 128;
    const std::size_t split = ng::split_size(m, K), chunk = ng::chunk_size(m, K, args.a.kind);
    const bool scale_each = ng::scale_each_chunk(m, args.a.kind);
    const int tx = threadIdx.x, ty = threadIdx.y;

    float total[kPer][kPer], outer[kPer][kPer], c[kPer][kPer];
    _Pragma("unroll") for (int i = 0; i < kPer; ++i) _Pragma("unroll") for (int j = 0; j < kPer; ++j) total[i][j] =
        0.0f;
    const auto load_a = [&](int q, int i) { return as[q * kTile + ty + kThreads * i]; };
    const auto load_b = [&](int q, int j) { return bs[q * kTile + tx + kThreads * j]; };

    for (std::size_t s0 = 0; s0 < K; s0 += split) {
        const std::size_t s1 = s0 + split < K ? s0 + split : K;
        // Each split-K range accumulates from zero (one CTA of a split-K kernel).
        _Pragma("unroll") for (int i = 0; i < kPer; ++i) _Pragma("unroll") for (int j = 0; j < kPer; ++j) outer[i][j] =
            0.0f;
        for (std::size_t c0 = s0; c0 < s1; c0 += chunk) {
            const std::size_t c1 = c0 + chunk < s1 ? c0 + chunk : s1;
            _Pragma("unroll") for (int i = 0; i < kPer; ++i) _Pragma("unroll") for (int j = 0; j < kPer; ++j) c[i][j] =
                0.0f;
            for (std::size_t k0 = c0; k0 < c1; k0 += m.group) {
                const int n = static_cast<int>(c1 - k0 < static_cast<std::size_t>(m.group) ? c1 - k0 : m.group);
                __syncthreads();  // the previous step's codes are consumed (and the tables loaded)
                load_stage(as, ta, args.a, row0, K, k0, n);
                load_stage(bs, tb, args.b, col0, K, k0, n);
                __syncthreads();
                ng::aligned_step<Int, kPer, kPer>(c, n, load_a, load_b, m);
            }
            _Pragma("unroll") for (int i = 0; i < kPer; ++i) _Pragma("unroll") for (int j = 0; j < kPer; ++j) {
                float sab = 1.0f;
                if (scale_each)
                    sab = scale_at(args.a, false, row0 + ty + kThreads * i, c0 / 128, kblocks) *
                          scale_at(args.b, true, col0 + tx + kThreads * j, c0 / 128, kblocks);
                outer[i][j] = ng::promote(outer[i][j], c[i][j], c0 == s0, scale_each, sab, m);
            }
        }
        _Pragma("unroll") for (int i = 0; i < kPer; ++i) _Pragma("unroll") for (int j = 0; j < kPer; ++j) total[i][j] =
            ng::reduce_split(total[i][j], outer[i][j], s0 == 0);
    }
    const bool rowwise = args.a.kind == ng::ScaleKind::row || args.b.kind == ng::ScaleKind::row;
    _Pragma("unroll") for (int i = 0; i < kPer; ++i) _Pragma("unroll") for (int j = 0; j < kPer; ++j) {
        const std::size_t row = row0 + ty + kThreads * i, col = col0 + tx + kThreads * j;
        if (row >= args.a.rows || col >= args.b.rows) continue;
        float v = total[i][j];
        if (!scale_each)
            v = ng::aligned_epilogue(v, scale_at(args.a, false, row, 0, kblocks),
                                     scale_at(args.b, true, col, 0, kblocks), rowwise);
        args.d[row * args.b.rows + col] = ng::output_bits(v, args.out);
    }
}

// fp32: each element's float32 sum in k order (lib's fp32_element with numerics' fp32_add and
// fp32_scale), tiled as aligned_kernel: 64 x 64 outputs per block, thread (tx, ty) owning rows
// ty + 16 i and columns tx + 16 j, each stage's kFp32Stage k of both operands in shared memory as
// float32 values. A run (the k range one fp32_scale closes: 128 products for block scales, all K
// otherwise) ends at a stage boundary or at K. Past K a stage holds zeros: adding +0 leaves the
// sum as it is (a sum from +0 under nearest-even is never -0).
constexpr int kFp32Stage = 32;

__global__ void __launch_bounds__(kThreads* kThreads) fp32_kernel(Args args) {
    __shared__ float as[kFp32Stage * kTile], bs[kFp32Stage * kTile];
    const std::size_t row0 = static_cast<std::size_t>(blockIdx.y) * kTile,
                      col0 = static_cast<std::size_t>(blockIdx.x) * kTile;
    const std::size_t K = args.k, kblocks = (K + 127) / 128;
    const bool blocks = args.a.kind == ng::ScaleKind::block;
    const std::size_t run = blocks ? 128 : K;
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kThreads + tx;
    float inner[kPer][kPer] = {}, outer[kPer][kPer] = {};
    const auto close_run = [&](std::size_t kb) {
        _Pragma("unroll") for (int i = 0; i < kPer; ++i) _Pragma("unroll") for (int j = 0; j < kPer; ++j) {
            outer[i][j] =
                ng::fp32_scale(outer[i][j], scale_at(args.a, false, row0 + ty + kThreads * i, kb, kblocks),
                               scale_at(args.b, true, col0 + tx + kThreads * j, kb, kblocks), inner[i][j], blocks);
            inner[i][j] = 0.0f;
        }
    };
    for (std::size_t k0 = 0; k0 < K; k0 += kFp32Stage) {
        __syncthreads();  // the previous stage is consumed
        for (int idx = tid; idx < kTile * kFp32Stage; idx += kThreads * kThreads) {
            const int r = idx / kFp32Stage, q = idx - r * kFp32Stage;
            const std::size_t kk = k0 + q;
            const bool in_k = kk < K;
            as[q * kTile + r] =
                in_k && row0 + r < args.a.rows ? args.a.values[args.a.codes[(row0 + r) * K + kk]] : 0.0f;
            bs[q * kTile + r] =
                in_k && col0 + r < args.b.rows ? args.b.values[args.b.codes[(col0 + r) * K + kk]] : 0.0f;
        }
        __syncthreads();
        for (int q = 0; q < kFp32Stage; ++q) _Pragma("unroll") for (int i = 0; i < kPer; ++i) {
                const float va = as[q * kTile + ty + kThreads * i];
                _Pragma("unroll") for (int j = 0; j < kPer; ++j) inner[i][j] =
                    ng::fp32_add(inner[i][j], va, bs[q * kTile + tx + kThreads * j]);
            }
        const std::size_t next = k0 + kFp32Stage;
        if (next < K && next % run != 0) continue;
        close_run(k0 / 128);  // the run's block of k (block scales; other kinds have one scale)
    }
    if (K == 0) close_run(0);  // as lib: the empty sum scaled once
    _Pragma("unroll") for (int i = 0; i < kPer; ++i) _Pragma("unroll") for (int j = 0; j < kPer; ++j) {
        const std::size_t row = row0 + ty + kThreads * i, col = col0 + tx + kThreads * j;
        if (row < args.a.rows && col < args.b.rows)
            args.d[row * args.b.rows + col] = ng::output_bits(outer[i][j], args.out);
    }
}

// Rows holding a NaN or Inf code.
__global__ void special_rows_kernel(const std::uint8_t* codes, const CodeTerm* terms, std::size_t rows, std::size_t k,
                                    std::uint8_t* flags) {
    const std::size_t row = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
    if (row >= rows) return;
    std::uint8_t any = 0;
    for (std::size_t q = 0; q < k && !any; ++q) any = terms[codes[row * k + q]].special != 0;
    flags[row] = any;
}

// Elements with a NaN or Inf code: every model gives IEEE float32's sum (numerics::special_add).
__global__ void special_kernel(Args args) {
    const std::size_t row = blockIdx.y * static_cast<std::size_t>(blockDim.y) + threadIdx.y;
    const std::size_t col = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
    if (row >= args.a.rows || col >= args.b.rows) return;
    const bool special =
        (args.a.special_rows && args.a.special_rows[row]) || (args.b.special_rows && args.b.special_rows[col]);
    if (!special) return;
    const std::size_t K = args.k, kblocks = (K + 127) / 128;
    float acc = 0;
    for (std::size_t q = 0; q < K; ++q)
        acc = ng::special_add(acc, args.a.values[args.a.codes[row * K + q]],
                              scale_at(args.a, false, row, q / 128, kblocks), args.b.values[args.b.codes[col * K + q]],
                              scale_at(args.b, true, col, q / 128, kblocks));
    args.d[row * args.b.rows + col] = ng::output_bits(acc, args.out);
}

// The 256-entry tables of a format, from emu (codes above its width read as zero, as lib's).
struct HostTables {
    std::vector<CodeTerm> terms = std::vector<CodeTerm>(256, ng::zero_term());
    std::vector<float> values = std::vector<float>(256, 0.0f);
    bool any_special = false;
};

HostTables host_tables(Format f, const char* which) {
    if (f == Format::e8m0)
        throw std::invalid_argument(std::string("fp8kit::cuda::gemm_model: ") + which +
                                    ": format e8m0 is a scale format, not a GEMM operand");
    HostTables t;
    emu::with_format(f, [&](auto fmt) {
        using F = decltype(fmt);
        for (int c = 0; c < (1 << F::total_bits); ++c) {
            t.terms[c] = ng::code_term<F>(static_cast<std::uint32_t>(c));
            const auto bits = static_cast<std::uint32_t>(emu::decode(f, Wide::f32, static_cast<std::uint8_t>(c)));
            std::memcpy(&t.values[c], &bits, 4);
            t.any_special = t.any_special || t.terms[c].special;
        }
    });
    return t;
}

// Device buffers of one call, freed at the end.
struct Scratch {
    std::vector<void*> ptrs;
    void* alloc(std::size_t bytes) {
        void* p = nullptr;
        FP8KIT_CUDA_CHECK(cudaMalloc(&p, bytes));
        ptrs.push_back(p);
        return p;
    }
    template <class T>
    const T* upload(const std::vector<T>& v) {
        void* p = alloc(v.size() * sizeof(T));
        FP8KIT_CUDA_CHECK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
        return static_cast<const T*>(p);
    }
    ~Scratch() {
        for (void* p : ptrs) cudaFree(p);
    }
};

bool fits_32(const ng::ModelParams& m) {
    // |halves| < (group + 1) * 2^(bits + 3): the fast path's 32-bit sum.
    return m.align_bits + 4 + 6 <= 31 && m.group <= kGemmMaxGroup;
}

}  // namespace

bool gemm_model_supported(const ng::ModelParams& m, std::string* why) {
    auto no = [&](const char* reason) {
        if (why) *why = reason;
        return false;
    };
    if (m.kind == ng::AccumKind::exact) return no("the exact model has no CUDA kernel (use the CPU)");
    if (m.kind == ng::AccumKind::fp32) return true;
    if (m.group < 1 || m.group > kGemmMaxGroup) return no("aligned: the CUDA model takes group 1..32");
    if (m.align_bits < 2 || m.align_bits + 8 > 53) return no("aligned: bits out of range");
    if (m.promote < 0 || m.promote % m.group) return no("aligned: promote is not a multiple of group");
    if (m.split_k < 0 || m.split_k % 128) return no("aligned: splitk is not a multiple of 128");
    return true;
}

void gemm_model(const GemmOperand& a, const GemmOperand& b, std::size_t k, const ng::ModelParams& m, ng::OutType out,
                std::uint32_t* d, Stream stream) {
    std::string why;
    if (!gemm_model_supported(m, &why)) throw std::invalid_argument("fp8kit::cuda::gemm_model: " + why);
    if ((a.scale_kind == ng::ScaleKind::block) != (b.scale_kind == ng::ScaleKind::block))
        throw std::invalid_argument(
            "fp8kit::cuda::gemm_model: block scales: A and B must both have block scales (1x128 and 128x128)");
    if (a.rows == 0 || b.rows == 0) return;
    const HostTables ha = host_tables(a.format, "A"), hb = host_tables(b.format, "B");
    Scratch scratch;
    Args args{};
    const HostTables* hs[2] = {&ha, &hb};
    Side* sides[2] = {&args.a, &args.b};
    const GemmOperand* ops[2] = {&a, &b};
    for (int w = 0; w < 2; ++w) {
        Side& s = *sides[w];
        s.codes = ops[w]->codes;
        s.scales = ops[w]->scales;
        s.kind = ops[w]->scale_kind;
        s.rows = ops[w]->rows;
        s.terms = scratch.upload(hs[w]->terms);
        s.values = scratch.upload(hs[w]->values);
        s.special_rows = nullptr;
        if (hs[w]->any_special && k > 0) {
            auto* flags = static_cast<std::uint8_t*>(scratch.alloc(s.rows));
            special_rows_kernel<<<static_cast<unsigned>((s.rows + 255) / 256), 256, 0, detail::as_stream(stream)>>>(
                s.codes, s.terms, s.rows, k, flags);
            detail::check_launch("gemm_model special rows");
            s.special_rows = flags;
        }
    }
    args.k = k;
    args.m = m;
    args.out = out;
    args.d = d;
    const dim3 block(kThreads, kThreads);
    const dim3 grid(static_cast<unsigned>((b.rows + kTile - 1) / kTile),
                    static_cast<unsigned>((a.rows + kTile - 1) / kTile));
    if (m.kind == ng::AccumKind::fp32) {
        fp32_kernel<<<grid, block, 0, detail::as_stream(stream)>>>(args);
        detail::check_launch("gemm_model fp32");
    } else {
        const std::size_t smem = sizeof(CodeTerm) * (2 * 256 + 2 * kGemmMaxGroup * kTile);
        const bool fast = m.nominal_exponent && m.align == ng::AlignRound::toward_zero && !m.sticky && fits_32(m);
        if (fast) {
            FP8KIT_CUDA_CHECK(cudaFuncSetAttribute(aligned_kernel<true, std::int32_t>,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   static_cast<int>(smem)));
            aligned_kernel<true, std::int32_t><<<grid, block, smem, detail::as_stream(stream)>>>(args);
        } else {
            FP8KIT_CUDA_CHECK(cudaFuncSetAttribute(aligned_kernel<false, std::int64_t>,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   static_cast<int>(smem)));
            aligned_kernel<false, std::int64_t><<<grid, block, smem, detail::as_stream(stream)>>>(args);
        }
        detail::check_launch("gemm_model aligned");
    }
    if (args.a.special_rows || args.b.special_rows) {
        special_kernel<<<dim3(static_cast<unsigned>((b.rows + 15) / 16), static_cast<unsigned>((a.rows + 15) / 16)),
                         block, 0, detail::as_stream(stream)>>>(args);
        detail::check_launch("gemm_model special elements");
    }
    FP8KIT_CUDA_CHECK(cudaStreamSynchronize(detail::as_stream(stream)));
}

}  // namespace fp8kit::cuda
