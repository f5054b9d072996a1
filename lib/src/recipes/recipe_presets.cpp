// The named presets and user recipe files (JSON, every field required, unknown fields rejected).
#include <sys/stat.h>

#include <cfloat>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fp8kit/recipes.hpp"
#include "fp8kit/io/gate.hpp"
#include "fp8kit/io/printable.hpp"

namespace fp8kit {
namespace {

constexpr Policy kSatfinite{Rounding::nearest_even, Overflow::saturate_all, NanEncoding::canonical};
// torch .to(float8) after a clamp to +-FMAX: finite overflow cannot happen, Inf becomes max.
constexpr Policy kTorchClamped{Rounding::nearest_even, Overflow::saturate_all, NanEncoding::signed_all_ones};
// E2M1/E2M3/E3M2 as cvt.rn.satfinite and cuda_fp4.h / cuda_fp6.h give them (emu Profile::
// cuda_satfinite): RNE, overflow and Inf saturate, NaN -> +max.
constexpr Policy kMxElement{Rounding::nearest_even, Overflow::saturate_all, NanEncoding::positive_max};
constexpr Policy kTorch{Rounding::nearest_even, Overflow::no_saturate, NanEncoding::signed_all_ones};

RoleSpec tensorwise(Format f, int window = 1) { return {f, Granularity::tensor, 1, 1, window}; }
RoleSpec rowwise(Format f) { return {f, Granularity::row, 1, 1, 1}; }
RoleSpec blocks(Format f, int r, int c) { return {f, Granularity::block, r, c, 1}; }

RecipeSpec base(const char* name, const char* source, RecipeKind kind, ScaleRule rule) {
    RecipeSpec r;
    r.name = name;
    r.source = source;
    r.kind = kind;
    r.rule = rule;
    r.history_len = 1;
    r.algo = AmaxAlgo::most_recent;
    r.margin = 0;
    r.epsilon = 0.0;
    r.pow2 = false;
    r.value_for_inf = FLT_MAX;
    r.policy = kSatfinite;
    return r;
}

std::vector<RecipeSpec> make_presets() {
    std::vector<RecipeSpec> v;
    {
        RecipeSpec r = base("te-delayed",
                            "TransformerEngine transformer_engine/common/recipe/delayed_scaling.cu "
                            "(kernel_bulk), transformer_engine/common/recipe/__init__.py",
                            RecipeKind::delayed, ScaleRule::te);
        r.input = tensorwise(Format::e4m3);
        r.weight = tensorwise(Format::e4m3);
        r.grad = tensorwise(Format::e5m2);
        r.history_len = 1024;
        r.algo = AmaxAlgo::max;
        v.push_back(r);
    }
    {
        RecipeSpec r = base("te-current",
                            "TransformerEngine transformer_engine/common/recipe/recipe_common.cuh "
                            "(compute_scale_from_amax), Float8CurrentScaling",
                            RecipeKind::current, ScaleRule::te);
        r.input = tensorwise(Format::e4m3);
        r.weight = tensorwise(Format::e4m3);
        r.grad = tensorwise(Format::e5m2);
        v.push_back(r);
    }
    {
        RecipeSpec r = base("te-block",
                            "TransformerEngine transformer_engine/common/recipe/recipe_common.cuh, "
                            "Float8BlockScaling (1x128 activations/grads, 128x128 weights)",
                            RecipeKind::current, ScaleRule::te);
        r.input = blocks(Format::e4m3, 1, 128);
        r.weight = blocks(Format::e4m3, 128, 128);
        r.grad = blocks(Format::e4m3, 1, 128);
        r.pow2 = true;
        v.push_back(r);
    }
    {
        RecipeSpec r = base("mxfp8",
                            "TransformerEngine transformer_engine/common/util/ptx.cuh "
                            "(float_to_e8m0), MXFP8BlockScaling",
                            RecipeKind::current, ScaleRule::mx_roundup);
        r.input = blocks(Format::e4m3, 1, 32);
        r.weight = blocks(Format::e4m3, 1, 32);
        r.grad = blocks(Format::e4m3, 1, 32);
        v.push_back(r);
    }
    {
        RecipeSpec r = base("mx-ocp", "OCP Microscaling Formats (MX) v1.0, section 6.3", RecipeKind::current,
                            ScaleRule::mx_ocp_floor);
        r.input = blocks(Format::e4m3, 1, 32);
        r.weight = blocks(Format::e4m3, 1, 32);
        r.grad = blocks(Format::e4m3, 1, 32);
        v.push_back(r);
    }
    {
        RecipeSpec r = base("nvfp4",
                            "TransformerEngine transformer_engine/common/cast/nvfp4/core_nvfp4.cuh, "
                            "quantize_transpose_nvfp4.cuh, NVFP4BlockScaling (1x16 activations/grads, "
                            "16x16 weights); reference transformer_engine/pytorch/custom_recipes/"
                            "quantization_nvfp4.py",
                            RecipeKind::current, ScaleRule::nvfp4_te);
        r.input = blocks(Format::e2m1, 1, 16);
        r.weight = blocks(Format::e2m1, 16, 16);
        r.grad = blocks(Format::e2m1, 1, 16);
        // TE NVFP4BlockScaling (recipe/__init__.py): fp4_quant_fwd_inp and fp4_quant_bwd_grad have
        // random_hadamard_transform=True, applied to the column-wise (wgrad) usage only;
        // fp4_quant_fwd_weight has none and 16x16 blocks (fp4_2d_quantization).
        r.input.columnwise_rht = true;
        r.grad.columnwise_rht = true;
        r.policy = kMxElement;
        // fp4_quant_bwd_grad has stochastic_rounding=not disable_stochastic_rounding (default on,
        // env NVTE_NVFP4_DISABLE_STOCHASTIC_ROUNDING), fp4_quant_fwd_inp and fp4_quant_fwd_weight
        // have False: gradients round stochastically in both copies, the rest to nearest. The
        // random bits are fp8kit's Philox rule (emu/random.hpp), not TE's curanddx draws.
        r.grad.rounding = Rounding::stochastic;
        v.push_back(r);
        // The same recipe's row-wise copies (fprop input, dgrad gradient): no RHT.
        r.name = "nvfp4-rowwise";
        r.source =
            "TransformerEngine NVFP4BlockScaling, the row-wise usage (no random Hadamard transform): "
            "transformer_engine/common/cast/nvfp4/quantize_transpose_nvfp4.cuh; reference "
            "transformer_engine/pytorch/custom_recipes/quantization_nvfp4.py";
        r.input.columnwise_rht = false;
        r.grad.columnwise_rht = false;
        v.push_back(r);
    }
    {
        RecipeSpec r = base("nvfp4-torchao",
                            "pytorch/ao torchao/prototype/mx_formats/nvfp4_tensor.py (nvfp4_quantize "
                            "with per_tensor_scale, per_tensor_amax_to_scale)",
                            RecipeKind::current, ScaleRule::nvfp4_torchao);
        r.input = blocks(Format::e2m1, 1, 16);
        r.weight = blocks(Format::e2m1, 1, 16);
        r.grad = blocks(Format::e2m1, 1, 16);
        r.policy = kMxElement;
        v.push_back(r);
    }
    // MXFP4 / MXFP6: 1x32 blocks, E8M0 scales. The round-up (RCEIL) presets apply TE's MXFP8 rule
    // with the element format's max (float_to_e8m0(amax * fl32(1 / fmax)), cast with exp2f_rcp);
    // torchao's RCEIL (mx_tensor.py _to_mx_rceil) gives the same bits except for blocks whose code
    // is 0 or whose amax * (1/fmax) reaches 2^127 (docs/recipes.md). The -ocp presets: the OCP MX
    // v1.0 section 6.3 floor with the element's emax (torchao ScaleCalculationMode.FLOOR).
    for (const auto& [fmt, stem] : {std::pair{Format::e2m1, "mxfp4"}, std::pair{Format::e2m3, "mxfp6-e2m3"},
                                    std::pair{Format::e3m2, "mxfp6-e3m2"}}) {
        for (const bool ocp : {false, true}) {
            const std::string nm = std::string(stem) + (ocp ? "-ocp" : "");
            RecipeSpec r = base("", "", RecipeKind::current, ocp ? ScaleRule::mx_ocp_floor : ScaleRule::mx_roundup);
            r.name = nm;
            r.source = ocp ? "OCP Microscaling Formats (MX) v1.0, sections 5 and 6.3"
                           : "TransformerEngine transformer_engine/common/util/ptx.cuh (float_to_e8m0, "
                             "exp2f_rcp) with the element format's max";
            r.input = blocks(fmt, 1, 32);
            r.weight = blocks(fmt, 1, 32);
            r.grad = blocks(fmt, 1, 32);
            r.policy = kMxElement;
            v.push_back(r);
        }
    }
    {
        RecipeSpec r = base("nvfp4-torchao-single",
                            "pytorch/ao torchao/prototype/mx_formats/nvfp4_tensor.py (nvfp4_quantize "
                            "with per_tensor_scale=None: block scales only)",
                            RecipeKind::current, ScaleRule::nvfp4_torchao_single);
        r.input = blocks(Format::e2m1, 1, 16);
        r.weight = blocks(Format::e2m1, 1, 16);
        r.grad = blocks(Format::e2m1, 1, 16);
        r.policy = kMxElement;
        v.push_back(r);
    }
    // torchao 0.18's to_mx (torchao/prototype/mx_formats/mx_tensor.py) under each
    // ScaleCalculationMode, for MXFP8 (E4M3), MXFP4 and MXFP6: block amax with NaN kept
    // (torch.amax), FLOOR/CEIL/EVEN divide by max(2^(code - 127), 2^-126), RCEIL's float32
    // division and log2 (numerics/scale_rules.hpp). E4M3 elements: clamp to +-448, then torch's
    // cast (NaN keeps its sign); FP4/FP6: torchao's RNE bit cast, which saturates.
    for (const auto& [fmt, stem] : {std::pair{Format::e4m3, "mxfp8"}, std::pair{Format::e2m1, "mxfp4"},
                                    std::pair{Format::e2m3, "mxfp6-e2m3"}, std::pair{Format::e3m2, "mxfp6-e3m2"}}) {
        for (const auto& [rule, mode] :
             {std::pair{ScaleRule::mx_torchao_floor, "floor"}, std::pair{ScaleRule::mx_torchao_ceil, "ceil"},
              std::pair{ScaleRule::mx_torchao_even, "even"}, std::pair{ScaleRule::mx_torchao_rceil, "rceil"}}) {
            RecipeSpec r = base("", "", RecipeKind::current, rule);
            r.name = std::string(stem) + "-torchao-" + mode;
            r.source = "pytorch/ao 0.18 torchao/prototype/mx_formats/mx_tensor.py (to_mx, ScaleCalculationMode)";
            r.input = blocks(fmt, 1, 32);
            r.weight = blocks(fmt, 1, 32);
            r.grad = blocks(fmt, 1, 32);
            r.policy = fmt == Format::e4m3 ? kTorchClamped : kMxElement;
            v.push_back(r);
        }
    }
    {
        RecipeSpec r = base("torchao-tensorwise",
                            "pytorch/ao torchao/float8/float8_utils.py (amax_to_scale), config.py "
                            "TENSORWISE",
                            RecipeKind::current, ScaleRule::torchao);
        r.input = tensorwise(Format::e4m3);
        r.weight = tensorwise(Format::e4m3);
        r.grad = tensorwise(Format::e5m2);
        r.epsilon = 1e-12;
        r.policy = kTorchClamped;
        v.push_back(r);
    }
    {
        RecipeSpec r = base("torchao-rowwise", "pytorch/ao torchao/float8/float8_utils.py, config.py ROWWISE",
                            RecipeKind::current, ScaleRule::torchao);
        r.input = rowwise(Format::e4m3);
        r.weight = rowwise(Format::e4m3);
        r.grad = rowwise(Format::e4m3);
        r.epsilon = 1e-12;
        r.pow2 = true;
        r.policy = kTorchClamped;
        v.push_back(r);
    }
    {
        RecipeSpec r = base("msamp",
                            "Azure/MS-AMP msamp/common/tensor/meta.py, cast.py, "
                            "msamp/optim/optimizer.py (_update_scaling_factors)",
                            RecipeKind::windowed, ScaleRule::msamp);
        r.input = tensorwise(Format::e4m3, 16);
        r.weight = tensorwise(Format::e4m3, 1);  // MS-AMP's "wgrad" meta
        r.grad = tensorwise(Format::e5m2, 16);
        v.push_back(r);
    }
    {
        RecipeSpec r = base("deepseek-v3",
                            "deepseek-ai/DeepGEMM deep_gemm/utils/math.py (per_token_cast_to_fp8, "
                            "per_block_cast_to_fp8)",
                            RecipeKind::current, ScaleRule::deepseek);
        r.input = blocks(Format::e4m3, 1, 128);
        r.weight = blocks(Format::e4m3, 128, 128);
        r.grad = blocks(Format::e4m3, 1, 128);
        r.epsilon = 1e-4;
        r.policy = kTorch;
        v.push_back(r);
    }
    {
        RecipeSpec r = base("megatron",
                            "NVIDIA/Megatron-LM --fp8-amax-history-len 1 --fp8-amax-compute-algo "
                            "most_recent --fp8-margin 0 on TransformerEngine DelayedScaling",
                            RecipeKind::delayed, ScaleRule::te);
        r.input = tensorwise(Format::e4m3);
        r.weight = tensorwise(Format::e4m3);
        r.grad = tensorwise(Format::e5m2);
        r.history_len = 1;
        r.algo = AmaxAlgo::most_recent;
        v.push_back(r);
    }
    return v;
}

const std::vector<RecipeSpec>& presets() {
    static const std::vector<RecipeSpec> v = make_presets();
    return v;
}

template <class E, std::size_t N>
E enum_field(const nlohmann::json& j, const char* key, const std::string& where,
             const std::pair<const char*, E> (&table)[N]) {
    const std::string s = j.at(key).get<std::string>();
    std::string choices;
    for (const auto& [n, e] : table) {
        if (s == n) return e;
        choices += choices.empty() ? n : std::string(", ") + n;
    }
    throw std::invalid_argument(fmt::format("{}: field '{}' is '{}'; expected one of {}", where, key, s, choices));
}

const std::pair<const char*, RecipeKind> kKinds[] = {
    {"delayed", RecipeKind::delayed}, {"current", RecipeKind::current}, {"windowed", RecipeKind::windowed}};
const std::pair<const char*, ScaleRule> kRules[] = {{"te", ScaleRule::te},
                                                    {"torchao", ScaleRule::torchao},
                                                    {"msamp", ScaleRule::msamp},
                                                    {"deepseek", ScaleRule::deepseek},
                                                    {"mx-roundup", ScaleRule::mx_roundup},
                                                    {"mx-ocp-floor", ScaleRule::mx_ocp_floor},
                                                    {"nvfp4-te", ScaleRule::nvfp4_te},
                                                    {"nvfp4-torchao", ScaleRule::nvfp4_torchao},
                                                    {"mx-torchao-floor", ScaleRule::mx_torchao_floor},
                                                    {"mx-torchao-ceil", ScaleRule::mx_torchao_ceil},
                                                    {"mx-torchao-even", ScaleRule::mx_torchao_even},
                                                    {"mx-torchao-rceil", ScaleRule::mx_torchao_rceil},
                                                    {"nvfp4-torchao-single", ScaleRule::nvfp4_torchao_single}};
const std::pair<const char*, AmaxAlgo> kAlgos[] = {{"max", AmaxAlgo::max}, {"most_recent", AmaxAlgo::most_recent}};
const std::pair<const char*, Granularity> kGran[] = {
    {"tensor", Granularity::tensor}, {"row", Granularity::row}, {"block", Granularity::block}};

template <class E, std::size_t N>
std::string_view enum_name(E e, const std::pair<const char*, E> (&table)[N]) {
    for (const auto& [n, v] : table)
        if (v == e) return n;
    return "?";
}

void require_keys(const nlohmann::json& j, const std::string& where, std::initializer_list<const char*> keys) {
    if (!j.is_object()) throw std::invalid_argument(where + ": expected a JSON object");
    for (const char* k : keys)
        if (!j.contains(k)) throw std::invalid_argument(fmt::format("{}: missing field '{}'", where, k));
    for (const auto& [k, v] : j.items()) {
        bool known = false;
        for (const char* want : keys) known = known || k == want;
        if (!known) throw std::invalid_argument(fmt::format("{}: unknown field '{}'", where, k));
    }
}

int int_field(const nlohmann::json& j, const char* key, const std::string& where, int lo, int hi) {
    const auto& v = j.at(key);
    if (!v.is_number_integer())
        throw std::invalid_argument(fmt::format("{}: field '{}' must be an integer", where, key));
    const auto x = v.get<long long>();
    if (x < lo || x > hi)
        throw std::invalid_argument(fmt::format("{}: field '{}' = {} outside [{}, {}]", where, key, x, lo, hi));
    return static_cast<int>(x);
}

double number_field(const nlohmann::json& j, const char* key, const std::string& where) {
    const auto& v = j.at(key);
    if (!v.is_number()) throw std::invalid_argument(fmt::format("{}: field '{}' must be a number", where, key));
    return v.get<double>();
}

RoleSpec role_from_json(const nlohmann::json& j, const std::string& where) {
    // "rounding" is the one optional field: files written before per-role rounding existed stay
    // valid, and a role without it rounds with the recipe-wide policy.rounding.
    if (j.is_object() && j.contains("rounding")) {
        nlohmann::json rest = j;
        rest.erase("rounding");
        RoleSpec r = role_from_json(rest, where);
        const auto& v = j.at("rounding");
        const auto ro = v.is_string() ? parse_rounding(v.get<std::string>()) : std::nullopt;
        if (!ro)
            throw std::invalid_argument(
                fmt::format("{}: field 'rounding' is {}; expected one of {}", where, v.dump(), rounding_choices()));
        r.rounding = *ro;
        return r;
    }
    require_keys(j, where, {"format", "granularity", "block_rows", "block_cols", "window", "columnwise_rht"});
    RoleSpec r;
    const auto f = parse_format(j.at("format").get<std::string>());
    if (!f)
        throw std::invalid_argument(fmt::format("{}: unknown format '{}'; expected one of {}", where,
                                                j.at("format").get<std::string>(), format_choices()));
    r.format = *f;
    r.granularity = enum_field(j, "granularity", where, kGran);
    r.block_rows = int_field(j, "block_rows", where, 1, 1 << 20);
    r.block_cols = int_field(j, "block_cols", where, 1, 1 << 20);
    r.window = int_field(j, "window", where, 1, 1 << 20);
    if (!j.at("columnwise_rht").is_boolean())
        throw std::invalid_argument(where + ": field 'columnwise_rht' must be true or false");
    r.columnwise_rht = j.at("columnwise_rht").get<bool>();
    if (r.columnwise_rht && !(r.granularity == Granularity::block && r.block_rows == 1 && r.block_cols == 16))
        throw std::invalid_argument(
            fmt::format("{}: field 'columnwise_rht' needs granularity 'block' with 1 x 16 "
                        "blocks (TE's Hadamard dimension is the NVFP4 tile length 16)",
                        where));
    return r;
}

nlohmann::json role_to_json(const RoleSpec& r) {
    return {{"format", std::string(name(r.format))},
            {"granularity", std::string(name(r.granularity))},
            {"block_rows", r.block_rows},
            {"block_cols", r.block_cols},
            {"window", r.window},
            {"columnwise_rht", r.columnwise_rht}};
}

// Written only where the role has its own rounding, so that the other presets and every file
// read back unchanged (and editing policy.rounding still reaches every role without one).
nlohmann::json role_to_json_full(const RoleSpec& r) {
    nlohmann::json j = role_to_json(r);
    if (r.rounding) j["rounding"] = std::string(name(*r.rounding));
    return j;
}

}  // namespace

std::string_view name(RecipeKind k) { return enum_name(k, kKinds); }
std::string_view name(ScaleRule r) { return enum_name(r, kRules); }
std::string_view name(AmaxAlgo a) { return enum_name(a, kAlgos); }
std::string_view name(Granularity g) { return enum_name(g, kGran); }
const RoleSpec& RecipeSpec::role(Role r) const {
    const Role slot = recipe_slot(r);
    return slot == Role::weight ? weight : slot == Role::gradient ? grad : input;
}

Policy RecipeSpec::policy_for(Role r) const {
    Policy p = policy;
    if (const auto& own = role(r).rounding) p.rounding = *own;
    return p;
}

const std::vector<std::string>& recipe_presets() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> n;
        for (const auto& r : presets()) n.push_back(r.name);
        return n;
    }();
    return names;
}

