// cluster::share: every rank count tiles the tensors into contiguous ranges in rank order, each
// tensor on exactly one rank, and the ranges balance bytes (no rank holds more than its share
// plus one tensor). cluster::encode/decode carry a result bit for bit. No MPI needed: the split
// and merge are plain functions (the mpirun runs are tests/mpi/inspect_ranks.sh).
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fp8kit/cluster.hpp"
#include "fp8kit/recipes.hpp"
#include "fp8kit/stats/statistics.hpp"

using namespace fp8kit;

TEST_CASE("share: contiguous ranges in rank order, byte-balanced", "[mpi]") {
    std::mt19937_64 rng(19);
    for (int trial = 0; trial < 200; ++trial) {
        const std::size_t n = rng() % 40;
        std::vector<std::uint64_t> bytes(n);
        std::uint64_t total = 0, largest = 0;
        for (auto& b : bytes) {
            b = rng() % 4 == 0 ? 0 : rng() % (std::uint64_t(1) << (rng() % 34));
            total += b + 1;
            largest = std::max(largest, b + 1);
        }
        for (int p = 1; p <= 17; ++p) {
            std::size_t next = 0;
            for (int r = 0; r < p; ++r) {
                const auto [first, last] = cluster::share(bytes, r, p);
                REQUIRE(first <= last);
                if (first != last) REQUIRE(first == next);
                if (first != last) next = last;
                std::uint64_t mine = 0;
                for (std::size_t i = first; i < last; ++i) mine += bytes[i] + 1;
                REQUIRE(mine <= total / p + largest + 1);
            }
            REQUIRE(next == n);  // the nonempty ranges end at the last tensor
            // Every tensor on exactly one rank.
            std::vector<int> owners(n, 0);
            for (int r = 0; r < p; ++r) {
                const auto [first, last] = cluster::share(bytes, r, p);
                for (std::size_t i = first; i < last; ++i) ++owners[i];
            }
            for (int o : owners) REQUIRE(o == 1);
        }
    }
}

TEST_CASE("share: equal tensors spread evenly", "[mpi]") {
    const std::vector<std::uint64_t> bytes(12, 1000);
    for (int p : {1, 2, 3, 4, 6, 12}) {
        for (int r = 0; r < p; ++r) {
            const auto [first, last] = cluster::share(bytes, r, p);
            CHECK(first == std::size_t(r) * 12 / p);
            CHECK(last - first == 12 / std::size_t(p));
        }
    }
}

TEST_CASE("encode/decode: a result and an error travel bit for bit", "[mpi]") {
    std::vector<float> x(4096);
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.f, 3.f);
    for (auto& v : x) v = nd(rng);
    inspect::Result r;
    r.format = Format::e4m3;
    r.amax = 12.5f;
    r.scale = {35.84f, 1 / 35.84f};
    const BlockRecipe br = block_recipe(parse_recipe("mxfp8"), Role::activation, 64);
    auto blocks = std::make_shared<BlockStats>(compute_block_stats(x.data(), Wide::f32, 64, 64, br));
    r.stats = blocks->total;
    r.blocks = blocks;
    r.streamed = true;
    const dump::Problem p{"a.h5", "layers.1/out", "chunk 2: inflate failed"};
    const std::string bytes = cluster::encode(5, &r, nullptr) + cluster::encode(6, nullptr, &p);
    std::size_t pos = 0;
    const auto a = cluster::decode(bytes, pos);
    const auto b = cluster::decode(bytes, pos);
    REQUIRE(pos == bytes.size());
    REQUIRE(a.index == 5);
    REQUIRE(a.result);
    CHECK(std::memcmp(&a.result->stats, &r.stats, sizeof r.stats) == 0);
    CHECK(a.result->streamed);
    REQUIRE(a.result->blocks);
    CHECK(a.result->blocks->scale_inv == blocks->scale_inv);
    CHECK(std::memcmp(&a.result->blocks->total, &blocks->total, sizeof blocks->total) == 0);
    CHECK(a.result->blocks->dr_hist == blocks->dr_hist);
    REQUIRE(b.index == 6);
    REQUIRE_FALSE(b.result);
    CHECK(b.error.name == p.name);
    CHECK(b.error.message == p.message);
    std::size_t cut = 0;
    CHECK_THROWS(cluster::decode(bytes.substr(0, 20), cut));
}

namespace {

// A communicator whose gather and broadcast answer as a rank of a job whose ranks exit with
// `statuses` would see them (rank 0 gets them all; every rank gets rank 0's broadcast).
class Statuses final : public cluster::Comm {
public:
    Statuses(int rank, std::vector<int> statuses) : rank_(rank), statuses_(std::move(statuses)) {}
    int rank() const override { return rank_; }
    int size() const override { return static_cast<int>(statuses_.size()); }
    std::vector<std::string> gather(std::string mine) override {
        if (rank_ != 0) return {};
        std::vector<std::string> all;
        for (int s : statuses_) all.push_back(std::to_string(s));
        all[0] = std::move(mine);
        return all;
    }
    std::string broadcast(std::string bytes) override { return rank_ == 0 ? bytes : broadcast_; }
    std::string broadcast_ = "2";  // what rank 0 sent, for a rank other than 0

private:
    int rank_;
    std::vector<int> statuses_;
};

}  // namespace

TEST_CASE("worst_status: every rank exits with the worst rank's status", "[mpi]") {
    CHECK(cluster::worst_status(cluster::serial(), 0) == 0);
    CHECK(cluster::worst_status(cluster::serial(), 1) == 1);
    Statuses root(0, {0, 2, 1});
    CHECK(cluster::worst_status(root, 0) == 2);
    Statuses root_failed(0, {1, 0, 0});
    CHECK(cluster::worst_status(root_failed, 1) == 1);
    Statuses other(1, {0, 0, 0});  // rank 0 found a 2 elsewhere and broadcast it
    CHECK(cluster::worst_status(other, 0) == 2);
}
