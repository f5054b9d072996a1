// sweep's histogram passes over ranks: each rank reads its share of the dumped tensors, rank 0
// keeps every pass in tensor order; see cluster/sweep.hpp and docs/mpi.md.
#include "fp8kit/cluster/sweep.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>
#include <type_traits>

#include "fp8kit/cluster/share.hpp"
#include "fp8kit/io/trace.hpp"
#include "record.hpp"

namespace fp8kit::cluster {
namespace {

using detail::put;
using detail::put_string;
using detail::Reader;

enum Tag : std::uint8_t { kPass = 0, kDumpError = 1, kOtherError = 2 };

// A pass that threw, as bytes: a dump::DumpError keeps its file, name and message (so rank 0
// throws the same error, with the same text), any other exception its what().
std::string encode_failure(std::size_t i, std::exception_ptr failed) {
    std::string out;
    put<std::uint64_t>(out, i);
    try {
        std::rethrow_exception(failed);
    } catch (const dump::DumpError& e) {
        put<std::uint8_t>(out, kDumpError);
        put_string(out, e.file), put_string(out, e.name), put_string(out, e.message);
    } catch (const std::exception& e) {
        put<std::uint8_t>(out, kOtherError);
        put_string(out, e.what());
    } catch (...) {
        put<std::uint8_t>(out, kOtherError);
        put_string(out, "unknown error");
    }
    return out;
}

// The PassOver of load_sweep_inputs: this rank's share (contiguous, balanced over the bytes the
// passes read: cluster::share) encoded, the gather, and rank 0's concatenation of every share
// broadcast, so that every rank keeps every pass in tensor order (each rank then holds the same
// Loaded, and the trace series can be split too). A failure that no tensor goes on from travels
// as a record and is thrown by every rank alike where it is decoded.
bool pass_over(Comm& comm, const dump::Dump& d, const std::vector<std::uint64_t>& bytes,
               const std::function<sweep::DumpedPass(std::size_t)>& pass,
               const std::function<void(std::size_t, sweep::DumpedPass&&)>& keep,
               const std::function<void(std::size_t, std::size_t)>& progress) {
    const auto [first, last] = share(bytes, comm.rank(), comm.size());
    std::string mine;
    for (std::size_t i = first; i < last; ++i) {
        try {
            mine += encode_pass(i, pass(i));
            if (progress) progress(i + 1 - first, last - first);  // this rank's share
        } catch (...) {  // what no tensor goes on from (a failed tensor is a Kind::failed pass):
                         // one process stops there, so does each rank's share
            mine += encode_failure(i, std::current_exception());
            break;
        }
    }
    std::string all;
    for (auto& part : comm.gather(std::move(mine))) all += part;  // rank order = tensor order
    all = comm.broadcast(std::move(all));                         // every rank joins, even after a failure
    std::size_t expect = 0;
    for (std::size_t pos = 0; pos < all.size();) {
        sweep::DumpedPass p;
        const std::size_t i = decode_pass(all, pos, p);  // throws a failed pass's error
        if (i != expect++) throw std::runtime_error("fp8kit cluster: sweep records out of tensor order");
        keep(i, std::move(p));
    }
    if (expect != d.tensors().size()) throw std::runtime_error("fp8kit cluster: a rank's sweep passes are missing");
    return true;
}

// Groups [first, last) of Sweep::run on this rank: contiguous, balanced over the groups' weights.
// Rank 0 gathers every group's bytes and broadcasts them: every rank merges every group in
// order, so each holds the totals one process holds.
void group_over(Comm& comm, std::size_t groups, const std::vector<std::uint64_t>& weight,
                const std::function<std::string(std::size_t)>& make,
                const std::function<void(std::size_t, const std::string&)>& use, const Progress& progress) {
    const auto [first, last] = share(weight, comm.rank(), comm.size());
    std::string mine;
    for (std::size_t g = first; g < last; ++g) {
        const std::string b = make(g);
        if (progress) progress(g + 1 - first, last - first);
        put<std::uint64_t>(mine, g);
        put_string(mine, b);
    }
    std::string all;
    for (auto& part : comm.gather(std::move(mine))) all += part;
    all = comm.broadcast(std::move(all));
    std::size_t pos = 0, expect = 0;
    Reader in{all, pos, "sweep groups"};
    while (pos < all.size()) {
        if (in.get<std::uint64_t>() != expect) throw std::runtime_error("fp8kit cluster: sweep groups out of order");
        use(expect++, in.get_string());
    }
    if (expect != groups) throw std::runtime_error("fp8kit cluster: a rank's sweep groups are missing");
}

}  // namespace

std::string encode_pass(std::size_t i, const sweep::DumpedPass& p) {
    std::string out;
    put<std::uint64_t>(out, i);
    put<std::uint8_t>(out, kPass);
    put(out, p.kind);
    put<std::uint64_t>(out, p.notes.size());
    for (const auto& n : p.notes) put_string(out, n);
    put_string(out, p.rht_skip);
    if (p.kind == sweep::DumpedPass::Kind::failed)  // a tensor that could not be read: why
        put_string(out, p.failure.file), put_string(out, p.failure.name), put_string(out, p.failure.message);
    if (p.kind != sweep::DumpedPass::Kind::read) return out;
    put_string(out, p.series);
    put(out, p.role), put(out, p.d.step), put(out, p.d.amax);
    p.d.hist->save(out);
    put<std::uint64_t>(out, p.d.block.size());
    for (const auto& q : p.d.block) {  // a preset left out of this tensor has no statistics
        put<std::uint8_t>(out, q.has_value());
        if (q) put(out, *q);
    }
    return out;
}

std::size_t decode_pass(const std::string& bytes, std::size_t& pos, sweep::DumpedPass& p) {
    Reader in{bytes, pos, "sweep record"};
    const auto i = static_cast<std::size_t>(in.get<std::uint64_t>());
    const auto tag = in.get<std::uint8_t>();
    if (tag == kDumpError) {
        std::string file = in.get_string(), name = in.get_string();
        throw dump::DumpError(std::move(file), std::move(name), in.get_string());
    }
    if (tag == kOtherError) throw std::runtime_error(in.get_string());
    if (tag != kPass) throw std::runtime_error("fp8kit cluster: malformed sweep record");
    p.kind = in.get<sweep::DumpedPass::Kind>();
    const auto notes = in.get<std::uint64_t>();
    for (std::uint64_t k = 0; k < notes; ++k) p.notes.push_back(in.get_string());
    p.rht_skip = in.get_string();
    if (p.kind == sweep::DumpedPass::Kind::failed) {
        p.failure.file = in.get_string(), p.failure.name = in.get_string();
        p.failure.message = in.get_string();
    }
    if (p.kind != sweep::DumpedPass::Kind::read) return i;
    p.series = in.get_string();
    p.role = in.get<Role>(), p.d.step = in.get<std::int64_t>(), p.d.amax = in.get<float>();
    p.d.hist = std::make_shared<MagnitudeHistogram>(MagnitudeHistogram::load(bytes, pos));
    const auto blocks = in.get<std::uint64_t>();
    if (blocks > bytes.size() - pos)
        throw std::runtime_error("fp8kit cluster: truncated sweep record");  // >= 1 byte each
    p.d.block.resize(blocks);
    for (auto& q : p.d.block)
        if (in.get<std::uint8_t>()) q = in.get<numerics::StatsScalars>();
    return i;
}

sweep::Loaded load_sweep_inputs(Comm& comm, sweep::Inputs in) {
    if (comm.size() == 1) return sweep::load_inputs(in);
    in.pass_over = [&comm, progress = in.progress](const dump::Dump& d, const auto& bytes, const auto& pass,
                                                   const auto& keep) {
        return pass_over(comm, d, bytes, pass, keep, progress);
    };
    if (comm.root()) return sweep::load_inputs(in);
    // Every rank reads the same traces and lists the same dumps, and decodes the same pass
    // records: what fails here fails alike on rank 0, which reports it; the others leave
    // quietly (SharedError).
    try {
        return sweep::load_inputs(in);
    } catch (const std::bad_alloc&) {  // this rank's alone: said here, and the job ends (main)
        throw;
    } catch (const std::exception& e) {
        throw SharedError(e.what());
    }
}

void run_sweep(Comm& comm, sweep::Loaded& L, const Progress& progress) {
    if (comm.size() == 1) {  // every group here, in order: what run() does without `over`
        return L.sweep->run(L.dumped, L.notes, [&](std::size_t groups, const auto&, const auto& make, const auto& use) {
            for (std::size_t g = 0; g < groups; ++g) {
                use(g, make(g));
                if (progress) progress(g + 1, groups);
            }
        });
    }
    L.sweep->run(L.dumped, L.notes, [&](std::size_t groups, const auto& weight, const auto& make, const auto& use) {
        group_over(comm, groups, weight, make, use, progress);
    });
}

void series_rows(Comm& comm, std::size_t series, const std::function<std::string(std::size_t, std::size_t)>& make,
                 const std::function<void(const std::string&)>& write, const Progress& progress) {
    const std::size_t K = sweep::Sweep::kSeriesGroup, groups = (series + K - 1) / K;
    const auto P = static_cast<std::size_t>(comm.size()), r = static_cast<std::size_t>(comm.rank());
    auto rows = [&](std::size_t g) { return g < groups ? make(g * K, std::min(series, (g + 1) * K)) : std::string(); };
    if (P == 1) {
        for (std::size_t g = 0; g < groups; ++g) {
            write(rows(g));
            if (progress) progress(g + 1, groups);
        }
        return;
    }
    // Round t: group t P + r on rank r; rank 0 writes the round's groups in rank order, which is
    // group order. Memory: one round's rows (P groups), whatever the series count.
    for (std::size_t t = 0; t * P < groups; ++t) {
        auto all = comm.gather(rows(t * P + r));
        for (const auto& part : all) write(part);
        if (progress) progress(std::min(groups, (t + 1) * P), groups);
    }
}

}  // namespace fp8kit::cluster