namespace {

// Every field a recipe file lacks, with its path ("roles.grad.window"), so that one run names
// them all rather than one per attempt.
void missing_fields(const nlohmann::json& j, const std::string& prefix, std::initializer_list<const char*> keys,
                    std::vector<std::string>& out) {
    if (!j.is_object()) return;  // require_keys names the wrong type
    for (const char* k : keys)
        if (!j.contains(k)) out.push_back("'" + prefix + k + "'");
}

void check_complete(const nlohmann::json& j, const std::string& where) {
    std::vector<std::string> missing;
    missing_fields(j, "",
                   {"name", "source", "kind", "rule", "roles", "history_len", "algo", "margin", "epsilon", "pow2",
                    "value_for_inf", "policy"},
                   missing);
    if (j.is_object() && j.contains("roles")) {
        const auto& roles = j.at("roles");
        missing_fields(roles, "roles.", {"input", "weight", "grad"}, missing);
        for (const char* r : {"input", "weight", "grad"})
            if (roles.is_object() && roles.contains(r))
                missing_fields(roles.at(r), std::string("roles.") + r + ".",
                               {"format", "granularity", "block_rows", "block_cols", "window", "columnwise_rht"},
                               missing);
    }
    if (j.is_object() && j.contains("policy"))
        missing_fields(j.at("policy"), "policy.", {"rounding", "overflow", "nan"}, missing);
    if (missing.empty()) return;
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    throw std::invalid_argument(
        fmt::format("{}: missing field{} {} ('fp8kit recipe show te-delayed' prints a complete "
                    "recipe to start from)",
                    where, missing.size() == 1 ? "" : "s", list));
}

}  // namespace

