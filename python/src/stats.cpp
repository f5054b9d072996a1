// Statistics of a cast (compute_stats, compute_block_stats) and amax.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <stdexcept>

#include "bindings.hpp"
#include "fp8kit/stats/statistics.hpp"

namespace fp8kit::py {
namespace {

// The exponent histogram as (exponents, counts) arrays over the finite nonzero bins, plus the
// zero and non-finite bins as scalars.
void put_hist(pyb::dict& d, const std::array<std::uint64_t, kExpHistBins>& h, const char* key) {
    pyb::array_t<int> e(kExpHistNonfiniteBin - 1);
    pyb::array_t<std::uint64_t> c(kExpHistNonfiniteBin - 1);
    for (std::size_t b = 1; b < kExpHistNonfiniteBin; ++b) {
        e.mutable_at(b - 1) = exp_hist_exponent(b);
        c.mutable_at(b - 1) = h[b];
    }
    pyb::dict hist;
    hist["exponent"] = e;
    hist["count"] = c;
    hist["zero"] = h[kExpHistZeroBin];
    hist["nonfinite"] = h[kExpHistNonfiniteBin];
    d[key] = hist;
}

}  // namespace

pyb::dict stats_dict(const QuantStats& s) {
    pyb::dict d;
    d["numel"] = s.numel;
    d["finite"] = s.finite();
    d["zeros"] = s.zeros;
    d["nan"] = s.nan;
    d["inf"] = s.inf;
    d["underflow"] = s.underflow;
    d["subnormal"] = s.subnormal;
    d["overflow"] = s.overflow;
    d["te_underflow"] = s.te_underflow;
    d["te_overflow"] = s.te_overflow;
    d["amax"] = s.amax;
    d["min_nonzero"] = s.min_nonzero;
    d["sum_x2"] = s.sum_x2;
    d["sum_err2"] = s.sum_err2;
    d["mse"] = s.mse();
    d["sqnr_db"] = s.sqnr_db();
    d["dynamic_range_binades"] = s.dynamic_range_binades();
    put_hist(d, s.exp_hist, "exp_hist");
    return d;
}

namespace {

pyb::dict stats(const pyb::array& x, const std::string& wide, const std::string& format, const OptStr& profile,
                const OptStr& rounding, const OptStr& overflow, const OptStr& nan, double scale, double scale_inv,
                std::uint64_t seed) {
    const Wide w = require_wide(wide, "dtype");
    QuantConfig cfg;
    cfg.format = require_format(format, "format");
    cfg.policy = resolve_policy(cfg.format, w, profile, rounding, overflow, nan);
    cfg.scale = static_cast<float>(scale);
    cfg.scale_inv = static_cast<float>(scale_inv);
    cfg.seed = seed;
    const void* data = contiguous_data(x, wide_size(w), "x");
    const auto n = static_cast<std::size_t>(x.size());
    QuantStats s;
    {
        pyb::gil_scoped_release nogil;
        s = compute_stats(data, w, n, cfg);
    }
    pyb::dict d = stats_dict(s);
    d["format"] = std::string(name(cfg.format));
    d["scale"] = cfg.scale;
    d["scale_inv"] = cfg.scale_inv == 0 ? 1.0f / cfg.scale : cfg.scale_inv;
    d["policy"] = describe(cfg.policy);
    return d;
}

float amax(const pyb::array& x, const std::string& wide) {
    const Wide w = require_wide(wide, "dtype");
    const void* data = contiguous_data(x, wide_size(w), "x");
    const auto n = static_cast<std::size_t>(x.size());
    pyb::gil_scoped_release nogil;
    return amax_of(data, w, n);
}

pyb::dict block_stats(const pyb::array& x, const std::string& wide, const std::string& recipe_json_or_name,
                      bool is_json, const std::string& role) {
    const Wide w = require_wide(wide, "dtype");
    if (x.ndim() != 2) throw std::invalid_argument(fmt::format("x: a 2-D array is needed for block statistics, got {} dimensions", x.ndim()));
    const RecipeSpec r = is_json ? recipe_from_json(nlohmann::json::parse(recipe_json_or_name), "recipe")
                                 : parse_recipe(recipe_json_or_name);
    const Role ro = parse_recipe_slot(role);
    const auto rows = static_cast<std::size_t>(x.shape(0)), cols = static_cast<std::size_t>(x.shape(1));
    const BlockRecipe br = block_recipe(r, ro, cols);
    const void* data = contiguous_data(x, wide_size(w), "x");
    BlockStats b;
    {
        pyb::gil_scoped_release nogil;
        b = compute_block_stats(data, w, rows, cols, br);
    }
    pyb::dict d = stats_dict(b.total);
    d["format"] = std::string(name(br.format));
    d["blocks"] = b.blocks;
    d["grid"] = pyb::make_tuple(b.block_rows, b.block_cols);
    d["block_shape"] = pyb::make_tuple(br.block_rows, br.block_cols);
    d["scale_inv_min"] = b.scale_inv_min;
    d["scale_inv_max"] = b.scale_inv_max;
    put_hist(d, b.scale_inv_exp_hist, "scale_inv_exp_hist");
    d["blocks_with_range"] = b.blocks_with_range;
    d["dr_max"] = b.dr_max;
    d["dr_mean"] = b.dr_mean;
    d["dr_hist"] = pyb::array_t<std::uint64_t>(b.dr_hist.size(), b.dr_hist.data());
    d["scale_inv"] = pyb::array_t<float>(std::vector<pyb::ssize_t>{static_cast<pyb::ssize_t>(b.block_rows),
                                                                     static_cast<pyb::ssize_t>(b.block_cols)},
                                         b.scale_inv.data());
    return d;
}

}  // namespace

void bind_stats(pyb::module_& m) {
    using namespace pyb::literals;
    m.def("stats", &stats, "x"_a, "wide"_a, "format"_a, "profile"_a, "rounding"_a, "overflow"_a, "nan"_a,
          "scale"_a, "scale_inv"_a, "seed"_a);
    m.def("amax", &amax, "x"_a, "wide"_a);
    m.def("block_stats", &block_stats, "x"_a, "wide"_a, "recipe"_a, "is_json"_a, "role"_a);
}

}  // namespace fp8kit::py
