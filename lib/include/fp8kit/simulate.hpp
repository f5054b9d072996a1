// Simulation of MS-AMP's FP8 weight-gradient all-reduce and its O2 optimizer states (FP8 first
// moment, FP16 second moment, FP16 master weights), from tensors of a real run. Every float32 step
// follows the operation order of MS-AMP's source and every cast is fp8kit's bit-exact conversion
// under the policy of the code that casts; docs/msamp.md gives each formula with its source file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "fp8kit/io/dump.hpp"
#include "fp8kit/io/report_fields.hpp"
#include "fp8kit/numerics/fast_math.hpp"

namespace fp8kit::simulate {

// fp_max per format, as msamp/common/dtype/floating.py computes it.
inline constexpr float kE4M3Max = 448.0f, kE5M2Max = 57344.0f, kF16Max = 65504.0f;

// ScalingMeta.compute_scaling_factor (msamp/common/tensor/meta.py), a TorchScript function, in its
// step order and float32 arithmetic. TorchScript evaluates `fp_max / amax` as
// `reciprocal(amax) * fp_max` (two roundings), and `1 / sf` as `reciprocal(sf)`:
//   1. q = fl32(fl32(1 / amax) * fp_max)
//   2. exp = floor(log2f(q)) - margin         (float32 log2, correctly rounded; docs/msamp.md)
//   3. sf = round(2^|exp|)                    (Inf past 2^127)
//   4. sf = scale where !(amax > 0)
//   5. sf = scale where amax is not finite
//   6. sf = fl32(1 / sf) where exp < 0        (after 4 and 5: an Inf amax gives 1/scale)
float compute_scaling_factor(float amax, float scale, float fp_max, int margin);

// The casts on each path (bit-exact, emu::convert):
std::uint8_t to_e4m3_satfinite(float x);               // TE cast_to_fp8 and __nv_fp8_e4m3(float): RNE, saturating
std::uint8_t half_to_e4m3_satfinite(std::uint16_t h);  // __nv_fp8_e4m3(__half)
float e4m3_to_float(std::uint8_t code);
std::uint16_t to_f16(float x);  // __float2half / Tensor.to(torch.float16): RNE, Inf on overflow
float f16_to_float(std::uint16_t h);

// ---- FP8 gradient all-reduce -----------------------------------------------------------------

// The order in which the FP8 partial sums are formed (each hop rounds back to E4M3):
//   rank: ((r0 + r1) + r2) + ...;
//   ring: NCCL ring reduce-scatter: the element's chunk c (of N equal chunks) is summed starting at
//         rank c+1 and going round to rank c;
//   tree: balanced pairwise tree ((r0+r1)+(r2+r3))+...
enum class Order : std::uint8_t { rank, ring, tree };
inline constexpr Order kAllOrders[] = {Order::rank, Order::ring, Order::tree};
// Names (simulate/names.cpp): parse_X throws std::invalid_argument listing the accepted names.
std::string_view name(Order o);  // "rank", "ring", "tree"
Order parse_order(std::string_view s);

// How one hop adds two E4M3 values (msccl-executor-nccl src/device/reduce_kernel.h, FuncSum):
//   half:    __nv_fp8_e4m3(__hadd(__half(x), __half(y)))   (sm_80 and newer)
//   float32: __nv_fp8_e4m3(float(x) + float(y))             (older GPUs)
enum class HopArith : std::uint8_t { half, float32 };
std::string_view name(HopArith h);  // "half", "float32"
HopArith parse_hop(std::string_view s);
std::uint8_t fp8_add(std::uint8_t a, std::uint8_t b, HopArith h);

// ddp: msamp/nn/distributed.py (_ScalingTensorReducer), scale times 1/sqrt(N);
// non_ddp: common/tensor/cast.py cast_to_fp8(sync=True) + tensor_dist.py all_reduce_avg (no pre-scale).
enum class Path : std::uint8_t { ddp, non_ddp };
std::string_view name(Path p);  // "ddp", "non-ddp"
Path parse_path(std::string_view s);

// The gradients of N ranks, produced block by block so N = 1024 copies of a large tensor are never
// held at once.
class RankSource {
public:
    virtual ~RankSource() = default;
    virtual int ranks() const = 0;
    virtual std::size_t size() const = 0;
    virtual void fill(int rank, std::size_t first, std::size_t count, float* out) const = 0;
};
// The dtype the weight gradient has when it enters the FP8 all-reduce. MS-AMP casts the FP8
// GEMM's weight-gradient output, whose dtype is ctx.output_qtype (msamp/nn/functional.py,
// _FP8GemmFunction.backward: wgrad_qtype = ctx.output_qtype): the autocast dtype under
// torch.autocast (float16 unless set), else the input's dtype. f32 casts the dumped gradient
// directly; f16 / bf16 first round each rank's float32 value to that type (nearest even;
// float16 overflows to Inf as torch's .half() does).
enum class WgradDtype : std::uint8_t { f32, f16, bf16 };
std::string_view name(WgradDtype w);
WgradDtype parse_wgrad_dtype(std::string_view s);  // "fp32" | "fp16" | "bf16"; throws std::invalid_argument
// `src` with every value rounded to `w` (kept alive by the caller).
std::unique_ptr<RankSource> rounded_ranks(std::unique_ptr<RankSource> src, WgradDtype w);

// Ranks given explicitly (each vector one rank, all of one size).
std::unique_ptr<RankSource> explicit_ranks(std::vector<std::vector<float>> ranks);
// One gradient split into N ranks (docs/msamp.md, "perturbation model"): rank r holds
// fl32(g * fl32(1 + spread * u)), u = +-U(r/2, i) in [-1, 1) from splitmix64(seed, r/2, i), with
// the sign + for even r and - for odd r (the last rank of an odd N takes u = 0), so the ranks
// average to g up to float32 rounding.
std::unique_ptr<RankSource> split_ranks(std::vector<float> g, int n, double spread, std::uint64_t seed);

struct AllReduceOptions {
    Path path = Path::ddp;
    HopArith hop = HopArith::half;
    // meta.scale before this step: the weight gradient's ScalingMeta starts at 1 and keeps the last
    // step's scale (DDP: 1/sqrt(N) included); run_msamp carries it over the dumped steps (docs/msamp.md).
    float old_scale = 1.0f;
};

// One order's result.
struct OrderResult {
    Order order;
    std::vector<std::uint8_t> codes;  // the summed E4M3 codes
    std::vector<float> values;        // fl32(e4m3(code) * scale_inv): ScalingTensor.float()
    std::uint64_t hop_overflows = 0;  // hops whose sum before the cast exceeded 448 in magnitude
    // Hops that added a nonzero value and returned the other operand's code unchanged (no
    // overflow): the partial sum has stalled, its E4M3 spacing (2^-3 of it) larger than twice the
    // addend. hops = size x (N - 1).
    std::uint64_t stalled_hops = 0, hops = 0;
    double max_partial = 0;  // largest |partial sum| before the cast, in scaled units
    // against the exact mean (float64 sum of the ranks' float32 values / N):
    double rel_error = 0;         // ||result - mean|| / ||mean|| (L2)
    double sqnr_db = 0;           // 10 log10(sum mean^2 / sum (result - mean)^2); Inf when equal
    std::uint64_t underflow = 0;  // elements with mean != 0 and result 0
    std::uint64_t nonfinite = 0;  // result NaN or Inf
};

struct AllReduceResult {
    int ranks = 0;
    std::size_t size = 0;
    float old_scale = 1.0f;            // AllReduceOptions::old_scale
    float amax = 0;                    // MAX over ranks of max|g_r|, NaN and +Inf mapped to +Inf first
    float scale = 0;                   // the cast's scale (DDP: compute_scaling_factor * fl32(1/sqrt(N)))
    float scale_inv = 0;               // fl32(fl32(1/scale) / N), the scale_inv after div_(N)
    std::uint64_t cast_underflow = 0;  // rank elements != 0 whose cast gives a zero code
    std::uint64_t cast_saturated = 0;  // rank elements with |g * scale| > 448 (clamped)
    std::uint64_t cast_nonzero = 0;    // rank elements != 0
    std::vector<OrderResult> orders;   // in the order asked for
    double order_spread = 0;           // max over elements of (max - min over orders) / RMS(mean)
    std::uint64_t order_differs = 0;   // elements whose codes differ between two orders
    int extra_margin = 0;              // smallest k >= 0 with every partial sum, summed exactly in the same orders
                                       // (no rounding, no clamp), / 2^k <= 448: the margin that avoids clamping
};

AllReduceResult fp8_allreduce(const RankSource& src, const std::vector<Order>& orders,
                              const AllReduceOptions& opts = {});

// Shares of an all-reduce's counts (0 when the count they divide by is 0): nonzero rank elements
// whose cast gives a zero code, of cast_nonzero; an order's elements whose mean is nonzero and
// result 0, of all elements; an order's hops that added a nonzero value and changed nothing, of
// all hops.
double cast_underflow_share(const AllReduceResult& r);
double underflow_share(const AllReduceResult& r, const OrderResult& o);
double stalled_share(const OrderResult& o);

// The field tables of an all-reduce's result (allreduce_fields.cpp), each key written once: the
// metric names of `fp8kit simulate msamp`'s all-reduce rows (CSV and JSON) and the keys of
// fp8kit.msamp.allreduce's dict. The result's own fields: old_scale, amax, scale, scale_inv,
// cast_underflow_share, cast_saturated, order_spread, order_differs, extra_margin.
const io::FieldTable<AllReduceResult>& allreduce_fields();
// One order's result with the all-reduce it belongs to: hop_overflows, stalled_share,
// max_partial, rel_error, sqnr_db, underflow_share, nonfinite (the rows whose `order` names it;
// the dict's orders[name]).
struct OrderRow {
    const AllReduceResult& result;
    const OrderResult& order;
};
const io::FieldTable<OrderRow>& order_fields();

// ---- O2 optimizer states -------------------------------------------------------------------

struct AdamHyper {
    double lr = 3e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
    bool bias_correction = true;
};

// The FP32 AdamW reference that each simulated optimizer below runs beside its low-precision
// states (the same kernel expressions with FP32 states and weights), and its step count.
class AdamReference {
public:
    std::size_t size() const { return w32_.size(); }
    std::int64_t steps() const { return step_; }
    const std::vector<float>& ref_weight() const { return w32_; }
    const std::vector<float>& ref_m() const { return m32_; }
    const std::vector<float>& ref_v() const { return v32_; }
    const std::vector<float>& initial_weight() const { return w0_; }

protected:
    AdamReference(std::vector<float> weight, AdamHyper h, std::int64_t step)
        : h_(h), step_(step), w0_(weight), w32_(std::move(weight)) {}
    // Throws std::invalid_argument when a gradient's size is not the weight's, else counts the step.
    void begin_step(const std::vector<float>& grad, const std::vector<float>& ref_grad);