RecipeSpec recipe_from_json(const nlohmann::json& j, const std::string& where) {
    check_complete(j, where);
    require_keys(j, where,
                 {"name", "source", "kind", "rule", "roles", "history_len", "algo", "margin", "epsilon", "pow2",
                  "value_for_inf", "policy"});
    RecipeSpec r;
    r.name = j.at("name").get<std::string>();
    r.source = j.at("source").get<std::string>();
    r.kind = enum_field(j, "kind", where, kKinds);
    r.rule = enum_field(j, "rule", where, kRules);
    const auto& roles = j.at("roles");
    require_keys(roles, where + " roles", {"input", "weight", "grad"});
    r.input = role_from_json(roles.at("input"), where + " roles.input");
    r.weight = role_from_json(roles.at("weight"), where + " roles.weight");
    r.grad = role_from_json(roles.at("grad"), where + " roles.grad");
    r.history_len = int_field(j, "history_len", where, 1, 1 << 24);
    r.algo = enum_field(j, "algo", where, kAlgos);
    r.margin = int_field(j, "margin", where, -300, 300);
    r.epsilon = number_field(j, "epsilon", where);
    if (!(r.epsilon >= 0.0)) throw std::invalid_argument(where + ": field 'epsilon' must be >= 0");
    if (!j.at("pow2").is_boolean()) throw std::invalid_argument(where + ": field 'pow2' must be true or false");
    r.pow2 = j.at("pow2").get<bool>();
    const double vfi = number_field(j, "value_for_inf", where);
    if (!(vfi > 0.0) || vfi > static_cast<double>(FLT_MAX))
        throw std::invalid_argument(where + ": field 'value_for_inf' must be in (0, FLT_MAX]");
    r.value_for_inf = static_cast<float>(vfi);
    const auto& p = j.at("policy");
    require_keys(p, where + " policy", {"rounding", "overflow", "nan"});
    const auto ro = parse_rounding(p.at("rounding").get<std::string>());
    const auto ov = parse_overflow(p.at("overflow").get<std::string>());
    const auto na = parse_nan(p.at("nan").get<std::string>());
    if (!ro)
        throw std::invalid_argument(fmt::format("{}: policy.rounding: expected one of {}", where, rounding_choices()));
    if (!ov)
        throw std::invalid_argument(fmt::format("{}: policy.overflow: expected one of {}", where, overflow_choices()));
    if (!na) throw std::invalid_argument(fmt::format("{}: policy.nan: expected one of {}", where, nan_choices()));
    r.policy = {*ro, *ov, *na};
    return r;
}

