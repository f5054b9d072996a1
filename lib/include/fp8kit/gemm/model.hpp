// Accumulation models of an FP8 GEMM (docs/gemm.md defines each one precisely).
//
//   exact     one rounding (nearest-even) of the exact scale_a*scale_b*sum(a*b): wide integers
//   fp32      exact products, float32 sums in k order (nearest-even), then the epilogue
//   aligned   the parameterised tensor-core model: steps of `group` products aligned with the
//             running accumulator to the largest exponent, `align_bits` bits kept, the step's
//             sum rounded to float32; every `promote` products the partial sum is added to a
//             float32 accumulator on the "CUDA cores". The named instances sm90, sm90-fast and
//             deepseek-128 are parameter sets of it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "fp8kit/numerics/gemm_model.hpp"

namespace fp8kit::gemm {

// The enums live with the rules (numerics/gemm_model.hpp), shared with the CUDA model.
using numerics::gemm::AccumKind;
using numerics::gemm::StepRound;
// How a term keeps its bits above the alignment unit: drop the rest (toward zero, sign-magnitude),
// floor (toward -Inf: a right shift of a two's-complement significand), or nearest-even.
using numerics::gemm::AlignRound;
// When the scale product multiplies the sum: once in the epilogue, or at every promotion
// (DeepGEMM's outer += inner * scale); block scales always use `promotion`.
using numerics::gemm::ScaleAt;

struct AccumModel {
    std::string name;
    AccumKind kind = AccumKind::exact;
    // aligned only:
    int group = 32;       // products aligned together in one step (one MMA's k)
    int align_bits = 14;  // unit of the alignment: 2^(E + 1 - align_bits), E the largest term exponent
    // The exponent a product brings to E: `nominal` ea + eb (the operands' exponent fields, emin
    // for subnormals; the product's significand in (0, 4)), or `actual` floor(log2 |a b|).
    bool nominal_exponent = true;
    int sum_bits = 14;  // the step's exact sum truncated toward zero to this many significant bits; 0: not
    AlignRound align = AlignRound::toward_zero;
    bool sticky = false;                            // a term that lost nonzero bits keeps one more bit of half a unit
    StepRound step_round = StepRound::toward_zero;  // the step's exact sum -> float32
    int promote = 0;                                // N_C: products per promotion to the float32 accumulator; 0: never
    ScaleAt scale_at = ScaleAt::epilogue;
    // Split-K: K is cut into ranges of `split_k` products (a multiple of 128), each accumulated from
    // zero as a GEMM of its own (one CTA of cuBLASLt's *_splitK_* kernels); the ranges' float32
    // partial sums are added in k order in float32 (splitKreduce_kernel), then the epilogue. 0: no
    // split. cuBLASLt picks S splits and gives each ceil(K/128 / S) tiles of 128 (measured).
    int split_k = 0;
    // A scaled promotion (block scales, or scale=promotion) as one fused multiply-add,
    // outer = fma(fl32(sa * sb), c, outer): measured on cuBLASLt's block-scaled kernel
    // (docs/gemm.md, "Block scales"). false: fl32(outer + fl32(fl32(sa * sb) * c)).
    bool promote_fma = true;
};

// "exact", "fp32", "sm90", "sm90-fast", "deepseek-128", "h100tc", the split-K models
// "sm90-splitk:N" and "sm90-fast-splitk:N" (N products per split, a multiple of 128), or a parameter list "aligned:group=32,bits=14,exp=nominal|actual,sum_bits=14,promote=128,
// align=trunc|floor|rne,sticky=0|1,step=rz|rne,scale=epilogue|promotion,splitk=0,fma=1" (keys not
// given keep sm90-fast's values).
// Throws std::invalid_argument naming the bad part.
AccumModel parse_model(std::string_view text);
// The named models, in the order validate tries them (the split-K models need their split size:
// validate searches it, see split_sizes()).
std::vector<AccumModel> named_models();
// sm90 (fast = false) or sm90-fast with split-K ranges of `split_k` products: "sm90[-fast]-splitk:N".
AccumModel split_model(bool fast, int split_k);
// The split sizes cuBLASLt's rule can give for K: ceil(tiles / S) tiles of 128 for S = 2..max_splits
// (tiles = ceil(K/128)), each size once, largest first.
std::vector<int> split_sizes(std::size_t k, int max_splits);
// cuBLASLt's split-K choice for an FP8 GEMM on sm90 (cuBLASLt 13.1, torch 2.11's, on the H100 and
// H200), fitted to the split boundaries measured on 46 shapes (data/gemm_probe/; scripts/gpu/
// fit_split_count.py reruns the fit; docs/gemm.md, "Split-K: the prediction"). With tensorwise
// scales cuBLASLt takes S = floor(10 tiles / 201) splits (tiles = ceil(K / 128); every divisor in
// (20, 20.21] fits), each of ceil(tiles / S) tiles, and no split where S < 2; but on larger
// outputs it caps S by its kernel choice, which is not modelled: where S * M * N exceeds
// kSplitPredictionLimit the prediction is -1 (unknown). Returns N, the products per split, 0 for
// no split (also for rowwise and block scales, never seen split), or -1.
inline constexpr double kSplitPredictionLimit = 98304;
int predicted_split_k(std::size_t m, std::size_t n, std::size_t k, numerics::gemm::ScaleKind kind);
// The model's parameters in the plain form the rules (numerics/gemm_model.hpp) and the CUDA
// model (fp8kit/cuda/gemm.hpp) take.
numerics::gemm::ModelParams params_of(const AccumModel& m);
// Canonical text of a model (its name, or the aligned: list for unnamed ones).
std::string describe(const AccumModel& m);

}  // namespace fp8kit::gemm
