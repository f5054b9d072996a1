// sweep's histogram passes over ranks: each rank reads its share of the dumped tensors, rank 0
// keeps every pass in tensor order; see cluster/sweep.hpp and docs/mpi.md.
#include "fp8kit/cluster/sweep.hpp"

#include <cstring>
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
// passes read: cluster::share), then the gather; rank 0 keeps its own
// passes as they finish and the others' in rank order, which is tensor order.
bool pass_over(Comm& comm, const dump::Dump& d, const std::vector<std::uint64_t>& bytes,
               const std::function<sweep::DumpedPass(std::size_t)>& pass,
               const std::function<void(std::size_t, sweep::DumpedPass&&)>& keep) {
    const auto [first, last] = share(bytes, comm.rank(), comm.size());
    std::string mine;
    std::exception_ptr failed;  // rank 0's first failure, thrown after the gather
    for (std::size_t i = first; i < last; ++i) {
        try {
            sweep::DumpedPass p = pass(i);
            if (comm.root()) keep(i, std::move(p));
            else mine += encode_pass(i, p);
        } catch (...) {  // what no tensor goes on from (a failed tensor is a Kind::failed pass):
                         // one process stops there, so does each rank's share
            if (comm.root()) failed = std::current_exception();
            else mine += encode_failure(i, std::current_exception());
            break;
        }
    }
    const auto all = comm.gather(std::move(mine));  // every rank joins, even after a failure
    if (!comm.root()) return false;
    if (failed) std::rethrow_exception(failed);
    std::size_t expect = last;
    for (std::size_t r = 1; r < all.size(); ++r) {
        for (std::size_t pos = 0; pos < all[r].size();) {
            sweep::DumpedPass p;
            const std::size_t i = decode_pass(all[r], pos, p);  // throws a failed pass's error
            if (i != expect++) throw std::runtime_error("fp8kit cluster: sweep records out of tensor order");
            keep(i, std::move(p));
        }
    }
    if (expect != d.tensors().size()) throw std::runtime_error("fp8kit cluster: a rank's sweep passes are missing");
    return true;
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
    if (blocks > bytes.size() - pos) throw std::runtime_error("fp8kit cluster: truncated sweep record");  // >= 1 byte each
    p.d.block.resize(blocks);
    for (auto& q : p.d.block)
        if (in.get<std::uint8_t>()) q = in.get<numerics::StatsScalars>();
    return i;
}

sweep::Loaded load_sweep_inputs(Comm& comm, sweep::Inputs in) {
    if (comm.size() == 1) return sweep::load_inputs(in);
    in.pass_over = [&comm](const dump::Dump& d, const auto& bytes, const auto& pass, const auto& keep) {
        return pass_over(comm, d, bytes, pass, keep);
    };
    if (comm.root()) return sweep::load_inputs(in);
    // The other ranks read only dumps (the traces are rank 0's): what could fail before the
    // gather is then what fails alike on rank 0 (a file that is missing or not a dump's
    // header), which rank 0 reports; these ranks leave quietly (SharedError).
    try {
        std::vector<std::string> dumps;
        for (const auto& f : in.files) {
            trace::require_regular_file(f);
            if (dump::is_dump_file(f)) dumps.push_back(f);
        }
        if (dumps.empty()) return {};  // traces only: rank 0 replays them alone
        in.files = std::move(dumps);
        return sweep::load_inputs(in);
    } catch (const std::exception& e) {
        throw SharedError(e.what());
    }
}

}  // namespace fp8kit::cluster