nlohmann::json to_json(const RecipeSpec& r) {
    return {{"name", r.name},
            {"source", r.source},
            {"kind", std::string(name(r.kind))},
            {"rule", std::string(name(r.rule))},
            {"roles",
             {{"input", role_to_json_full(r.input)},
              {"weight", role_to_json_full(r.weight)},
              {"grad", role_to_json_full(r.grad)}}},
            {"history_len", r.history_len},
            {"algo", std::string(name(r.algo))},
            {"margin", r.margin},
            {"epsilon", r.epsilon},
            {"pow2", r.pow2},
            {"value_for_inf", static_cast<double>(r.value_for_inf)},
            {"policy",
             {{"rounding", std::string(name(r.policy.rounding))},
              {"overflow", std::string(name(r.policy.overflow))},
              {"nan", std::string(name(r.policy.nan))}}}};
}

// A recipe file is a few hundred bytes of JSON; anything near this is not one.
constexpr std::uint64_t kMaxRecipeBytes = std::uint64_t(1) << 20;

RecipeSpec parse_recipe(const std::string& name_or_path) {
    for (const auto& r : presets())
        if (r.name == name_or_path) return r;
    struct stat st {};
    if (::stat(name_or_path.c_str(), &st) != 0) {
        std::string names;
        for (const auto& n : recipe_presets()) names += (names.empty() ? "" : ", ") + n;
        throw std::invalid_argument(fmt::format("recipe '{}': not a preset ({}) and no readable file by that name",
                                                io::quoted(name_or_path), names));
    }
    std::string text;
    try {
        text = io::read_input_text(name_or_path, kMaxRecipeBytes, "a recipe file");  // io/gate.hpp
    } catch (const io::InputError& e) {
        throw std::invalid_argument(fmt::format("recipe file {}", e.what()));
    }
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        // nlohmann's message ends with the token it last read, which can be the whole file: cut.
        throw std::invalid_argument(
            fmt::format("recipe file '{}': not valid JSON: {}", io::quoted(name_or_path), io::quoted(e.what(), 300)));
    }
    try {
        return recipe_from_json(j, "recipe file '" + io::quoted(name_or_path) + "'");
    } catch (const nlohmann::json::exception& e) {
        throw std::invalid_argument(
            fmt::format("recipe file '{}': {}", io::quoted(name_or_path), io::quoted(e.what(), 300)));
    }
}

}  // namespace fp8kit
