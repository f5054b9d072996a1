// The cache formats' and scale policies' names, each written once (with the aliases accepted):
// what reports print, what `fp8kit kv` and fp8kit.kv accept, and the order "all" runs them in.
#include "fp8kit/kv.hpp"
#include "name_table.hpp"

namespace fp8kit::kv {
namespace {

using detail::NameEntry;

constexpr NameEntry<CacheFormat> kFormats[] = {
    {CacheFormat::e4m3, "e4m3"},           {CacheFormat::e5m2, "e5m2"},           {CacheFormat::e4m3fnuz, "e4m3fnuz"},
    {CacheFormat::nvfp4, "nvfp4"},         {CacheFormat::e4m3, "fp8_e4m3", true}, {CacheFormat::e4m3, "fp8", true},
    {CacheFormat::e5m2, "fp8_e5m2", true}, {CacheFormat::e4m3fnuz, "fnuz", true}, {CacheFormat::nvfp4, "fp4", true},
};

constexpr NameEntry<ScalePolicy> kPolicies[] = {
    {ScalePolicy::one, "one"},
    {ScalePolicy::vllm_first_batch, "vllm_first_batch"},
    {ScalePolicy::tensor, "tensor"},
    {ScalePolicy::modelopt_trtllm, "modelopt_trtllm"},
    {ScalePolicy::modelopt_hf, "modelopt_hf"},
    {ScalePolicy::llmc_minmax, "llmc_minmax"},
    {ScalePolicy::head, "head"},
    {ScalePolicy::token_head, "token_head"},
    {ScalePolicy::one, "1.0", true},
    {ScalePolicy::vllm_first_batch, "first_batch", true},
    {ScalePolicy::tensor, "calibrated", true},
    {ScalePolicy::modelopt_hf, "modelopt", true},  // the HF export: what ModelOpt checkpoints on the Hub hold
    {ScalePolicy::modelopt_hf, "modelopt_hf_export", true},
    {ScalePolicy::llmc_minmax, "llmc", true},
    {ScalePolicy::head, "per_head", true},
    {ScalePolicy::token_head, "per_token_head", true},
};

template <class E, std::size_t N>
std::vector<E> all_of(const NameEntry<E> (&table)[N]) {
    std::vector<E> out;
    for (const auto& e : table)
        if (!e.alias) out.push_back(e.value);
    return out;
}

}  // namespace

const char* name(CacheFormat f) { return detail::name_in(kFormats, f).data(); }
const char* name(ScalePolicy p) { return detail::name_in(kPolicies, p).data(); }
CacheFormat parse_format(std::string_view s) { return detail::parse_in(kFormats, s, "cache format"); }
ScalePolicy parse_policy(std::string_view s) { return detail::parse_in(kPolicies, s, "scale policy"); }
std::string format_names() { return detail::name_list(kFormats); }
std::string policy_names() { return detail::name_list(kPolicies); }
std::vector<CacheFormat> all_formats() { return all_of(kFormats); }
std::vector<ScalePolicy> all_policies() { return all_of(kPolicies); }

}  // namespace fp8kit::kv