    AdamHyper h_;
    std::int64_t step_;
    std::vector<float> w0_, w32_, m32_, v32_;
};

// An optimizer state's storage dtype, as the optimizers name it (torch.float32/float16/bfloat16/
// uint8; uint8 is E4M3 with one per-tensor scale).
enum class StateDtype : std::uint8_t { f32, f16, bf16, fp8 };  // torch.float32/float16/bfloat16/uint8
std::string_view name(StateDtype d);                           // fp32, fp16, bf16, fp8
StateDtype parse_state_dtype(std::string_view s);              // simulate/names.cpp

// LBAdamW's exp_avg_dtype / exp_avg_sq_dtype: fp8 (torch.uint8, E4M3) or fp16 (torch.float16),
// each with a per-tensor scale (msamp/optim/adamw_base.py; MS-AMP's defaults below).
struct MsampStates {
    StateDtype exp_avg = StateDtype::fp8, exp_avg_sq = StateDtype::f16;
};

// One parameter tensor under LBAdamW (msamp/optim/adamw.py, adamw.cu) with exp_avg and exp_avg_sq
// stored as MsampStates says (E4M3 or FP16, with scale), next to the FP32 AdamW reference (same
// kernel expressions, FP32 states and weights). The master weight is FP16 with scale
// ((x * scale).to(fp16), cast.py cast_to_fp16) when fp16_master, else FP32. The kernels'
// arithmetic is adamw.cu as MS-AMP compiles it (nvcc defaults: three multiply-adds contracted
// into FMAs; docs/msamp.md section 3).
class MsampAdam : public AdamReference {
public:
    // Initial FP32 weights and states (exp_avg / exp_avg_sq may be empty: zeros); `step` is the
    // number of optimizer steps already taken. FP32 states are cast as TypeCast.cast_to_fp8 /
    // cast_to_fp16 cast an FP32 tensor. Throws std::invalid_argument for a state dtype other
    // than fp8 or fp16.
    MsampAdam(std::vector<float> weight, std::vector<float> exp_avg, std::vector<float> exp_avg_sq, AdamHyper h,
              std::int64_t step = 0, bool fp16_master = true, MsampStates states = {});
    void step(const std::vector<float>& grad) { step(grad, grad); }  // one step of both (throws on a size mismatch)
    // The simulated side takes `grad`, the FP32 reference `ref_grad` (e.g. the FP8 all-reduce's
    // result against the exact rank mean, so the drift includes the gradient's own FP8 error).
    void step(const std::vector<float>& grad, const std::vector<float>& ref_grad);

