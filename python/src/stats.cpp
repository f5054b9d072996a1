// Statistics of a cast (compute_stats, compute_block_stats) and amax.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <stdexcept>
#include <variant>

#include "bindings.hpp"
#include "fp8kit/stats/block_quantize.hpp"
#include "fp8kit/stats/fields.hpp"
#include "fp8kit/stats/statistics.hpp"
#include "fp8kit/emu/pack.hpp"

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

void put_fields(pyb::dict& d, const std::vector<StatField>& fields) {
    for (const auto& f : fields) std::visit([&](auto v) { d[pyb::str(f.key.data(), f.key.size())] = v; }, f.value);
}

pyb::dict stats_dict(const QuantStats& s) {
    pyb::dict d;
    put_fields(d, quant_stats_fields(s));
    put_hist(d, s.exp_hist, "exp_hist");
    return d;
}

namespace {

// The per-block fields that block_stats_dict and tile_summary share (lib's summarize_tiles).
void put_tile_fields(pyb::dict& d, const BlockStats& b) { put_fields(d, block_stats_fields(b)); }

}  // namespace

pyb::dict block_stats_dict(const BlockStats& b, Format format) {
    pyb::dict d = stats_dict(b.total);
    d["format"] = std::string(name(format));
    put_tile_fields(d, b);
    d["grid"] = pyb::make_tuple(b.grid_rows, b.grid_cols);
    d["block_shape"] = pyb::make_tuple(b.tile_rows, b.tile_cols);
    put_hist(d, b.scale_inv_exp_hist, "scale_inv_exp_hist");
    d["block_dynamic_range_hist"] = pyb::array_t<std::uint64_t>(b.dr_hist.size(), b.dr_hist.data());
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

// check_block_input, its message naming x, the recipe and the role.
void check_x(const BlockRecipe& br, std::size_t rows, std::size_t cols, const RecipeSpec& r, const std::string& role) {
    try {
        check_block_input(br, rows, cols);
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(fmt::format("x: recipe '{}', role {}: {}", r.name, role, e.what()));
    }
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
    if (x.ndim() != 2)
        throw std::invalid_argument(
            fmt::format("x: a 2-D array is needed for block statistics, got {} dimensions", x.ndim()));
    const RecipeSpec r = recipe_of(recipe_json_or_name, is_json);
    const Role ro = parse_recipe_slot(role);
    const auto rows = static_cast<std::size_t>(x.shape(0)), cols = static_cast<std::size_t>(x.shape(1));
    const BlockRecipe br = block_recipe(r, ro, cols);
    check_x(br, rows, cols, r, role);
    const void* data = contiguous_data(x, wide_size(w), "x");
    BlockStats b;
    {
        pyb::gil_scoped_release nogil;
        b = compute_block_stats(data, w, rows, cols, br);
    }
    pyb::dict d = block_stats_dict(b, br.format);
    // One scale per block, in the grid's shape (scale_inv holds grid_rows * grid_cols values).
    d["scale_inv"] = pyb::array_t<float>(
        std::vector<pyb::ssize_t>{static_cast<pyb::ssize_t>(b.grid_rows), static_cast<pyb::ssize_t>(b.grid_cols)},
        b.scale_inv.data());
    return d;
}

// Codes and block scales of a block recipe; packed: two E2M1 codes per byte along each row,
// element 2i in the low nibble (torch float4_e2m1fn_x2, cuda_fp4.h __nv_fp4x2, TE's NVFP4 data).
pyb::dict quantize_blocks_py(const pyb::array& x, const std::string& wide, const std::string& recipe_text, bool is_json,
                             const std::string& role, bool packed, std::uint64_t seed) {
    const Wide w = require_wide(wide, "dtype");
    if (x.ndim() != 2)
        throw std::invalid_argument(
            fmt::format("x: a 2-D array is needed for a block recipe, got {} dimensions", x.ndim()));
    const RecipeSpec r = recipe_of(recipe_text, is_json);
    const auto rows = static_cast<std::size_t>(x.shape(0)), cols = static_cast<std::size_t>(x.shape(1));
    const BlockRecipe br = block_recipe(r, parse_recipe_slot(role), cols);
    if (packed && br.format != Format::e2m1)
        throw std::invalid_argument(fmt::format(
            "packed=True: only e2m1 codes are packed two per byte (recipe '{}' casts to {})", r.name, name(br.format)));
    // The codes' rows are x's columns for the column-wise copy (columnwise_rht: TE's RHT).
    const std::size_t out_cols = br.columnwise_rht ? rows : cols;
    if (packed && out_cols % 2 != 0)
        throw std::invalid_argument(fmt::format("packed=True: the row length must be even, got {} columns", out_cols));
    check_x(br, rows, cols, r, role);
    const void* data = contiguous_data(x, wide_size(w), "x");
    BlockQuantized q;
    {
        pyb::gil_scoped_release nogil;
        q = quantize_blocks(data, w, rows, cols, br, seed);
    }
    pyb::dict d;
    const auto R = static_cast<pyb::ssize_t>(q.rows), C = static_cast<pyb::ssize_t>(q.cols);
    if (packed) {
        pyb::array_t<std::uint8_t> p(std::vector<pyb::ssize_t>{R, C / 2});
        for (std::size_t i = 0; i < q.rows; ++i)
            emu::pack_fp4_array(q.codes.data() + i * q.cols, p.mutable_data() + i * (q.cols / 2), q.cols,
                                emu::NibbleOrder::low_first);
        d["codes"] = p;
    } else {
        d["codes"] = pyb::array_t<std::uint8_t>(std::vector<pyb::ssize_t>{R, C}, q.codes.data());
    }
    const std::vector<pyb::ssize_t> g{static_cast<pyb::ssize_t>(q.grid_rows), static_cast<pyb::ssize_t>(q.grid_cols)};
    d["scale_codes"] = pyb::array_t<std::uint8_t>(g, q.scale_codes.data());
    d["scale"] = pyb::array_t<float>(g, q.scale.data());
    d["scale_inv"] = pyb::array_t<float>(g, q.scale_inv.data());
    d["global_amax"] = q.global_amax;
    d["format"] = std::string(name(br.format));
    d["rule"] = std::string(name(br.rule));
    d["block_shape"] = pyb::make_tuple(q.tile_rows, q.tile_cols);
    d["grid"] = pyb::make_tuple(q.grid_rows, q.grid_cols);
    d["packed"] = packed;
    d["columnwise_rht"] = q.columnwise_rht;
    return d;
}

// BlockStats' per-block fields from each tile's scale_inv and extremes (float32 arrays of one
// value per tile, row-major: what cuda::block_statistics_async writes), by lib's summarize_tiles,
// the one definition of them (the monitor's rows of GPU tensors): put_tile_fields' keys.
pyb::dict tile_summary(const pyb::array_t<float, pyb::array::c_style | pyb::array::forcecast>& scale_inv,
                       const pyb::array_t<float, pyb::array::c_style | pyb::array::forcecast>& tile_amax,
                       const pyb::array_t<float, pyb::array::c_style | pyb::array::forcecast>& tile_min) {
    const std::size_t n = static_cast<std::size_t>(scale_inv.size());
    if (static_cast<std::size_t>(tile_amax.size()) != n || static_cast<std::size_t>(tile_min.size()) != n)
        throw std::invalid_argument(
            fmt::format("tile_summary: scale_inv, tile_amax and tile_min must have one value "
                        "per tile each (got {}, {}, {})",
                        n, tile_amax.size(), tile_min.size()));
    BlockStats b;
    b.blocks = n;
    b.scale_inv.assign(scale_inv.data(), scale_inv.data() + n);
    const std::vector<double> amax(tile_amax.data(), tile_amax.data() + n), mins(tile_min.data(), tile_min.data() + n);
    summarize_tiles(b, amax.data(), mins.data());
    pyb::dict d;
    put_tile_fields(d, b);
    return d;
}

}  // namespace

void bind_stats(pyb::module_& m) {
    using namespace pyb::literals;
    m.def("stats", &stats, "x"_a, "wide"_a, "format"_a, "profile"_a, "rounding"_a, "overflow"_a, "nan"_a, "scale"_a,
          "scale_inv"_a, "seed"_a);
    m.def("amax", &amax, "x"_a, "wide"_a);
    m.def("quantize_blocks", &quantize_blocks_py, "x"_a, "wide"_a, "recipe"_a, "is_json"_a, "role"_a, "packed"_a,
          "seed"_a);
    m.def("block_stats", &block_stats, "x"_a, "wide"_a, "recipe"_a, "is_json"_a, "role"_a);
    m.def("tile_summary", &tile_summary, "scale_inv"_a, "tile_amax"_a, "tile_min"_a);
}

}  // namespace fp8kit::py
