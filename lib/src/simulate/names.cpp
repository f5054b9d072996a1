// The names of the all-reduce's and the optimizer's enums, each written once: what reports print
// and what the CLI's and Python's options accept.
#include "fp8kit/simulate.hpp"
#include "name_table.hpp"

namespace fp8kit::simulate {
namespace {

using detail::NameEntry;

constexpr NameEntry<Order> kOrders[] = {{Order::rank, "rank"}, {Order::ring, "ring"}, {Order::tree, "tree"}};
constexpr NameEntry<Path> kPaths[] = {{Path::ddp, "ddp"}, {Path::non_ddp, "non-ddp"}};
constexpr NameEntry<HopArith> kHops[] = {{HopArith::half, "half"}, {HopArith::float32, "float32"}};
constexpr NameEntry<StateDtype> kStateDtypes[] = {
    {StateDtype::f32, "fp32"}, {StateDtype::f16, "fp16"}, {StateDtype::bf16, "bf16"}, {StateDtype::fp8, "fp8"}};
constexpr NameEntry<TeBuild> kTeBuilds[] = {{TeBuild::fast_math, "fast-math"}, {TeBuild::nvcc_default, "nvcc-default"}};

}  // namespace

std::string_view name(Order o) { return detail::name_in(kOrders, o); }
std::string_view name(Path p) { return detail::name_in(kPaths, p); }
std::string_view name(HopArith h) { return detail::name_in(kHops, h); }
std::string_view name(StateDtype d) { return detail::name_in(kStateDtypes, d); }
std::string_view name(TeBuild b) { return detail::name_in(kTeBuilds, b); }

Order parse_order(std::string_view s) { return detail::parse_in(kOrders, s, "reduction order"); }
Path parse_path(std::string_view s) { return detail::parse_in(kPaths, s, "all-reduce path"); }
HopArith parse_hop(std::string_view s) { return detail::parse_in(kHops, s, "hop arithmetic"); }
StateDtype parse_state_dtype(std::string_view s) { return detail::parse_in(kStateDtypes, s, "state dtype"); }
TeBuild parse_te_build(std::string_view s) { return detail::parse_in(kTeBuilds, s, "TE build"); }

}  // namespace fp8kit::simulate
