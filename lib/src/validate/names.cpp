// The names of validate's enums, each written once: what reports print and what the CLI's and
// Python's options accept.
#include <fmt/format.h>

#include "fp8kit/validate.hpp"
#include "name_table.hpp"

namespace fp8kit {
namespace {

using detail::NameEntry;

constexpr NameEntry<MismatchClass> kMismatchClasses[] = {
    {MismatchClass::tie, "tie"},
    {MismatchClass::direction, "direction"},
    {MismatchClass::overflow, "overflow"},
    {MismatchClass::nan_encoding, "nan-encoding"},
    {MismatchClass::flush_to_zero, "flush-to-zero"},
    {MismatchClass::double_rounding, "double-rounding"},
    {MismatchClass::scale, "scale"},
    {MismatchClass::other, "other"},
};

constexpr NameEntry<BlockLayout> kBlockLayouts[] = {
    {BlockLayout::tensor, "tensor"},    {BlockLayout::rowwise, "rowwise"}, {BlockLayout::b1x128, "1x128"},
    {BlockLayout::b128x128, "128x128"}, {BlockLayout::mx32, "mx32"},       {BlockLayout::nv16, "1x16"},
};

constexpr NameEntry<ScaleType> kScaleTypes[] = {
    {ScaleType::f32, "f32"},
    {ScaleType::e8m0, "e8m0"},
    {ScaleType::e4m3, "e4m3"},
};

constexpr NameEntry<ScaleOrder> kScaleOrders[] = {
    {ScaleOrder::row_major, "row-major"},
    {ScaleOrder::padded, "padded"},
    {ScaleOrder::swizzled, "swizzled"},
};

}  // namespace

std::string_view name(MismatchClass c) { return detail::name_in(kMismatchClasses, c); }
std::string_view name(BlockLayout b) { return detail::name_in(kBlockLayouts, b); }
std::string_view name(ScaleType t) { return detail::name_in(kScaleTypes, t); }
std::string_view name(ScaleOrder o) { return detail::name_in(kScaleOrders, o); }

std::string block_layout_names(bool with_tensor) {
    std::string out;
    for (const auto& e : kBlockLayouts)
        if (with_tensor || e.value != BlockLayout::tensor) out += (out.empty() ? "" : ", ") + std::string(e.name);
    return out;
}

BlockLayout parse_block_layout(std::string_view s, bool with_tensor) {
    for (const auto& e : kBlockLayouts)
        if (e.name == s && (with_tensor || e.value != BlockLayout::tensor)) return e.value;
    throw std::invalid_argument(
        fmt::format("unknown block layout '{}' (choose from {})", s, block_layout_names(with_tensor)));
}

ScaleType parse_scale_type(std::string_view s) { return detail::parse_in(kScaleTypes, s, "scale type"); }
ScaleOrder parse_scale_order(std::string_view s) { return detail::parse_in(kScaleOrders, s, "scale order"); }

}  // namespace fp8kit