    // The simulated state: E4M3 codes (in the low byte) or FP16 bits, as states() says.
    const MsampStates& states() const { return states_; }
    const std::vector<std::uint16_t>& m_codes() const { return m_q_; }
    const std::vector<std::uint16_t>& v_bits() const { return v_q_; }
    const std::vector<std::uint16_t>& master_bits() const { return w_q_; }
    float m_scale() const { return m_scale_; }
    float v_scale() const { return v_scale_; }
    float master_scale() const { return w_scale_; }
    std::vector<float> weight() const;         // the simulated weights as float32 (dequantized master)
    std::vector<float> m_dequantized() const;  // fl32(e4m3(code) * fl32(1 / m_scale))
    std::vector<float> v_dequantized() const;
    // The FP32 reference: AdamReference.

private:
    bool fp16_master_;
    MsampStates states_;
    std::vector<float> wsim_;  // the FP32 master when !fp16_master
    std::vector<std::uint16_t> m_q_, v_q_, w_q_;
    float m_scale_ = 1, v_scale_ = 1, w_scale_ = 1;
};

// How far the simulation is from the FP32 reference.
struct AdamReport {
    std::int64_t steps = 0;
    std::uint64_t m_underflow = 0, v_underflow = 0;  // reference != 0, stored state dequantizes to 0
    std::uint64_t m_nonzero = 0, v_nonzero = 0;
    double m_rel_error = 0, v_rel_error = 0;  // L2, dequantized state vs reference state
    double update_rel_error = 0;              // ||(w_sim - w0) - (w_ref - w0)|| / ||w_ref - w0||
    double weight_max_abs_diff = 0;
    float m_scale = 0, v_scale = 0;
};
AdamReport report(const MsampAdam& a);

// ---- TransformerEngine FusedAdam with FP8/FP16/BF16 states -----------------------------------
// transformer_engine/pytorch/optimizers/fused_adam.py (FusedAdam: exp_avg_dtype, exp_avg_sq_dtype,
// master_weight_dtype) and transformer_engine/common/multi_tensor/adam.cu (AdamFunctor, AdamW mode).
// Unlike MS-AMP, TE does not update the states in low precision: step() dequantizes every state to
// FP32 (get_unscaled_state), runs the FP32 kernel, then re-quantizes each state (_apply_scale)
// with scale = absmax / range (range 448 for FP8, 65504 / 2 for FP16). docs/msamp.md gives every step.

// One stored state (or master weight) as FusedAdam holds it.
struct TeState {
    StateDtype dtype = StateDtype::f32;
    std::vector<std::uint32_t> bits;         // stored values: E4M3 codes, FP16/BF16 bits or FP32 bits
    float scale = 1;                         // FusedAdam._scales[param][name]: fl32(absmax / range)
    float fp8_scale = 1;                     // Float8Tensor quantizer scale: fl32(1 / scale)
    float fp8_scale_inv = 1;                 // Float8Tensor._scale_inv: __frcp_rn(fp8_scale)
    std::vector<float> dequantized() const;  // get_unscaled_state
};

// How TE's adam.cu was compiled. TE's own build (transformer_engine/common/CMakeLists.txt,
// nvte_sources_with_fast_math) uses `-O3 --use_fast_math`: flushed subnormals, MUFU.RCP division
// and MUFU.SQRT (numerics/fast_math.hpp, tables captured on an H200). nvcc_default: `-O3` alone
// (IEEE division and square root, subnormals kept), for a TE built without that flag. Both contract
// the same four multiply-adds (docs/msamp.md).
enum class TeBuild { fast_math, nvcc_default };
std::string_view name(TeBuild b);            // fast-math, nvcc-default
TeBuild parse_te_build(std::string_view s);  // simulate/names.cpp

struct TeAdamOptions {
    StateDtype exp_avg = StateDtype::fp8, exp_avg_sq = StateDtype::fp8;
    StateDtype master = StateDtype::f32;  // master_weight_dtype: f32 or f16 only
    TeBuild build = TeBuild::fast_math;
};

// The tables of numerics::fast_math (MUFU.RCP, MUFU.SQRT of sm_90), inflated on first use.
const numerics::fast_math::MufuTables& mufu_sm90_tables();

// One parameter under TE FusedAdam (adam_w_mode=True, master_weights=True, capturable=False,
// store_param_remainders=False), next to the same optimizer with FP32 states and master weight.
class TeFusedAdam : public AdamReference {
public:
    // Empty exp_avg / exp_avg_sq: fresh zero states (_initialize_state, zero_buffer=True: scale 1).
    // Given FP32 states are stored as load_state_dict stores them (set_scaled_state -> _apply_scale).
    TeFusedAdam(std::vector<float> weight, std::vector<float> exp_avg, std::vector<float> exp_avg_sq, AdamHyper h,
                std::int64_t step = 0, TeAdamOptions o = {});
    void step(const std::vector<float>& grad) { step(grad, grad); }                 // throws on a size mismatch
    void step(const std::vector<float>& grad, const std::vector<float>& ref_grad);  // as MsampAdam's

