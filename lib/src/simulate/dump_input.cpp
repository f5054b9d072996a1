// The gradients and optimizer states of a run's dumps, grouped by parameter and step.
#include <fnmatch.h>

#include <map>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "../convert/float_bits.hpp"
#include "fp8kit/emu/formats.hpp"
#include "fp8kit/io/dump.hpp"
#include "fp8kit/simulate.hpp"

namespace fp8kit::simulate {

struct DumpInput::Impl {
    std::vector<std::unique_ptr<dump::Dump>> files;
    std::vector<std::string> names;
    // (param, step, leaf) -> per file: index in that file's tensors(), or -1
    std::map<std::tuple<std::string, std::int64_t, std::string>, std::vector<long>> index;
};

namespace {

std::vector<std::string> split_path(const std::string& s) {
    std::vector<std::string> out;
    std::size_t p = 0;
    while (p <= s.size()) {
        const std::size_t q = s.find('/', p);
        const std::string part = s.substr(p, q == std::string::npos ? std::string::npos : q - p);
        if (!part.empty()) out.push_back(part);
        if (q == std::string::npos) break;
        p = q + 1;
    }
    return out;
}

std::string leaf_kind(const std::string& leaf) {
    if (leaf == "wgrad" || leaf == "grad") return "grad";
    if (leaf == "exp_avg" || leaf == "exp_avg_sq" || leaf == "weight") return leaf;
    if (leaf == "master_weight") return "weight";
    return {};
}

std::vector<float> read_floats(dump::Dump& d, std::size_t i) {
    const auto& t = d.tensors()[i];
    std::vector<float> out(t.numel);
    d.read(i, [&](const dump::Chunk& c) {
        for (std::size_t j = 0; j < c.count; ++j) {
            float v = 0;
            switch (c.wide) {
                case Wide::f64: v = static_cast<float>(static_cast<const double*>(c.bits)[j]); break;
                case Wide::f32: v = static_cast<const float*>(c.bits)[j]; break;
                case Wide::f16:
                    v = detail::float_of(emu::convert<emu::Binary16, emu::Binary32>(
                        static_cast<const std::uint16_t*>(c.bits)[j], emu::kDecodePolicy));
                    break;
                case Wide::bf16:
                    v = detail::float_of(emu::convert<emu::BFloat16, emu::Binary32>(
                        static_cast<const std::uint16_t*>(c.bits)[j], emu::kDecodePolicy));
                    break;
            }
            out[c.first + j] = v;
        }
    });
    return out;
}

}  // namespace

DumpInput::~DumpInput() = default;
DumpInput::DumpInput(DumpInput&&) noexcept = default;

DumpInput::DumpInput(const std::vector<std::string>& files, const std::vector<std::string>& include,
                     const dump::ReadOptions& opts)
    : impl_(std::make_unique<Impl>()) {
    if (files.empty()) throw std::invalid_argument("no dump given");
    dump::Selection sel;
    sel.include = include;
    for (std::size_t f = 0; f < files.size(); ++f) {
        auto d = std::make_unique<dump::Dump>(std::vector<std::string>{files[f]}, sel, opts);
        if (!d->errors().empty()) throw std::invalid_argument(d->errors().front().describe());
        for (std::size_t i = 0; i < d->tensors().size(); ++i) {
            const auto& t = d->tensors()[i];
            auto parts = split_path(t.name);
            if (parts.size() < 2) continue;
            const std::string kind = leaf_kind(parts.back());
            if (kind.empty()) continue;
            parts.pop_back();
            std::string param;
            for (const auto& p : parts) {
                if (dump::guess_step(p)) continue;  // the step component is not part of the name
                param += (param.empty() ? "" : "/") + p;
            }
            if (param.empty()) continue;
            const std::int64_t step = t.step.value_or(0);
            auto& slot = impl_->index[{param, step, kind}];
            if (slot.empty()) slot.assign(files.size(), -1);
            slot[f] = static_cast<long>(i);
        }
        impl_->files.push_back(std::move(d));
        impl_->names.push_back(files[f]);
    }
    if (params().empty())
        throw std::invalid_argument(
            fmt::format("{}: no weight gradient (a dataset named .../wgrad or .../grad)", files[0]));
}

std::vector<dump::Problem> DumpInput::skipped() const {
    std::vector<dump::Problem> out;
    for (const auto& d : impl_->files)
        for (const auto& n : dump::skipped(d->notes())) out.push_back(n);
    return out;
}

int DumpInput::ranks() const { return static_cast<int>(impl_->files.size()); }

std::vector<std::string> DumpInput::params() const {
    std::vector<std::string> out;
    for (const auto& [k, v] : impl_->index)
        if (std::get<2>(k) == "grad" && (out.empty() || out.back() != std::get<0>(k))) out.push_back(std::get<0>(k));
    return out;
}

std::vector<std::int64_t> DumpInput::steps(const std::string& param) const {
    std::vector<std::int64_t> out;
    for (const auto& [k, v] : impl_->index)
        if (std::get<0>(k) == param && std::get<2>(k) == "grad") out.push_back(std::get<1>(k));
    return out;
}

std::vector<std::vector<float>> DumpInput::grads(const std::string& param, std::int64_t step) {
    const auto it = impl_->index.find({param, step, "grad"});
    if (it == impl_->index.end()) throw std::invalid_argument(fmt::format("{}: no gradient at step {}", param, step));
    std::vector<std::vector<float>> out;
    for (std::size_t f = 0; f < impl_->files.size(); ++f) {
        if (it->second[f] < 0)
            throw std::invalid_argument(fmt::format("{}: no gradient of {} at step {} (every rank's dump needs it)",
                                                    impl_->names[f], param, step));
        out.push_back(read_floats(*impl_->files[f], static_cast<std::size_t>(it->second[f])));
        if (out.back().size() != out.front().size())
            throw std::invalid_argument(fmt::format("{}: gradient of {} at step {} has {} elements, rank 0 has {}",
                                                    impl_->names[f], param, step, out.back().size(),
                                                    out.front().size()));
    }
    return out;
}

std::vector<float> DumpInput::state(const std::string& param, std::int64_t step, const std::string& leaf) {
    const auto it = impl_->index.find({param, step, leaf});
    if (it == impl_->index.end()) return {};
    for (std::size_t f = 0; f < impl_->files.size(); ++f)
        if (it->second[f] >= 0) return read_floats(*impl_->files[f], static_cast<std::size_t>(it->second[f]));
    return {};
}

}  // namespace fp8kit::simulate
