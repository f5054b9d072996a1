// inspect over ranks: each rank analyses its share, rank 0 merges in tensor order; see
// cluster/inspect.hpp and docs/mpi.md.
#include "fp8kit/cluster/inspect.hpp"

#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "fp8kit/cluster/share.hpp"
#include "fp8kit/convert/quantize.hpp"
#include "record.hpp"

namespace fp8kit::cluster {
namespace {

using detail::put;
using detail::put_string;
using detail::Reader;

void put_blocks(std::string& out, const BlockStats& b) {
    put(out, b.tile_rows), put(out, b.tile_cols), put(out, b.grid_rows), put(out, b.grid_cols);
    put(out, b.blocks), put(out, b.total), put(out, b.scale_inv_exp_hist);
    put(out, b.scale_inv_min), put(out, b.scale_inv_max), put(out, b.blocks_with_range);
    put(out, b.dr_max), put(out, b.dr_mean), put(out, b.dr_hist);
    put<std::uint64_t>(out, b.scale_inv.size());
    out.append(reinterpret_cast<const char*>(b.scale_inv.data()), b.scale_inv.size() * sizeof(float));
}

std::shared_ptr<const BlockStats> get_blocks(Reader& r) {
    auto b = std::make_shared<BlockStats>();
    b->tile_rows = r.get<std::size_t>(), b->tile_cols = r.get<std::size_t>();
    b->grid_rows = r.get<std::size_t>(), b->grid_cols = r.get<std::size_t>();
    b->blocks = r.get<std::size_t>();
    b->total = r.get<QuantStats>();
    b->scale_inv_exp_hist = r.get<decltype(b->scale_inv_exp_hist)>();
    b->scale_inv_min = r.get<double>(), b->scale_inv_max = r.get<double>();
    b->blocks_with_range = r.get<std::size_t>();
    b->dr_max = r.get<double>(), b->dr_mean = r.get<double>();
    b->dr_hist = r.get<decltype(b->dr_hist)>();
    const auto n = r.get<std::uint64_t>();
    if (n > (r.in.size() - r.pos) / sizeof(float)) throw std::runtime_error("fp8kit cluster: truncated block scales");
    b->scale_inv.resize(n);
    std::memcpy(b->scale_inv.data(), r.in.data() + r.pos, n * sizeof(float));
    r.pos += n * sizeof(float);
    return b;
}

// What inspect reports for a failed tensor (inspect::add, analysis/inspect_report.cpp, does the same
// for one process).
dump::Problem problem_of(const dump::TensorInfo& t, std::exception_ptr failed) {
    try {
        std::rethrow_exception(failed);
    } catch (const dump::DumpError& e) {
        return {e.file, e.name, e.message};
    } catch (const std::exception& e) {
        return {t.file, t.name, e.what()};
    } catch (...) {
        return {t.file, t.name, "unknown error"};
    }
}

}  // namespace

std::string encode(std::size_t i, const inspect::Result* r, const dump::Problem* error) {
    std::string out;
    put<std::uint64_t>(out, i);
    put<std::uint8_t>(out, r ? 1 : 0);
    if (r) {
        put(out, r->format), put(out, r->role), put(out, r->granularity), put(out, r->amax);
        put(out, r->scale), put(out, r->stats), put<std::uint8_t>(out, r->streamed);
        put<std::uint8_t>(out, r->blocks ? 1 : 0);
        if (r->blocks) put_blocks(out, *r->blocks);
    } else {
        put_string(out, error->file), put_string(out, error->name), put_string(out, error->message);
    }
    return out;
}

Decoded decode(const std::string& bytes, std::size_t& pos) {
    Reader in{bytes, pos, "result record"};
    Decoded d;
    d.index = in.get<std::uint64_t>();
    if (in.get<std::uint8_t>()) {
        inspect::Result r;
        r.format = in.get<Format>(), r.role = in.get<Role>(), r.granularity = in.get<Granularity>();
        r.amax = in.get<float>(), r.scale = in.get<ScalePair>(), r.stats = in.get<QuantStats>();
        r.streamed = in.get<std::uint8_t>() != 0;
        if (in.get<std::uint8_t>()) r.blocks = get_blocks(in);
        d.result = std::move(r);
    } else {
        d.error.file = in.get_string(), d.error.name = in.get_string(), d.error.message = in.get_string();
    }
    return d;
}

std::pair<std::size_t, std::size_t> tensor_share(const dump::Dump& d, int rank, int size) {
    std::vector<std::uint64_t> bytes;
    bytes.reserve(d.tensors().size());
    for (const auto& t : d.tensors()) bytes.push_back(t.numel * wide_size(t.wide));
    return share(bytes, rank, size);
}

void analyse_all(Comm& comm, dump::Dump& d, const inspect::Options& opts, const inspect::Done& done) {
    const auto& tensors = d.tensors();
    // 1. This rank's share: whole tensors, balanced by stored bytes.
    const auto [first, last] = tensor_share(d, comm.rank(), comm.size());
    // 2. Analyse it with this rank's thread pool. Rank 0 holds the first share: it delivers its
    //    own tensors as they finish (progress), the others encode theirs for the gather.
    std::string mine;
    inspect::analyse_range(d, opts, first, last, [&](std::size_t i, const inspect::Result* r, std::exception_ptr e) {
        if (comm.root()) return done(i, r, e);
        if (r) {
            mine += encode(i, r, nullptr);
        } else {
            const dump::Problem p = problem_of(tensors[i], e);
            mine += encode(i, nullptr, &p);
        }
    });
    // 3. Rank 0 receives the other shares in rank order, which is tensor order (share.hpp).
    const auto all = comm.gather(std::move(mine));
    if (!comm.root()) return;
    std::size_t expect = last;
    for (std::size_t r = 1; r < all.size(); ++r) {
        for (std::size_t pos = 0; pos < all[r].size();) {
            Decoded rec = decode(all[r], pos);
            if (rec.index != expect++) throw std::runtime_error("fp8kit cluster: result records out of tensor order");
            if (rec.result) {
                done(rec.index, &*rec.result, nullptr);
            } else {
                done(rec.index, nullptr,
                     std::make_exception_ptr(dump::DumpError(rec.error.file, rec.error.name, rec.error.message)));
            }
        }
    }
    if (expect != tensors.size()) throw std::runtime_error("fp8kit cluster: a rank's results are missing");
}

}  // namespace fp8kit::cluster
