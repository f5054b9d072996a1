// The thread pool (parallel/pool.hpp): ordered() hands results back in task order, and
// while_idle() runs its function only while no worker runs a job (what the HDF5 listing's fork
// relies on, lib/src/io/dump_hdf5.cpp).
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "fp8kit/parallel/pool.hpp"

using namespace fp8kit;

namespace {

// Restores the process's thread count when a test ends.
struct ThreadsFor {
    explicit ThreadsFor(unsigned n) : before(parallel::threads()) { parallel::set_threads(n); }
    ~ThreadsFor() { parallel::set_threads(before); }
    unsigned before;
};

}  // namespace

TEST_CASE("pool: ordered() consumes in task order whatever the thread count", "[pool]") {
    for (const unsigned n : {1u, 2u, 4u}) {
        ThreadsFor threads(n);
        std::vector<std::size_t> slot_task(parallel::default_window()), seen;
        parallel::ordered(
            40, parallel::default_window(), [&](std::size_t i, std::size_t s) { slot_task[s] = i; },
            [&](std::size_t i, std::size_t) {  // later tasks finish first
                std::this_thread::sleep_for(std::chrono::microseconds(40 - i));
            },
            [&](std::size_t i, std::size_t s) {
                CHECK(slot_task[s] == i);
                seen.push_back(i);
            });
        REQUIRE(seen.size() == 40);
        for (std::size_t i = 0; i < seen.size(); ++i) CHECK(seen[i] == i);
    }
}

TEST_CASE("pool: while_idle() waits for running jobs and holds the workers until it returns", "[pool]") {
    ThreadsFor threads(4);
    std::atomic<int> running{0}, started{0};
    int running_inside = -1, running_after_wait = -1;
    std::thread reader([&] {
        parallel::ordered(
            8, 4, [](std::size_t, std::size_t) {},
            [&](std::size_t, std::size_t) {
                ++running;
                ++started;
                std::this_thread::sleep_for(std::chrono::milliseconds(30));
                --running;
            },
            [](std::size_t, std::size_t) {});
    });
    while (started == 0) std::this_thread::yield();  // a job is running now
    parallel::while_idle([&] {
        running_inside = running.load();
        std::this_thread::sleep_for(std::chrono::milliseconds(60));  // no job may start meanwhile
        running_after_wait = running.load();
    });
    reader.join();
    CHECK(running_inside == 0);
    CHECK(running_after_wait == 0);
    CHECK(started == 8);
}
