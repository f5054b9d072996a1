// checkpoint check: structure, scale values, KV scale names, and (with a reference folder) the
// re-quantisation of every weight under the producer's own rule, compared code by code.
#include <algorithm>
#include <cmath>
#include <limits>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "checkpoint/findings.hpp"
#include "checkpoint/name_pattern.hpp"
#include "fp8kit/io/printable.hpp"
#include "checkpoint/kv_names.hpp"
#include "checkpoint/modelopt_presets.hpp"
#include "checkpoint/moe_rules.hpp"
#include "checkpoint/producer_rules.hpp"
#include "checkpoint/sibling_scales.hpp"
#include "checkpoint/trtllm_rows.hpp"
#include "fp8kit/checkpoint.hpp"
#include "fp8kit/emu/pack.hpp"

namespace fp8kit::checkpoint {
namespace {

using detail::Scales;

std::uint64_t numel(const std::vector<std::uint64_t>& s) {
    std::uint64_t n = 1;
    for (auto d : s) n *= d;
    return n;
}
std::string shape_str(const std::vector<std::uint64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

// The weight's codes, one per element (FP4 unpacked, low nibble first as every producer here
// packs: ModelOpt, compressed-tensors and gpt-oss).
std::vector<std::uint8_t> codes_of(const Layer& L, const RawTensor& w,
                                   emu::NibbleOrder order = emu::NibbleOrder::low_first) {
    if (w.dtype != "U8") return std::vector<std::uint8_t>(w.bytes.begin(), w.bytes.end());
    if (detail::int4_packed(L.scheme)) {
        // ModelOpt INT4 (quant_utils.py pack_int4_in_uint8): byte [r/2][c] holds rows 2i (low
        // nibble) and 2i + 1 (high nibble) of column c.
        std::vector<std::uint8_t> c(L.rows * L.cols);
        const bool low = order == emu::NibbleOrder::low_first;
        for (std::uint64_t r = 0; r < L.rows; ++r)
            for (std::uint64_t k = 0; k < L.cols; ++k) {
                const std::uint8_t b = w.bytes[(r / 2) * L.cols + k];
                c[r * L.cols + k] = ((r % 2 == 0) == low) ? (b & 0xF) : (b >> 4);
            }
        return c;
    }
    std::vector<std::uint8_t> c(w.bytes.size() * 2);
    emu::unpack_fp4_array(w.bytes.data(), c.data(), c.size(), order);
    c.resize(std::min<std::size_t>(c.size(), L.rows * L.cols));
    return c;
}

// Which blocks hold a nonzero code, from runs of codes in element order (the whole layer, or the
// pieces a stream delivers). A block's codes in a row are scanned only until the block is known
// to be live, so a layer of nonzero weights costs about one code per block and row.
struct LiveBlocks {
    std::uint64_t rows, cols, br, bc, grid_cols;
    std::uint8_t mask;  // the code's magnitude bits (E4M3 0x7F, E2M1 0x7)
    std::vector<char> live;
    // Two's complement integer codes (INT4 nibbles, INT8 bytes): full[b] = block b holds a code of
    // magnitude full_at or more (7 for INT4, 127 for INT8: the max rule's top code); unused at 0.
    int full_at = 0;
    std::vector<char> full;
    LiveBlocks(const Layer& L, const Scales& st, bool fp4, std::uint64_t n)
        : rows(L.rows),
          cols(L.cols),
          br(st.block_rows),
          bc(st.block_cols),
          grid_cols(st.grid_cols),
          mask(fp4 ? 0x7 : 0x7F),
          live(n, 0),
          full(n, 0) {}
    int magnitude(std::uint8_t code) const {
        const int v = code & mask, sign_bit = (mask + 1) / 2;
        return v & sign_bit ? mask + 1 - v : v;
    }
    // codes[0..count) are elements first .. first + count - 1 (row-major).
    void add(std::uint64_t first, const std::uint8_t* codes, std::uint64_t count) {
        std::uint64_t r = first / cols, c = first % cols, i = 0;
        while (i < count && r < rows) {
            const std::uint64_t end = std::min<std::uint64_t>(cols, c + (count - i));  // this row's run
            char* lrow = &live[(r / br) * grid_cols];
            char* frow = &full[(r / br) * grid_cols];
            while (c < end) {
                const std::uint64_t k = c / bc, stop = std::min<std::uint64_t>(end, (k + 1) * bc);
                if (!lrow[k])
                    for (std::uint64_t j = c; j < stop; ++j)
                        if (codes[i + (j - c)] & mask) {
                            lrow[k] = 1;
                            break;
                        }
                if (full_at && !frow[k])
                    for (std::uint64_t j = c; j < stop && !frow[k]; ++j)
                        frow[k] = magnitude(codes[i + (j - c)]) >= full_at;
                i += stop - c;
                c = stop;
            }
            if (c == cols) c = 0, ++r;
        }
    }
};

// The scale shapes each layout stores for weight w (rows per expert, cols = L's logical shape):
// the block grid [grid_rows, grid_cols] (compressed-tensors, DeepSeek weight_scale_inv, NVFP4,
// MX, W4A8), behind [experts] for a stacked weight; gpt-oss `.scales` = the `.blocks` shape
// without its last dimension; per tensor any shape of one element (ModelOpt [], compressed-tensors
// [1]), per expert [E], [E, 1], [E, 1, 1]; per channel [rows] or [rows, 1]. A one-block FP8 block
// grid may be stored as one element (ModelOpt FP8_PB_WO writes []).
std::vector<std::vector<std::uint64_t>> scale_shapes(Producer p, const Layer& L, const std::vector<std::uint64_t>& w) {
    const std::uint64_t E = L.experts, r = E ? L.rows / E : L.rows, c = L.cols;
    auto with_e = [&](std::vector<std::uint64_t> v) {
        if (E) v.insert(v.begin(), E);
        return v;
    };
    const std::uint64_t br = std::max<std::uint64_t>(L.block_rows, 1),
                        bc = std::max<std::uint64_t>(L.block_cols ? L.block_cols : c, 1);
    switch (L.scheme) {
        case Scheme::fp8_tensor:
            if (L.block_rows < L.rows) return {{E}, {E, 1}, {E, 1, 1}};
            return {};  // any shape of one element
        case Scheme::fp8_channel:
        case Scheme::int8: return {with_e({r}), with_e({r, 1})};
        case Scheme::fp8_block: {
            const std::uint64_t gr = (r + br - 1) / br, gc = (c + bc - 1) / bc;
            // ModelOpt FP8_PB_WO keeps FP8QTensor's blocked view [gr, 1, gc, 1] (qtensor/fp8_tensor.py).
            if (p == Producer::modelopt) return {with_e({gr, gc}), with_e({gr, 1, gc, 1})};
            return {with_e({gr, gc})};
        }
        case Scheme::nvfp4:
        case Scheme::mxfp4:
        case Scheme::mxfp8:
        case Scheme::w4a8:
        case Scheme::int4:
            if (L.weight.size() > 6 && L.weight.compare(L.weight.size() - 6, 6, "blocks") == 0 && w.size() >= 2)
                return {std::vector<std::uint64_t>(w.begin(), w.end() - 1)};
            return {with_e({r, (c + bc - 1) / bc})};
        default: return {};
    }
}
bool shape_ok(Producer p, const Layer& L, const std::vector<std::uint64_t>& w, const std::vector<std::uint64_t>& s) {
    const auto ok = scale_shapes(p, L, w);
    const bool one = numel(s) == 1;
    if (one && (L.scheme == Scheme::fp8_tensor && L.block_rows >= L.rows)) return true;
    if (one && L.scheme == Scheme::fp8_block && !L.experts) return true;  // one block: ModelOpt [] or [1, 1]
    return std::find(ok.begin(), ok.end(), s) != ok.end();
}
std::string expected_shapes(Producer p, const Layer& L, const std::vector<std::uint64_t>& w) {
    std::vector<std::string> v;
    for (const auto& s : scale_shapes(p, L, w)) v.push_back(shape_str(s));
    return v.empty() ? std::string("one element") : fmt::format("{}", fmt::join(v, " or "));
}

// Whether a config_groups target names the module: a class name ("Linear", which every quantised
// layer here is, save embeddings) or a module name / "re:" pattern (compressed_tensors/utils/match.py).
bool targeted(const std::vector<std::string>& targets, const std::string& module) {
    const bool embed = module.find("embed") != std::string::npos;
    for (const auto& t : targets) {
        if (t.rfind("re:", 0) == 0) {
            if (detail::re_search(std::string_view(t).substr(3), module)) return true;
        } else if (t == module || (module.size() > t.size() &&
                                   module.compare(module.size() - t.size() - 1, std::string::npos, "." + t) == 0)) {
            return true;
        } else if (t == "Linear" && !embed) {
            return true;
        } else if (t == "Embedding" && embed) {
            return true;
        }
    }
    return false;
}

// An engine's concern (a name it drops, renames wrongly or rejects) is a failure only when the
// check targets that engine (CheckOptions::engine); otherwise a note.
int engine_index(const std::string& e) {
    for (int i = 0; i < 3; ++i)
        if (e == kEngineKeys[i]) return i;
    return -1;
}

// Weights of a real model stay far below this; a scale implying larger ones (an uninitialised
// scale: torch.empty's -3e27, 1e30) is a fault. The same bound as the NVFP4 global-scale check.
constexpr double kMaxPlausibleWeight = 1e4;

struct Checker : detail::Findings {
    // Stacked NVFP4 experts with one global scale per expert ([E]).
    bool per_expert_global(const Layer& L) const {
        return L.scheme == Scheme::nvfp4 && L.experts > 1 && !L.global_scale.empty() &&
               numel(F.tensors().at(L.global_scale).shape) == L.experts;
    }

    // Every element of the input scale: stacked experts carry one per expert ([E]); a zero one
    // is the missing expert scale of vLLM #45212 in stacked form.
    void input(const Layer& L) {
        if (L.input_scale.empty()) return;
        const RawTensor is = F.read(L.input_scale);
        for (std::uint64_t i = 0; i < is.numel(); ++i) {
            const float v = is.at(i);
            // Every producer stores amax / qmax, never negative (ModelOpt asserts it positive:
            // quant_utils.py get_scaling_factor).
            if (std::isfinite(v) && v != 0.0f && !std::signbit(v)) continue;
            fail(L.input_scale, "input scale",
                 is.numel() == 1
                     ? fmt::format("input_scale {} (must be finite, positive)", v)
                     : fmt::format("input_scale[{}] {} (must be finite, positive; expert {} of the stack)", i, v, i));
            break;
        }
    }

    // 1. Structure: the scales a scheme needs exist with the right shape and dtype.
    bool structure(const Layer& L) {
        const auto& w = F.tensors().at(L.weight);
        if (L.scale.empty()) {
            fail(L.weight, "structure", fmt::format("{} weight has no scale tensor", name(L.scheme)));
            return false;
        }
        // Stacked experts whose scale layout the flattened rows cannot follow (yet).
        if (L.scheme == Scheme::fp8_block && L.experts > 1 &&
            (L.rows / L.experts) % std::max<std::uint64_t>(L.block_rows, 1) != 0) {
            note(L.module, "not checked",
                 fmt::format(
                     "stacked experts of {} rows each in blocks of {} rows (a block per expert edge): not checked yet",
                     L.rows / L.experts, L.block_rows));
            return false;
        }
        if (per_expert_global(L)) {
            note(L.module, "not checked", "stacked NVFP4 experts with one global scale per expert: not checked yet");
            return false;
        }
        const auto& s = F.tensors().at(L.scale);
        const std::uint64_t sn = numel(s.shape);
        std::uint64_t want = 0;
        std::vector<std::string> dtypes;
        switch (L.scheme) {
            case Scheme::fp8_tensor:
                want = L.rows / std::max<std::uint64_t>(L.block_rows, 1);
                dtypes = {"F32", "BF16", "F16"};
                break;
            case Scheme::fp8_channel:
                want = L.rows;
                dtypes = {"F32", "BF16", "F16"};
                break;
            // F8_E8M0: transformers FineGrainedFP8 / DeepSeek-V3.1 with scale_fmt "ue8m0".
            case Scheme::fp8_block:
                want = ((L.rows + L.block_rows - 1) / L.block_rows) * ((L.cols + L.block_cols - 1) / L.block_cols);
                dtypes = {"F32", "BF16", "F8_E8M0"};
                break;
            case Scheme::nvfp4:
                want = L.rows * ((L.cols + L.block_cols - 1) / L.block_cols);  // 16, or ModelOpt's 32
                dtypes = {"F8_E4M3"};
                break;
            case Scheme::mxfp4:
            case Scheme::mxfp8:
                want = L.rows * ((L.cols + 31) / 32);
                dtypes = {"U8", "F8_E8M0"};
                break;
            case Scheme::w4a8:
            case Scheme::int4:
                want = L.rows * ((L.cols + L.block_cols - 1) / L.block_cols);
                dtypes = {"F32"};
                break;
            case Scheme::int8:  // ModelOpt: amax.float() / 127 (quant_utils.py get_scaling_factor)
                want = L.rows;
                dtypes = {"F32"};
                break;
            default: return true;
        }
        if (modelopt_float32_scales(L)) dtypes = {"F32"};
        bool ok = true;
        if (sn != want) {
            fail(L.scale, "structure",
                 fmt::format("shape {} holds {} scales; {} weight {} needs {}", shape_str(s.shape), sn, name(L.scheme),
                             shape_str(w.shape), want));
            ok = false;
        } else if (!shape_ok(F.producer(), L, w.shape, s.shape)) {
            // The right count in the wrong arrangement (a block grid stored transposed: DeepSeek
            // [2, 1] for a [128, 192] weight) is read in the wrong order by every engine.
            fail(L.scale, "scale shape",
                 fmt::format("shape {} for {} weight {}: the layout stores {}", shape_str(s.shape), name(L.scheme),
                             shape_str(w.shape), expected_shapes(F.producer(), L, w.shape)));
            ok = false;
        }
        if (std::find(dtypes.begin(), dtypes.end(), s.dtype) == dtypes.end()) {
            fail(L.scale, "structure",
                 fmt::format("dtype {} where {} stores {}", s.dtype, name(L.scheme), fmt::join(dtypes, " or ")));
            ok = false;
        }
        if (L.scheme == Scheme::nvfp4 && (L.global_scale.empty() || numel(F.tensors().at(L.global_scale).shape) != 1)) {
            fail(L.global_scale.empty() ? L.module : L.global_scale, "structure",
                 L.global_scale.empty() ? "NVFP4 weight without a one-element global scale (no weight_scale_2 / "
                                          "weight_global_scale tensor)"
                                        : "NVFP4 weight without a one-element global scale");
            ok = false;
        }
        if (L.scheme == Scheme::int4) ok = int4_groups_whole(L, w) && ok;
        if (L.scheme == Scheme::w4a8) {
            if (numel(F.tensors().at(L.global_scale).shape) != 1) {
                fail(L.global_scale, "structure",
                     "W4A8 weight_scale_2 (the FP8 stage's per-tensor scale) must have one element");
                ok = false;
            }
            if (w.shape.size() != 2 || w.shape[1] % L.block_cols != 0) {
                // ModelOpt refuses partial groups (quant_utils.py _validate_int4_block_size).
                fail(L.weight, "structure",
                     fmt::format("W4A8 weight {} is not a whole number of {}-column groups", shape_str(w.shape),
                                 L.block_cols));
                ok = false;
            }
        }
        return ok;
    }

    // ModelOpt stores every FP8 per-tensor and per-channel weight scale as float32
    // (quant_utils.py get_scaling_factor: `amax.float() / quantizer.maxbound`), in both exports,
    // FP8_PB_WO's block scales included (the same get_scaling_factor, handed to
    // qtensor/fp8_tensor.py FP8QTensor.quantize by to_quantized_weight); a bfloat16 one
    // (compressed-tensors' convention) was not written by it.
    bool modelopt_float32_scales(const Layer& L) const {
        return F.producer() == Producer::modelopt &&
               (L.scheme == Scheme::fp8_tensor || L.scheme == Scheme::fp8_channel || L.scheme == Scheme::fp8_block);
    }

    // The weight_scale of a layer whose scheme fp8kit has no rule for: what holds for every
    // producer's dequantisation scale, finite, positive (no amax gives a negative or zero one:
    // ModelOpt asserts it, quant_utils.py get_scaling_factor), and an E8M0 byte (U8) not 255, NaN
    // in the OCP MX format.
    void unchecked_scale_values(const Layer& L) {
        const std::string n = L.module + ".weight_scale";
        if (!F.has(n)) return;
        const RawTensor s = F.read(n);
        const bool e8m0 = s.dtype == "U8" || s.dtype == "F8_E8M0";
        std::uint64_t bad = 0;
        for (std::uint64_t i = 0; i < s.numel(); ++i) {
            const float v = e8m0 ? (s.bytes[i] == 255 ? NAN : 1.0f) : s.at(i);
            bad += !(std::isfinite(v) && v > 0.0f);
        }
        if (bad)
            fail(n, "scale finite",
                 fmt::format("{} of {} scales are NaN, infinite, zero or negative ({})", bad, s.numel(), s.dtype));
    }

    // ModelOpt refuses partial INT4 groups (quant_utils.py _validate_int4_block_size).
    bool int4_groups_whole(const Layer& L, const TensorRef& w) {
        if (w.shape.size() == 2 && L.block_cols && w.shape[1] % L.block_cols == 0) return true;
        fail(L.weight, "structure",
             fmt::format("INT4 weight {} is not a whole number of {}-column groups", shape_str(w.shape), L.block_cols));
        return false;
    }

    // 2. Scale values.
    void values(const Layer& L, const std::vector<char>& live, const RawTensor& s, const Scales& st) {
        const std::uint64_t n = s.numel();
        std::uint64_t bad = 0, zero_live = 0, sub = 0, sub_e4m3 = 0;
        std::string first;
        // MX dequantises by multiplying with 2^(code - 127): E8M0 code 0 (2^-127, a float32
        // subnormal, an all-zero block's scale) is a legal scale, and so is any subnormal there.
        const bool mx = L.scheme == Scheme::mxfp4 || L.scheme == Scheme::mxfp8;
        const double emax = detail::element_max(L.scheme);
        std::uint64_t neg = 0, big = 0;
        std::string first_neg, first_big;
        for (std::uint64_t i = 0; i < n; ++i) {
            const float v = st.block[i];
            if (!std::isfinite(v)) {
                if (!bad++) first = fmt::format("scale[{}] = {}", i, v);
                continue;
            }
            if (std::signbit(v) && v != 0) {
                if (!neg++) first_neg = fmt::format("scale[{}] = {}", i, v);
                continue;
            }
            if (L.scheme != Scheme::nvfp4 && double(v) * emax > kMaxPlausibleWeight) {
                if (!big++) first_big = fmt::format("scale[{}] = {:g}", i, v);
            }
            if (v != 0 && std::fabs(v) < 1.17549435e-38f) {
                if (!mx) ++sub;
            } else if (s.dtype == "F8_E4M3" && v != 0 && std::fabs(v) < 0.015625f)
                ++sub_e4m3;
        }
        if (bad)
            fail(L.scale, "scale finite",
                 fmt::format("{} of {} scales are NaN or infinite (first: {})", bad, n, first));
        if (neg)
            fail(L.scale, "scale sign",
                 fmt::format("{} of {} scales are negative (first: {}): every producer stores |scale|; "
                             "an uninitialised scale?",
                             neg, n, first_neg));
        if (big)
            fail(L.scale, "scale magnitude",
                 fmt::format("{} of {} scales imply weights beyond |{:g}| ({} * {:g}; first: {}): an "
                             "uninitialised scale?",
                             big, n, kMaxPlausibleWeight, "scale", emax, first_big));
        if (sub)
            fail(L.scale, "scale subnormal",
                 fmt::format("{} scales are float32 subnormals: 1/scale overflows to inf", sub));
        if (sub_e4m3)
            note(L.scale, "e4m3 subnormal block scale",
                 fmt::format("{} E4M3 block scales below 2^-6 (subnormal); ModelOpt clamps to >= 2^-9 and flushes "
                             "below (PR #1382)",
                             sub_e4m3));
        // A block holding nonzero codes needs a nonzero scale.
        for (std::uint64_t i = 0; i < n; ++i)
            if (live[i] && st.block[i] == 0.0f) ++zero_live;
        // All-zero blocks: ModelOpt writes block scale 1.0 (nvfp4_tensor.py), compressed-tensors
        // E4M3's eps 0.125 (helpers.py calculate_qparams step 5). A block of codes that are all
        // zero can also be tiny weights that underflowed, so a different scale is only a note;
        // --reference decides.
        if (L.scheme == Scheme::nvfp4 &&
            (F.producer() == Producer::modelopt || F.producer() == Producer::compressed_tensors)) {
            const float conv = F.producer() == Producer::modelopt ? 1.0f : 0.125f;
            std::uint64_t dead = 0, other = 0;
            for (std::uint64_t i = 0; i < n; ++i)
                if (!live[i]) {
                    ++dead;
                    other += st.block[i] != conv;
                }
            if (other)
                note(L.scale, "all-zero block scale",
                     fmt::format(
                         "{} of {} blocks with only zero codes have a scale other than {}'s {} for an all-zero block",
                         other, dead, name(F.producer()), conv));
        }
        if (zero_live)
            fail(L.scale, "zero scale",
                 fmt::format("{} blocks hold nonzero codes but have scale 0 (their weights read as 0, 1/scale is inf)",
                             zero_live));
        if (L.scheme == Scheme::nvfp4) global(L, st.global);
        if (L.scheme == Scheme::w4a8) w4a8_stage(L, st);
    }

    // W4A8's FP8 stage: weight_scale_2 = amax / 448 over the fused group (ModelOpt
    // get_weight_scaling_factor_2), so every group's amax 7 * weight_scale is at most
    // 448 * weight_scale_2; a group above it was scaled from another amax and saturates in FP8.
    void w4a8_stage(const Layer& L, const Scales& st) {
        if (!std::isfinite(st.global) || st.global <= 0.0f) {
            fail(L.global_scale, "scale finite",
                 fmt::format("weight_scale_2 {} (must be finite and positive)", st.global));
            return;
        }
        std::uint64_t over = 0;
        for (float v : st.block) over += std::isfinite(v) && double(v) * 7.0 > double(st.global) * 448.0 * (1 + 1e-6);
        if (over)
            fail(L.scale, "w4a8 scale above fp8 stage",
                 fmt::format(
                     "{} groups have 7 * weight_scale above 448 * weight_scale_2 = {} (their FP8 stage saturates)",
                     over, double(st.global) * 448.0));
    }

    // AWQ's pre_quant_scale multiplies the input (ModelOpt asserts it positive, quant_utils.py
    // get_prequant_scaling_factor).
    void pre_quant(const Layer& L) {
        if (L.pre_quant_scale.empty()) return;
        std::uint64_t bad = 0;
        for (float v : F.read(L.pre_quant_scale).to_floats()) bad += !(std::isfinite(v) && v > 0.0f);
        if (bad) fail(L.pre_quant_scale, "pre_quant_scale", fmt::format("{} entries not finite and positive", bad));
    }

    // NVFP4's global scale: finite, nonzero, and the weight amax it implies plausible. Inverting
    // the convention (ModelOpt amax/2688 vs compressed-tensors 2688/amax) moves it by ~amax^2.
    void global(const Layer& L, float g) {
        if (!std::isfinite(g) || g == 0.0f) {
            fail(L.global_scale, "scale finite", fmt::format("global scale {} (must be finite and nonzero)", g));
            return;
        }
        const bool recip = L.global_convention == Convention::reciprocal;
        const double implied = recip ? 2688.0 / g : 2688.0 * g;
        if (implied > 1e4 || implied < 1e-8)
            fail(L.global_scale, "global scale convention",
                 fmt::format(
                     "global scale {} under the {} convention implies weights up to |{}|: inverted ({} expected)?", g,
                     recip ? "reciprocal (448*6/amax)" : "dequant (amax/(6*448))", implied,
                     recip ? "compressed-tensors weight_global_scale" : "ModelOpt weight_scale_2"));
    }

    // Every expert of an MoE layer carries its input_scale when any of them does (vLLM #45212:
    // a missing one loads as 0, 1/0 = inf, NaN on the prompts routed there).
    void experts() {
        static const std::regex kExpert(R"(^(.*\.experts\.)(\d+)(\..*)$)");
        std::map<std::string, std::pair<int, std::vector<std::string>>> groups;  // key -> (with, without)
        for (const auto& L : R.layers) {
            std::smatch m;
            if (L.scheme == Scheme::none || !std::regex_match(L.module, m, kExpert)) continue;
            auto& g = groups[m[1].str() + "*" + m[3].str()];
            if (L.input_scale.empty())
                g.second.push_back(L.module);
            else
                ++g.first;
        }
        for (const auto& [k, g] : groups)
            if (g.first > 0 && !g.second.empty())
                for (const auto& m : g.second)
                    fail(m + ".input_scale", "missing expert input_scale",
                         fmt::format("{} of the experts {} have an input_scale, this one has none (vLLM loads 0 -> inf "
                                     "-> NaN, vLLM #45212)",
                                     g.first, k));
    }

    // 3. KV and attention scales: what vLLM, SGLang and TensorRT-LLM do with each name, and the
    // affine KV bias (kv_names.cpp, which cites each engine's loader).
    void kv() { detail::check_kv_names(F, R); }
};

// A layer of integer bytes (U8 / I8 weight) that no scheme was recognised for: its codes are not
// an unquantised weight, and are not checked.
bool unknown_codes(const Folder& F, const Layer& L) {
    const auto& d = F.tensors().at(L.weight).dtype;
    return d == "U8" || d == "I8";
}

Scales stored_scales(const Folder& F, const Layer& L, const RawTensor& s) {
    Scales st;
    st.block.resize(s.numel());
    for (std::uint64_t i = 0; i < st.block.size(); ++i) st.block[i] = s.at(i);
    if (!L.global_scale.empty()) st.global = F.read(L.global_scale).at(0);
    // MX scales stored as U8 are E8M0 codes: 2^(b - 127) (gpt-oss weights.py, compressed-tensors mxfp4);
    // code 255 is NaN (OCP MX v1.0, E8M0), not 2^128.
    if ((L.scheme == Scheme::mxfp4 || L.scheme == Scheme::mxfp8) && s.dtype == "U8")
        for (std::uint64_t i = 0; i < st.block.size(); ++i)
            st.block[i] =
                s.bytes[i] == 255 ? std::numeric_limits<float>::quiet_NaN() : std::ldexp(1.0f, int(s.bytes[i]) - 127);
    detail::set_grid(L, st);
    return st;
}

bool same(float a, float b) { return std::memcmp(&a, &b, 4) == 0 || (a == 0 && b == 0); }

// 4. Against the original: scale faults first, then codes under the checkpoint's own scales,
// under the producer's rule computed with arithmetic `ar`.
// One rule a producer may have written a layer under.
struct Variant {
    detail::Arithmetic ar = detail::Arithmetic::cpu;
    float shared_amax = -1.0f;  // the fused group's amax, or -1: the layer's own
    detail::BlockRule rule = detail::BlockRule::amax_div;
    std::string label;        // appended to the variant name
    bool e4m3_input = false;  // the rule applied to the original cast to E4M3 (transformers' loader)
    // Per channel: the original of the module whose row amaxes this layer's are maxed with, row
    // by row (ModelOpt's HF export of an expert's gate/up pair), or empty.
    std::shared_ptr<const std::vector<float>> row_partner = nullptr;
    // With row_partner: the amaxes are the element-wise max of the two layers' own, block by
    // block (INT8 rows, INT4 groups), the partner's weight having this layer's shape.
    bool elementwise_partner = false;
};

Comparison compare_under(const Folder& F, const Layer& L, const RawTensor& w, const RawTensor& s, const Scales& st,
                         const std::vector<float>& x, const std::string& weight_dtype, const Variant& v) {
    const float shared_amax = v.shared_amax;
    const detail::Arithmetic ar = v.ar;
    Comparison c{L.module, "bit-exact", 0, 0, 0, 0, 0, 0, {}, {}};
    c.elements = L.rows * L.cols;
    c.variant = detail::variant_name(F.producer(), ar);
    if (!v.label.empty()) c.variant.insert(c.variant.size() - 1, ", " + v.label);
    // gpt-oss's rules are one kernel's float32 arithmetic, the same on the CPU and the GPU.
    if (F.producer() == Producer::gpt_oss && !v.label.empty()) c.variant = "gpt-oss (" + v.label + ")";
    // What the producer quantised: the original, or (transformers' loader) its E4M3 cast.
    std::vector<float> cast;
    if (v.e4m3_input) cast = detail::transformers_loaded_weight(x);
    const std::vector<float>& xq = v.e4m3_input ? cast : x;
    // Row-shared amax: the scales of the rows widened by the partner's (max over both rows).
    std::vector<float> widened;
    Layer Lw = L;
    if (v.row_partner && v.row_partner->size() == xq.size() && v.elementwise_partner) {
        // max over a block of max(|x|, |p|) = max(amax_x, amax_p) of that block.
        widened.resize(xq.size());
        for (std::size_t i = 0; i < xq.size(); ++i)
            widened[i] = std::max(std::fabs(xq[i]), std::fabs((*v.row_partner)[i]));
    } else if (v.row_partner && v.row_partner->size() == xq.size()) {
        widened.resize(2 * xq.size());
        for (std::uint64_t r = 0; r < L.rows; ++r) {
            std::copy_n(&xq[r * L.cols], L.cols, &widened[2 * r * L.cols]);
            std::copy_n(&(*v.row_partner)[r * L.cols], L.cols, &widened[(2 * r + 1) * L.cols]);
        }
        Lw.cols = Lw.block_cols = 2 * L.cols;
    }
    const auto ex = detail::expected_scales(F.producer(), Lw, widened.empty() ? xq : widened, s.dtype, weight_dtype,
                                            shared_amax, ar, v.rule);
    // Scales.
    bool inverted = false, layout = false;
    if ((L.scheme == Scheme::nvfp4 || L.scheme == Scheme::w4a8) && !same(ex.global, st.global)) {
        ++c.scale_mismatches;  // W4A8's weight_scale_2 (the FP8 stage) is compared, not used by the INT4 codes
        inverted = L.scheme == Scheme::nvfp4 && std::fabs(double(ex.global) * st.global - 1.0) < 1e-3;
        if (!inverted) c.verdict = "different amax";
    }
    std::uint64_t sm = 0;
    for (std::size_t i = 0; i < std::min(ex.block.size(), st.block.size()); ++i) sm += !same(ex.block[i], st.block[i]);
    if (sm && ex.grid_rows > 1 && ex.grid_cols > 1 && ex.block.size() == st.block.size()) {
        layout = true;  // the grid transposed?
        for (std::uint64_t r = 0; r < ex.grid_rows && layout; ++r)
            for (std::uint64_t k = 0; k < ex.grid_cols; ++k)
                if (!same(ex.block[r * ex.grid_cols + k], st.block[k * ex.grid_rows + r])) {
                    layout = false;
                    break;
                }
    }
    if (sm) {
        if (F.tp() > 1)  // split block scales: which rank's file holds the differing ones
            for (std::size_t i = 0; i < std::min(ex.block.size(), st.block.size()); ++i)
                if (!same(ex.block[i], st.block[i]))
                    if (const auto r = F.rank_of(L.scale, i)) c.ranks.push_back(*r);
        c.scale_mismatches += sm;
        if (!inverted && c.verdict == "bit-exact") c.verdict = layout ? "block layout" : "different amax";
    }
    if (inverted) c.verdict = "scale convention inverted";
    // Codes under the stored scales (with the expected global scale when only that is inverted).
    Scales use = st;
    if (inverted) use.global = ex.global;
    // A TensorRT-LLM checkpoint holds the very scale tensor ModelOpt divided by, so its shape
    // tells a 0-dim divisor from a [1] one; an HF export squeezes it ([]) whatever it divided by.
    const bool scalar_scale = !F.trtllm || s.shape.empty();
    const auto want = detail::expected_codes(F.producer(), L, xq, use, s.dtype, weight_dtype, ar, v.rule, scalar_scale);
    const auto got = codes_of(L, w);
    const std::uint8_t mag = w.dtype == "U8" ? 0x7 : 0x7F, sign = w.dtype == "U8" ? 0x8 : 0x80;
    // Per row, then summed in row order: the same sums for any thread count.
    const std::int64_t rows = static_cast<std::int64_t>(L.rows);
    std::vector<std::uint64_t> miss_r(L.rows), sat_r(L.rows), step_r(L.rows);
    std::vector<double> sig_r(L.rows), err_r(L.rows), rel_r(L.rows);
#pragma omp parallel for schedule(static) if (want.size() > (1u << 16))
    for (std::int64_t r = 0; r < rows; ++r) {
        for (std::uint64_t k = 0; k < L.cols; ++k) {
            const std::size_t i = static_cast<std::size_t>(r) * L.cols + k;
            const double xi = x[i];
            // Error of the checkpoint as stored, against the original.
            const double d =
                double(detail::decode_element(L.scheme, got[i])) * detail::dequant_factor(F.producer(), L, st, r, k);
            sig_r[r] += xi * xi;
            err_r[r] += (d - xi) * (d - xi);
            if (xi != 0) rel_r[r] = std::max(rel_r[r], std::fabs(d - xi) / std::fabs(xi));
            if (want[i] == got[i]) continue;
            ++miss_r[r];
            const float q = std::fabs(xq[i] / detail::dequant_factor(F.producer(), L, use, r, k));
            if (q > detail::element_max(L.scheme)) ++sat_r[r];
            if (detail::integer_codes(L.scheme)
                    ? std::fabs(detail::decode_element(L.scheme, want[i]) - detail::decode_element(L.scheme, got[i])) ==
                          1.0f
                    : (want[i] & sign) == (got[i] & sign) && std::abs(int(want[i] & mag) - int(got[i] & mag)) == 1)
                ++step_r[r];
        }
    }
    std::uint64_t miss = 0, sat = 0, step = 0;
    double sig = 0, err = 0, rel = 0;
    for (std::uint64_t r = 0; r < L.rows; ++r) {
        miss += miss_r[r], sat += sat_r[r], step += step_r[r];
        sig += sig_r[r], err += err_r[r], rel = std::max(rel, rel_r[r]);
    }
    c.code_mismatches = miss;
    if (miss && F.tp() > 1)  // which rank's file holds the differing codes (two FP4 codes a byte)
        for (std::size_t i = 0; i < want.size(); ++i)
            if (want[i] != got[i])
                if (const auto r = F.rank_of(L.weight, w.dtype == "U8" ? i / 2 : i)) c.ranks.push_back(*r);
    std::sort(c.ranks.begin(), c.ranks.end());
    c.ranks.erase(std::unique(c.ranks.begin(), c.ranks.end()), c.ranks.end());
    if (miss && c.verdict == "bit-exact") {
        if (w.dtype == "U8" && codes_of(L, w, emu::NibbleOrder::high_first) == want)
            c.verdict = "nibble order";
        else if (sat == miss)
            c.verdict = "saturation";
        else if (step == miss)
            c.verdict = "rounding";
        else
            c.verdict = "codes differ";
    }
    c.sqnr_db = err == 0 ? INFINITY : 10 * std::log10(sig / err);
    c.max_rel_error = rel;
    return c;
}

// The producer's rules in order, the CPU arithmetic first (the libraries' reference arithmetic);
// the first that is bit-exact is the verdict, and where none is, the first rule's verdict stands
// (or, where its scales differ, that of the first rule giving every scale: compare):
// a 1-ulp scale from a GPU or from another of the producer's own rules is not "different amax",
// and a scale that no rule gives is still a fault. Rules per producer:
//  - ModelOpt: its fused-group amax (detail::fused_amax_group), CPU then CUDA arithmetic;
//  - compressed-tensors: each layer's own amax (compressed-tensors' calculate_qparams), then for
//    NVFP4 the fused group's (llm-compressor update_fused_layer_weight_global_scales), each on
//    CPU then CUDA;
//  - gpt-oss MXFP4: triton_kernels' downcast_to_mxfp (gpt_oss/triton/moe.py quantize_mx4),
//    ties to even, then its rounding before triton #8110 (ties away), then the OCP MX floor rule;
//  - block FP8 (quant_method "fp8"): the rules its config names (detail::block_rules):
//    transformers' FineGrainedFP8 (float or ue8m0 scales) on the E4M3-cast weight its loader
//    quantises, then on the weight itself; DeepSeek's amax / 448 or its ue8m0 scale.
Comparison compare(const Folder& F, const Layer& L, const RawTensor& w, const RawTensor& s, const Scales& st,
                   const std::vector<float>& x, const std::string& weight_dtype, const std::vector<Variant>& vs) {
    Comparison first;
    std::optional<Comparison> scales_match;  // the first rule that gives every stored scale
    std::uint64_t fewest = ~std::uint64_t{0};
    for (std::size_t i = 0; i < vs.size(); ++i) {
        Comparison c = compare_under(F, L, w, s, st, x, weight_dtype, vs[i]);
        if (c.verdict == "bit-exact") return c;
        fewest = std::min(fewest, c.scale_mismatches);
        if (!scales_match && c.scale_mismatches == 0 && i > 0) scales_match = c;
        if (i == 0) first = std::move(c);
    }
    // A rule after the first that gives every scale the checkpoint stores (an expert's shared
    // gate/up amax) judges its codes: a flipped code there is "rounding", not "different amax".
    Comparison out = first.scale_mismatches > 0 && scales_match ? *scales_match : first;
    out.fewest_scale_mismatches = vs.empty() ? out.scale_mismatches : fewest;
    return out;
}

// llm-compressor 0.14 saves Mixtral's experts under the names of its linearised experts
// (llmcompressor/modeling/moe/linear_experts.py ExpertMLPWithGate: gate_proj, up_proj, down_proj),
// while transformers saves the original as w1, w3, w2 (data/checkpoints/llmc_mixtral_nvfp4 against
// llmc_mixtral_original). The reference's tensor for such a module, or "" where there is none.
std::string linearised_expert_name(const Folder& ref, const std::string& module) {
    static const std::regex kLinearised(R"(^(.*\.experts\.[0-9]+\.)(gate_proj|up_proj|down_proj)$)");
    std::smatch m;
    if (!std::regex_match(module, m, kLinearised)) return "";
    const std::string p = m[2].str();
    const std::string n = m[1].str() + (p == "gate_proj" ? "w1" : p == "up_proj" ? "w3" : "w2") + ".weight";
    return ref.has(n) ? n : "";
}

// The amax of the fused group L shares its scale with (the group's largest), or -1 where L
// keeps its own amax or a member is missing from the reference.
float shared_amax(const Folder& F, const Folder& ref, const Layer& L) {
    if (F.trtllm) {  // TensorRT-LLM names: the group in the original's names (Layer::amax_group)
        if (L.amax_group.empty()) return -1.0f;
        float a = 0;
        for (const auto& g : L.amax_group) {
            if (!ref.has(g + ".weight")) return -1.0f;
            for (float v : ref.read(g + ".weight").to_floats()) a = std::max(a, std::fabs(v));
        }
        return a;
    }
    const auto group = detail::fused_amax_group(F.producer(), L.module, L.scheme);
    if (group.empty()) return -1.0f;
    float a = 0;
    for (const auto& g : group) {
        std::string n = g + ".weight";
        if (!ref.has(n) && !linearised_expert_name(ref, g).empty()) n = linearised_expert_name(ref, g);
        const std::string sc = g + (F.producer() == Producer::compressed_tensors              ? ".weight_global_scale"
                                    : (L.scheme == Scheme::nvfp4 || L.scheme == Scheme::w4a8) ? ".weight_scale_2"
                                                                                              : ".weight_scale");
        if (!ref.has(n) || !F.has(sc)) continue;
        if (L.scheme != Scheme::nvfp4 && numel(F.tensors().at(sc).shape) != 1) return -1.0f;
        for (float v : ref.read(n).to_floats()) a = std::max(a, std::fabs(v));
    }
    return a;
}

// The original weight of an expert's gate (up) projection's partner, up (gate): ModelOpt's HF
// export takes the element-wise max of the pair's weight amaxes (layer_utils.py
// sync_moe_gate_up_amax, _GATE_UP_PAIRS gate_proj/up_proj and w1/w3), per row or per group for
// INT8 and INT4. nullptr: not an expert's gate or up projection, or no original of the partner.
std::shared_ptr<const std::vector<float>> expert_gate_up_partner(const Folder& ref, const std::string& module) {
    static const std::regex kPair(R"(^(.*\.experts\.\d+\.)(gate_proj|up_proj|w1|w3)$)");
    static const std::map<std::string, std::string> kOther = {
        {"gate_proj", "up_proj"}, {"up_proj", "gate_proj"}, {"w1", "w3"}, {"w3", "w1"}};
    std::smatch m;
    if (!std::regex_match(module, m, kPair)) return nullptr;
    const std::string g = m[1].str() + kOther.at(m[2].str());
    std::string n = g + ".weight";
    if (!ref.has(n) && !linearised_expert_name(ref, g).empty()) n = linearised_expert_name(ref, g);
    if (!ref.has(n)) return nullptr;
    return std::make_shared<const std::vector<float>>(ref.read(n).to_floats());
}

std::vector<Variant> variants(const Folder& F, const Folder& ref, const Layer& L) {
    using detail::Arithmetic;
    const float shared = shared_amax(F, ref, L);
    std::vector<Variant> v;
    if (F.producer() == Producer::deepseek && L.scheme == Scheme::fp8_block) {
        for (const auto& c : detail::block_rules(F.transformers_fp8, F.scale_fmt)) {
            std::string label = c.rule == detail::BlockRule::amax_div ? "" : detail::name(c.rule);
            if (c.e4m3_input) label += ", weight cast to E4M3 on load";
            v.push_back({Arithmetic::cpu, -1.0f, c.rule, label, c.e4m3_input});
        }
        return v;
    }
    if (F.producer() == Producer::gpt_oss && L.scheme == Scheme::mxfp4) {
        using detail::BlockRule;
        for (const BlockRule r : {BlockRule::triton_round_up, BlockRule::triton_round_up_ties_away})
            v.push_back({Arithmetic::cpu, -1.0f, r, detail::name(r), false, {}});
        v.push_back({Arithmetic::cpu, -1.0f, BlockRule::amax_div, "OCP MX floor", false, {}});
        return v;
    }
    if (F.producer() == Producer::compressed_tensors) {
        v = {{Arithmetic::cpu, -1.0f, {}, ""}, {Arithmetic::cuda, -1.0f, {}, ""}};
        if (shared >= 0) {
            v.push_back({Arithmetic::cpu, shared, {}, "llm-compressor fused global scale"});
            v.push_back({Arithmetic::cuda, shared, {}, "llm-compressor fused global scale"});
        }
        return v;
    }
    v = {{Arithmetic::cpu, shared, {}, ""}, {Arithmetic::cuda, shared, {}, ""}};
    // ModelOpt's HF export syncs an expert's gate and up weight amaxes element-wise before
    // quantising (layer_utils.py sync_moe_gate_up_amax: torch.max(gate_amax, up_amax), from
    // unified_export_hf.py; per channel that is a max per row, not one number).
    if (F.producer() == Producer::modelopt && L.scheme == Scheme::fp8_channel && !F.trtllm) {
        for (const auto& g : detail::modelopt_amax_group(L.module, L.scheme)) {
            if (g == L.module) continue;
            std::string n = g + ".weight";
            if (!ref.has(n) && !linearised_expert_name(ref, g).empty()) n = linearised_expert_name(ref, g);
            if (!ref.has(n)) continue;
            auto partner = std::make_shared<const std::vector<float>>(ref.read(n).to_floats());
            for (const auto a : {Arithmetic::cpu, Arithmetic::cuda})
                v.push_back({a, -1.0f, {}, "expert gate/up amax shared per row", false, partner});
        }
    }
    if (F.producer() == Producer::modelopt && (L.scheme == Scheme::int8 || L.scheme == Scheme::int4) && !F.trtllm)
        if (auto partner = expert_gate_up_partner(ref, L.module))
            for (const auto a : {Arithmetic::cpu, Arithmetic::cuda})
                v.push_back({a, -1.0f, {}, "expert gate/up amax shared per block", false, partner, true});
    return v;
}

// The original of layer L in the reference: <module>.weight; a stacked weight stored under the
// module's own name (gpt-oss: `<p>.blocks` quantises `<p>`), possibly as [experts, cols, rows]
// (transformers' GptOssExperts gate_up_proj / down_proj, the transpose of the `_blocks` rows); or
// per expert (detail::stacked_reference). nullopt: none found.
// A TensorRT-LLM layer's original: its sources' weights (Layer::sources), rows concatenated in
// order, as ModelOpt's export concatenated them; nullopt (used: the first missing name) where
// one is missing or their dtypes or column counts differ.
std::optional<RawTensor> concatenated_original(const Folder& ref, const Layer& L, std::string& used) {
    RawTensor out;
    std::uint64_t rows = 0;
    for (const auto& s : L.sources) {
        used = s + ".weight";
        if (!ref.has(used)) return std::nullopt;
        RawTensor t = ref.read(used);
        if (t.shape.size() != 2 || (rows && (t.dtype != out.dtype || t.shape[1] != out.shape[1]))) return std::nullopt;
        if (!rows) out.dtype = t.dtype, out.shape = {0, t.shape[1]};
        out.bytes.insert(out.bytes.end(), t.bytes.begin(), t.bytes.end());
        rows += t.shape[0];
        out.shape[0] = rows;
    }
    used = fmt::format("{} (from {})", L.sources.size() == 1 ? L.sources[0] + ".weight" : L.module,
                       fmt::join(L.sources, ", "));
    return out;
}

std::optional<RawTensor> original_of(const Folder& ref, const Layer& L, std::string& used) {
    if (!L.sources.empty()) return concatenated_original(ref, L, used);
    for (const std::string& n : {L.module + ".weight", L.module}) {
        if (!ref.has(n)) continue;
        used = n;
        RawTensor o = ref.read(n);
        const std::uint64_t E = std::max<std::uint64_t>(L.experts, 1), r = L.rows / E, c = L.cols;
        if (L.experts && o.shape.size() == 3 && o.shape[0] == E && o.shape[1] == c && o.shape[2] == r && r != c) {
            RawTensor t = o;  // per expert [c, r] -> [r, c]
            const std::size_t es = o.bytes.size() / o.numel();
            for (std::uint64_t e = 0; e < E; ++e)
                for (std::uint64_t i = 0; i < c; ++i)
                    for (std::uint64_t j = 0; j < r; ++j)
                        std::memcpy(&t.bytes[((e * r + j) * c + i) * es], &o.bytes[((e * c + i) * r + j) * es], es);
            t.shape = {E, r, c};
            return t;
        }
        return o;
    }
    if (const std::string n = linearised_expert_name(ref, L.module); !n.empty()) {
        used = n;
        return ref.read(n);
    }
    if (L.experts > 0) {
        auto s = detail::stacked_reference(ref, L);
        if (s) used = L.module + " (per expert)";
        return s;
    }
    return std::nullopt;
}

// A ModelOpt NVFP4 layer whose codes are bit-exact under its stored scales while the scales are
// not the max rule's: one of the static presets' rules (detail::modelopt_searched_scales). One
// that replays turns the comparison bit-exact; one that cannot is a note, not a comparison.
// The weight amax of each member of L's fused group (ModelOpt preprocess_linear_fusion takes
// their largest), or of L alone where it has none or a member is missing from the reference.
std::vector<float> member_amaxes(const Folder& F, const Folder& ref, const Layer& L, const std::vector<float>& x) {
    auto amax_of = [](const std::vector<float>& v) {
        float a = 0;
        for (float e : v) a = std::max(a, std::fabs(e));
        return a;
    };
    std::vector<float> out;
    for (const auto& g : detail::fused_amax_group(F.producer(), L.module, L.scheme)) {
        std::string n = g + ".weight";
        if (!ref.has(n) && !linearised_expert_name(ref, g).empty()) n = linearised_expert_name(ref, g);
        if (!ref.has(n)) return {amax_of(x)};
        out.push_back(amax_of(ref.read(n).to_floats()));
    }
    if (out.empty()) out.push_back(amax_of(x));
    return out;
}

void modelopt_searched(const Folder& F, const Folder& ref, const Layer& L, const std::vector<float>& x,
                       const std::string& weight_dtype, const Scales& st, Report& R, Checker& C) {
    Comparison& c = R.comparisons.back();
    if (F.producer() != Producer::modelopt || F.trtllm || L.scheme != Scheme::nvfp4 || c.verdict != "different amax")
        return;
    const auto s = detail::modelopt_searched_scales(L, x, member_amaxes(F, ref, L, x), weight_dtype, st);
    if (s.rule.empty()) return;
    if (c.code_mismatches) {  // the scales are the rule's; the codes are not theirs
        if (s.replayed) c.scale_mismatches = 0;
        c.verdict = "codes differ";
        c.variant = "modelopt (" + s.rule + ")";
        return;
    }
    if (s.replayed) {
        c.verdict = "bit-exact";
        c.scale_mismatches = 0;
        c.variant = "modelopt (" + s.rule + ")";
        return;
    }
    C.note(L.module, "searched scales",
           fmt::format("codes bit-exact under the stored block scales and weight_scale_2 the max rule's, but {} of {} "
                       "block scales are not amax / 6: {}, chosen by ModelOpt's search (model_calib.py mse_calibrate / "
                       "local_hessian_calibrate), whose loss the files do not hold; the block scales are not replayed",
                       s.blocks_off_max_rule, st.block.size(), s.rule));
    R.comparisons.pop_back();
}

// Stacked NVFP4 experts with one global scale per expert (ModelOpt's TensorRT-LLM export:
// layer_utils.py _build_stacked_linear stacks each expert's weights_scaling_factor_2 into [E]):
// each expert is checked as a layer of its own, "<module>[expert e]", its rows, block scales and
// global scale sliced from the stacks and its original from its share of Layer::sources.
void stacked_nvfp4(const Folder& F, const Folder* ref, const Layer& L, Checker& C, Report& R) {
    const std::uint64_t E = L.experts, r = L.rows / E;
    const auto& sref = F.tensors().at(L.scale);
    const auto& wref = F.tensors().at(L.weight);
    if (sref.dtype != "F8_E4M3" || sref.shape.size() != 3 || sref.shape[0] != E || sref.shape[1] != r ||
        sref.shape[2] != (L.cols + 15) / 16 || wref.shape.size() != 3) {
        C.fail(L.scale, "structure",
               fmt::format("{} {} for stacked NVFP4 experts {}: [{}, {}, {}] F8_E4M3 expected", sref.dtype,
                           shape_str(sref.shape), shape_str(wref.shape), E, r, (L.cols + 15) / 16));
        return;
    }
    const RawTensor w = F.read(L.weight), s = F.read(L.scale), g = F.read(L.global_scale);
    const std::size_t wb = w.bytes.size() / E, sb = s.bytes.size() / E, per = L.sources.size() / E;
    C.input(L);
    for (std::uint64_t e = 0; e < E; ++e) {
        Layer Le = L;
        Le.module = fmt::format("{}[expert {}]", L.module, e);
        Le.experts = 0;
        Le.rows = r;
        Le.sources.assign(L.sources.begin() + e * per, L.sources.begin() + (e + 1) * per);
        RawTensor we, se;
        we.dtype = w.dtype, we.shape = {r, wref.shape[2]};
        we.bytes.assign(w.bytes.begin() + e * wb, w.bytes.begin() + (e + 1) * wb);
        se.dtype = s.dtype, se.shape = {r, sref.shape[2]};
        se.bytes.assign(s.bytes.begin() + e * sb, s.bytes.begin() + (e + 1) * sb);
        Scales st;
        st.block = se.to_floats();
        st.global = g.at(e);
        detail::set_grid(Le, st);
        LiveBlocks lb(Le, st, /*fp4=*/true, se.numel());
        const auto codes = codes_of(Le, we);
        lb.add(0, codes.data(), codes.size());
        C.values(Le, lb.live, se, st);
        if (!ref) continue;
        std::string used;
        const auto o = concatenated_original(*ref, Le, used);
        if (!o || o->numel() != Le.rows * Le.cols) {
            C.fail(used, "reference",
                   fmt::format("{}: no original of {} rows x {} for {}", ref->dir(), Le.rows, Le.cols, Le.module));
            continue;
        }
        R.comparisons.push_back(compare(F, Le, we, se, st, o->to_floats(), o->dtype, variants(F, *ref, Le)));
    }
}

// ModelOpt's integer weights (INT4 W4A16_AWQ / blockwise, INT8 per channel) are
// round(w / (amax / 7 or 127)) clamped (quant_utils.py get_scaling_factor, to_quantized_weight),
// so the element at the amax of every block with a nonzero scale becomes +-7 (+-127), or -8 (-128)
// where a clipped amax clamps it. Without the smoothed weights (AWQ, SmoothQuant) this is what a
// changed code can still be caught by. W4A8's group scales pass through an FP8 stage first, so
// its top code is not always 7: not checked.
void modelopt_int_max_code(const Folder& F, const Layer& L, const LiveBlocks& lb, const Scales& st, Checker& C) {
    // MoE experts' gate/up share an element-wise max amax (layer_utils.py sync_moe_gate_up_amax):
    // a block's top element may be in the other projection.
    const bool synced = L.experts || L.module.find(".experts.") != std::string::npos;
    if (F.producer() != Producer::modelopt || F.trtllm || synced || !lb.full_at) return;
    std::uint64_t short_of_top = 0, first = 0;
    for (std::size_t b = 0; b < lb.live.size() && b < st.block.size(); ++b)
        if (lb.live[b] && !lb.full[b] && st.block[b] > 0.0f && !short_of_top++) first = b;
    if (short_of_top)
        C.fail(L.weight, "max code",
               fmt::format("{} blocks with nonzero codes hold no +-{} (first: block {}, row {}): ModelOpt's max rule "
                           "puts one in each (quant_utils.py get_scaling_factor, to_quantized_weight); a code was "
                           "changed",
                           short_of_top, lb.full_at, first, first / std::max<std::uint64_t>(st.grid_cols, 1)));
}

// The SQNR (dB) of the dequantised checkpoint y against the reference x after one least-squares
// factor per input column (y ~ x diag(f)): what is left once a smoothing of the inputs is undone.
double column_fitted_sqnr_db(const std::vector<float>& y, const std::vector<float>& x, std::uint64_t rows,
                             std::uint64_t cols) {
    std::vector<double> xy(cols, 0.0), xx(cols, 0.0);
    for (std::uint64_t r = 0; r < rows; ++r)
        for (std::uint64_t c = 0; c < cols; ++c) {
            const double a = x[r * cols + c], b = y[r * cols + c];
            xy[c] += a * b, xx[c] += a * a;
        }
    double signal = 0, noise = 0;
    for (std::uint64_t r = 0; r < rows; ++r)
        for (std::uint64_t c = 0; c < cols; ++c) {
            const double f = xx[c] > 0 ? xy[c] / xx[c] : 0.0, b = y[r * cols + c], e = b - f * x[r * cols + c];
            signal += b * b, noise += e * e;
        }
    if (noise == 0) return signal > 0 ? 300.0 : 0.0;
    return signal > 0 ? 10.0 * std::log10(signal / noise) : 0.0;
}

// ModelOpt AWQ and SmoothQuant quantise smoothed weights (model_calib.py awq_lite,
// smoothquant, apply_pre_quant_scale_and_smooth): W diag(f), one factor per input column, which
// the files hold only rounded to bfloat16 or folded into the layernorm. Against the unsmoothed
// original nearly every scale then differs, and that comparison says nothing about the checkpoint:
// it is not a finding when more than half the scales differ and the checkpoint is the reference
// up to one factor per column within kSmoothedFitDb (a wrong reference leaves ~0 dB; ModelOpt's
// INT4 AWQ fixtures ~18 dB, INT8 SmoothQuant ~40). The SQNR after the fit, or nullopt.
constexpr double kSmoothedFitDb = 10.0;
std::optional<double> smoothing_explains(const Folder& F, const Layer& L, const Comparison& c, std::size_t scales,
                                         const std::vector<float>& x) {
    const bool smoothed = F.producer() == Producer::modelopt &&
                          (F.quant_algo.find("AWQ") != std::string::npos ||
                           (F.quant_algo.find("_SQ_") != std::string::npos && !L.pre_quant_scale.empty()));
    if (!smoothed || c.verdict == "bit-exact" || c.fewest_scale_mismatches * 2 <= scales) return std::nullopt;
    const double db = column_fitted_sqnr_db(dequantize(F, L), x, L.rows, L.cols);
    if (!(db >= kSmoothedFitDb)) return std::nullopt;
    return db;
}

}  // namespace

std::vector<float> dequantize(const Folder& F, const Layer& L) {
    if (L.scale.empty() || L.scheme == Scheme::none)
        throw CheckpointError(fmt::format("{}: no quantised weight with a scale", L.module));
    const RawTensor s = F.read(L.scale);
    Scales st = stored_scales(F, L, s);
    if (st.block.size() < st.grid_rows * st.grid_cols)
        throw CheckpointError(
            fmt::format("{}: {} scales for a grid of {} x {}", L.scale, st.block.size(), st.grid_rows, st.grid_cols));
    const RawTensor w = F.read(L.weight);
    const auto codes = codes_of(L, w);
    if (codes.size() < L.rows * L.cols)
        throw CheckpointError(fmt::format("{}: {} codes for {} x {}", L.weight, codes.size(), L.rows, L.cols));
    std::vector<float> y(L.rows * L.cols);
    for (std::uint64_t r = 0; r < L.rows; ++r)
        for (std::uint64_t c = 0; c < L.cols; ++c)
            y[r * L.cols + c] = detail::decode_element(L.scheme, codes[r * L.cols + c]) *
                                detail::dequant_factor(F.producer(), L, st, r, c);
    return y;
}

bool Report::failed() const {
    for (const auto& f : findings)
        if (f.failed) return true;
    for (const auto& c : comparisons)
        if (c.verdict != "bit-exact") return true;
    return false;
}

Report check(const std::string& dir, const std::optional<std::string>& reference) {
    return check(dir, CheckOptions{reference, ""});
}

std::string summary(const Report& r) {
    if (!r.failed()) return "OK";
    std::map<std::string, std::size_t> by;
    std::size_t n = 0;
    for (const auto& f : r.findings)
        if (f.failed) ++by[f.check], ++n;
    for (const auto& c : r.comparisons)
        if (c.verdict != "bit-exact") ++by[c.verdict], ++n;
    std::vector<std::string> parts;
    for (const auto& [k, v] : by) parts.push_back(fmt::format("{} {}", v, k));
    return fmt::format("FAILED ({} failed: {})", n, fmt::join(parts, ", "));
}

Report check(const std::string& dir, const CheckOptions& opt) {
    const std::optional<std::string>& reference = opt.reference;
    if (!opt.engine.empty() && opt.engine != "all" && engine_index(opt.engine) < 0)
        throw CheckpointError(
            fmt::format("engine '{}' is not one fp8kit knows (vllm, sglang, trtllm, all)", opt.engine));
    // The layer buffers kept for reuse are given back when the check ends, however it ends (a
    // long-lived process, e.g. Python, does not keep four layers' worth of memory).
    struct Release {
        ~Release() { release_tensor_buffers(); }
    } release;
    Folder F(dir);
    std::optional<Folder> ref;
    if (reference) {
        std::error_code ec;
        if (!std::filesystem::is_directory(*reference, ec))
            throw CheckpointError(fmt::format("--reference {}: not a folder{}", io::quoted(*reference),
                                              ec ? ": " + ec.message() : std::string()));
        ref.emplace(*reference, /*unquantized=*/true);
    }
    Report R;
    R.dir = dir;
    R.producer = F.producer();
    R.engine = opt.engine;
    R.layers = F.layers();
    Checker C{F, R};
    if (F.trtllm)
        C.note(dir, "layout",
               fmt::format("a TensorRT-LLM checkpoint (config.json architecture {}, {}; "
                           "modelopt/torch/export/model_config_export.py export_tensorrt_llm_checkpoint): "
                           "TensorRT-LLM's names, compared with the Hugging Face original under the names "
                           "ModelOpt exported them from",
                           F.architecture,
                           F.tp() == 1 ? std::string("rank0.safetensors")
                                       : fmt::format("tp_size {}: rank0.safetensors to rank{}.safetensors, each split "
                                                     "tensor put back together along the dimension ModelOpt split "
                                                     "it, postprocess.py _split_model_config_for_tp",
                                                     F.tp(), F.tp() - 1)));
    // ModelOpt gives every rank the same copy of what it does not split (per-tensor, global,
    // activation and KV scales, norms, the router: _split_model_config_for_tp rule "S").
    for (const auto& [n, r] : F.rank_differences())
        C.fail(n, "ranks",
               fmt::format("rank{}.safetensors holds another value than rank0.safetensors; ModelOpt writes this "
                           "tensor whole and the same to every rank (postprocess.py _split_model_config_for_tp)",
                           r));
    if (F.layout_from_names)
        C.note(dir, "layout",
               "no quantisation config: MXFP4 read from the tensor names (<name>.blocks / <name>.scales: gpt-oss "
               "original/, "
               "gpt_oss/torch/weights.py)");
    for (const auto& L : F.layers()) {
        if (L.scheme == Scheme::none) {
            if (unknown_codes(F, L)) {
                C.note(L.weight, "not checked",
                       fmt::format("not checked: {} codes under a scheme fp8kit has no rule for (quant_algo '{}')",
                                   F.tensors().at(L.weight).dtype, F.quant_algo));
                C.unchecked_scale_values(L);
            } else if (!L.excluded && L.module.find("embed") == std::string::npos)
                C.note(L.weight, "unquantized", "not quantised and not in the exclude list");
            continue;
        }
        if (!F.targets.empty() && !targeted(F.targets, L.module))
            C.note(L.module, "outside targets",
                   fmt::format(
                       "quantised though no config_groups target ({}) names it (llm-compressor model_free_ptq "
                       "quantises by "
                       "tensor name; an engine building the module from the config may not expect a quantised weight)",
                       fmt::join(F.targets, ", ")));
        if (C.per_expert_global(L) && !L.sources.empty()) {
            stacked_nvfp4(F, ref ? &*ref : nullptr, L, C, R);
            continue;
        }
        if (!C.structure(L)) continue;
        // One layer at a time: its codes, its scales, and the original weight.
        const RawTensor s = F.read(L.scale);
        const Scales st = stored_scales(F, L, s);
        const bool fp4 = F.tensors().at(L.weight).dtype == "U8";
        LiveBlocks lb(L, st, fp4, s.numel());
        if (detail::int4_packed(L.scheme)) lb.mask = 0xF;  // two's complement INT4: 0x8 is -8
        if (L.scheme == Scheme::int8) lb.mask = 0xFF;      // two's complement INT8: 0x80 is -128
        if (L.scheme == Scheme::int4 || L.scheme == Scheme::int8) lb.full_at = L.scheme == Scheme::int4 ? 7 : 127;
        C.pre_quant(L);
        RawTensor w;  // the whole layer where --reference compares it or INT4 rows are paired; else streamed
        if (ref || detail::int4_packed(L.scheme)) {
            w = F.read(L.weight);
            const auto codes = codes_of(L, w);
            lb.add(0, codes.data(), codes.size());
        } else {
            std::vector<std::uint8_t> nibbles;
            F.stream(L.weight, [&](std::uint64_t first, const std::uint8_t* bytes, std::size_t count) {
                if (!fp4) return lb.add(first, bytes, count);
                nibbles.resize(2 * count);  // two E2M1 codes per byte, low nibble first
                emu::unpack_fp4_array(bytes, nibbles.data(), nibbles.size(), emu::NibbleOrder::low_first);
                const std::uint64_t total = L.rows * L.cols, e0 = 2 * first;
                lb.add(e0, nibbles.data(), std::min<std::uint64_t>(nibbles.size(), total > e0 ? total - e0 : 0));
            });
        }
        C.values(L, lb.live, s, st);
        modelopt_int_max_code(F, L, lb, st, C);
        C.input(L);
        detail::modelopt_nvfp4_companions(F, L, C);
        detail::modelopt_max_code_rule(F, L, st, C);
        if (!ref) continue;
        if (const std::string why = detail::modelopt_not_replayable(F, L); !why.empty()) {
            C.note(L.module, "not replayable", why);
            continue;
        }
        std::string orig = L.module + ".weight";
        std::optional<RawTensor> found = original_of(*ref, L, orig);
        if (found) found = detail::with_repeated_kv_heads(F, L, std::move(*found));
        if (!found) {
            C.fail(orig, "reference", fmt::format("{} has no tensor '{}'", *reference, orig));
            continue;
        }
        const RawTensor o = std::move(*found);
        if (o.numel() != L.rows * L.cols) {
            C.fail(orig, "reference",
                   fmt::format("original {} has {} elements, the checkpoint's weight {}", shape_str(o.shape), o.numel(),
                               L.rows * L.cols));
            continue;
        }
        const std::vector<float> x = o.to_floats();
        R.comparisons.push_back(compare(F, L, w, s, st, x, o.dtype, variants(F, *ref, L)));
        if (R.comparisons.back().verdict != "bit-exact" && F.producer() == Producer::modelopt &&
            F.quant_algo.find("_SQ_") != std::string::npos && !L.pre_quant_scale.empty())
            C.note(L.weight, "smoothquant smoothing",
                   "ModelOpt SmoothQuant quantises the weight multiplied by the smoothing factor (model_calib.py "
                   "smoothquant, apply_pre_quant_scale_and_smooth) and exports 1/factor as pre_quant_scale: compare "
                   "against the smoothed weights, not the original");
        if (R.comparisons.back().verdict != "bit-exact" && F.producer() == Producer::modelopt &&
            F.quant_algo.find("AWQ") != std::string::npos)
            C.note(L.weight, "awq smoothing",
                   "ModelOpt AWQ quantises the weight multiplied by 1/pre_quant_scale in float32 (model_calib.py "
                   "apply_pre_quant_scale_and_smooth; q/k/v and gate/up rescaled again at export), and exports that "
                   "scale only "
                   "rounded to bfloat16 or folded into the layernorm: compare against the smoothed weights, not the "
                   "original");
        if (const auto db = smoothing_explains(F, L, R.comparisons.back(), st.block.size(), x)) {
            C.note(L.module, "not replayable",
                   fmt::format("{} of {} scales differ from the reference's, and the weights are the reference's up "
                               "to one factor per input column ({:.1f} dB after that fit), as smoothing gives: not "
                               "counted as a failure; the checks that need no reference still apply",
                               R.comparisons.back().scale_mismatches, st.block.size(), *db));
            R.comparisons.pop_back();
            continue;
        }
        modelopt_searched(F, *ref, L, x, o.dtype, st, R, C);  // last: it may take the comparison back
    }
    detail::check_trtllm_vocab_rows(F, ref ? &*ref : nullptr, R);
    C.experts();
    detail::check_sibling_scales(F, R);
    for (auto& f : detail::expert_scale_notes(F, R.layers)) R.findings.push_back(std::move(f));
    C.kv();
    detail::modelopt_preset_note(F, C);
    detail::modelopt_companion_tensors(F, C);
    detail::modelopt_unread_tensors(F, C);
    return R;
}

}  // namespace fp8kit::checkpoint