    const TeState& m_state() const { return m_; }
    const TeState& v_state() const { return v_; }
    const TeState& master_state() const { return w_; }
    std::vector<float> weight() const { return w_.dequantized(); }
    std::vector<float> m_dequantized() const { return m_.dequantized(); }
    std::vector<float> v_dequantized() const { return v_.dequantized(); }

private:
    TeState m_, v_, w_;
    TeBuild build_ = TeBuild::fast_math;
};
AdamReport report(const TeFusedAdam& a);  // m_scale / v_scale: TeState::scale

}  // namespace fp8kit::simulate

// ---- Reading a run's dumps ------------------------------------------------------------------
namespace fp8kit::simulate {

// The tensors of one parameter in one or more dumps (one file per rank). A dataset is named
// <...>/<parameter path>/<leaf>, with the step in a path component or a `step` attribute
// (docs/dumps.md); leaves: `wgrad` or `grad` (the weight gradient), `exp_avg`, `exp_avg_sq`,
// `weight` (the FP32 master weight). Other datasets are ignored.
class DumpInput {
public:
    // Throws std::invalid_argument naming the file and dataset on any unreadable input, and when
    // no file holds a weight gradient.
    // Read with `opts` (dump.hpp: the limits, and which files may be read: by default only the
    // ones named).
    explicit DumpInput(const std::vector<std::string>& files, const std::vector<std::string>& include = {},
                       const dump::ReadOptions& opts = {});
    ~DumpInput();
    DumpInput(DumpInput&&) noexcept;
    int ranks() const;  // number of files
    std::vector<std::string> params() const;
    std::vector<std::int64_t> steps(const std::string& param) const;  // steps with a gradient
    // The gradient of every rank at `step` (a file without it: std::invalid_argument).
    std::vector<std::vector<float>> grads(const std::string& param, std::int64_t step);
    // exp_avg / exp_avg_sq / weight from the first file that has it; empty when none has.
    std::vector<float> state(const std::string& param, std::int64_t step, const std::string& leaf);
    // Datasets the reader skipped on purpose (stored outside the file, mapped from another, an
    // external link: dump.hpp), each "file: dataset: why"; a parameter whose gradient or state is
    // among them is simulated without it or not at all, so callers must show these.
    std::vector<dump::Problem> skipped() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace fp8kit::simulate

// ---- A whole simulation over a run's dumps (fp8kit simulate msamp, fp8kit.msamp.simulate) ----
namespace fp8kit::simulate {

// What the optimizer of O2 is fed. `mean`: both sides take the exact rank mean (float64 sum / N,
// rounded to float32), so the metrics isolate the state storage. `fp8_allreduce`: the simulated
// side takes the FP8 all-reduce's result (first path and order asked for; a single dump is split
// into the first --ranks N), the FP32 reference keeps the exact mean: the drift is O2 end to end.
enum class OptimizerGrad : std::uint8_t { mean, fp8_allreduce };
std::string_view name(OptimizerGrad g);
OptimizerGrad parse_optimizer_grad(std::string_view s);  // "mean" | "fp8-allreduce"; throws std::invalid_argument

struct MsampRunOptions {
    bool o2 = false;         // level O2: the optimizer too
    std::vector<int> ranks;  // N to split a single dump into (ignored with several dumps)
    std::vector<Path> paths{Path::ddp, Path::non_ddp};
    std::vector<Order> orders{Order::rank, Order::ring, Order::tree};
    HopArith hop = HopArith::half;
    double spread = 1.0;
    std::uint64_t seed = 0;
    AdamHyper hyper;
    bool te_fused_adam = false;  // O2 optimizer: TE FusedAdam (te) instead of MS-AMP's LBAdamW
    TeAdamOptions te;
    MsampStates msamp_states;  // LBAdamW's state dtypes
    bool fp32_master = false;  // LBAdamW: FP32 master weights
    OptimizerGrad optimizer_grad = OptimizerGrad::mean;
    WgradDtype wgrad = WgradDtype::f32;  // the gradient's dtype entering the all-reduce
};

// One number of the long-form output (section allreduce or optimizer).
struct MsampRow {
    std::string section, tensor;
    std::int64_t step;
    int ranks;
    std::string path, order, metric;
    double value;
};

// A tensor is flagged as underflowing when this share of its nonzero mean elements sums to 0.
inline constexpr double kUnderflowFlag = 0.01;
// A tensor is flagged as stalling when, in some order, this share of its hops add nothing.
inline constexpr double kStallFlag = 0.01;

struct MsampFlags {  // per (ranks, path): the tensors flagged
    std::set<std::string> overflow, underflow, stall;
    std::map<std::string, int> margin;  // the margin that avoids every clamp, where > 0
};

struct MsampRun {
    std::vector<std::string> params;
    std::vector<MsampRow> rows;  // in parameter, step, N, path order: the same for any thread count
    std::map<std::pair<int, std::string>, MsampFlags> flags;
    std::vector<std::string> notes;
    int optimizer_ranks = 1;  // the `ranks` of the optimizer rows
};

// Runs the all-reduce for every parameter, step, N and path, and at O2 the optimizer over the
// dumped steps (docs/msamp.md). Each (parameter, N, path) carries the gradient meta's scale from
// one dumped step to the next, starting at 1, as MS-AMP's wgrad ScalingMeta does (row old_scale). `ranks` must be given for a single dump (e.g. {8, 64, 1024}).
MsampRun run_msamp(DumpInput& in, const MsampRunOptions& opts);

// The O2 optimizer of a run and its state dtypes, as the CLI (--optimizer, --exp-avg-dtype,
// --exp-avg-sq-dtype, --master-weight-dtype) and fp8kit.msamp.simulate name them; an empty dtype
// is the optimizer's default (msamp: fp8 / fp16, MS-AMP's LBAdamW defaults; te-fused-adam:
// fp8 / fp8 / fp32). msamp takes fp8 or fp16 states and no master dtype (its master weight is
// FP16 unless fp32_master). te_build (te-fused-adam only; empty: fast-math, TE's own build) names
// how TE's adam.cu was compiled (TeBuild). Throws std::invalid_argument naming the argument.
void set_optimizer(MsampRunOptions& o, std::string_view optimizer, std::string_view exp_avg,
                   std::string_view exp_avg_sq, std::string_view master, std::string_view te_build = {});

// The run's report as `fp8kit simulate msamp` prints it (simulate/msamp_report.cpp), from the
// run and the options it ran with: long-form CSV (section,tensor,step,ranks,path,order,metric,
// value); JSON (every row, the flagged tensors per N and path, the notes, `dumps` and `skipped`:
// DumpInput::skipped()); the text summary for `dumps` files.
std::string msamp_csv(const MsampRun& run);
std::string msamp_json(const MsampRun& run, const MsampRunOptions& opts, const std::vector<std::string>& dumps,
                       const std::vector<dump::Problem>& skipped);
std::string msamp_text(const MsampRun& run, const MsampRunOptions& opts, std::size_t dumps);

}  // namespace fp8kit::simulate
