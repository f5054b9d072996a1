// The thread pool; see parallel/pool.hpp.
#include "fp8kit/parallel/pool.hpp"

#include <omp.h>
#if defined(__linux__)
#include <sched.h>
#endif

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace fp8kit::parallel {
namespace {

// Workers that take jobs from one queue. Created on first use with threads() workers, rebuilt
// when set_threads changes the count.
class Pool {
public:
    // A thread that cannot be started (EAGAIN under a process or address-space limit) leaves the
    // pool smaller; with none, ordered() runs every task on the caller's thread. The results are
    // the same either way (tasks are consumed in order).
    explicit Pool(unsigned n) {
        for (unsigned i = 0; i < n; ++i) {
            try {
                workers_.emplace_back([this] { loop(); });
            } catch (const std::system_error&) {
                break;
            }
        }
    }
    ~Pool() {
        {
            std::lock_guard<std::mutex> l(m_);
            stop_ = true;
        }
        cv_.notify_all();
        for (auto& w : workers_) w.join();
    }
    unsigned size() const { return static_cast<unsigned>(workers_.size()); }
    void submit(std::function<void()> job) {
        {
            std::lock_guard<std::mutex> l(m_);
            jobs_.push_back(std::move(job));
        }
        cv_.notify_one();
    }
    // Runs f once every worker waits for work with the queue empty, and keeps them there until f
    // returns (the queue's lock is held: no worker can take a job meanwhile).
    void while_idle(const std::function<void()>& f) {
        std::unique_lock<std::mutex> l(m_);
        idle_.wait(l, [this] { return jobs_.empty() && busy_ == 0; });
        f();
    }

private:
    void loop() {
        for (;;) {
            std::function<void()> job;
            {
                std::unique_lock<std::mutex> l(m_);
                cv_.wait(l, [this] { return stop_ || !jobs_.empty(); });
                if (jobs_.empty()) return;
                job = std::move(jobs_.front());
                jobs_.pop_front();
                ++busy_;
            }
            job();
            job = nullptr;  // the job's captures are freed before the worker counts as idle
            {
                std::lock_guard<std::mutex> l(m_);
                --busy_;
            }
            idle_.notify_all();
        }
    }
    std::mutex m_;
    std::condition_variable cv_;
    std::condition_variable idle_;  // a worker finished a job (while_idle)
    unsigned busy_ = 0;             // workers between taking a job and freeing it
    std::deque<std::function<void()>> jobs_;
    bool stop_ = false;
    std::vector<std::thread> workers_;
};

std::atomic<unsigned> g_threads{0};
std::atomic<unsigned> g_ranks_on_node{0};
std::mutex g_pool_mutex;
std::unique_ptr<Pool> g_pool;

Pool& pool() {
    std::lock_guard<std::mutex> l(g_pool_mutex);
    if (!g_pool || g_pool->size() != threads()) {
        g_pool.reset();
        g_pool = std::make_unique<Pool>(threads());
    }
    return *g_pool;
}

// One task's completion, seen by the caller.
struct Slot {
    bool done = false;
    std::exception_ptr error;
};

}  // namespace

void while_idle(const std::function<void()>& f) {
    std::lock_guard<std::mutex> l(g_pool_mutex);
    if (g_pool)
        g_pool->while_idle(f);
    else
        f();
}

unsigned default_threads() {
    if (const char* env = std::getenv("OMP_NUM_THREADS")) {
        char* end = nullptr;
        const long v = std::strtol(env, &end, 10);
        if (end != env && v > 0) return static_cast<unsigned>(std::min<long>(v, 1024));
    }
    unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    bool bound = false;  // the launcher already gave this process its share of the cores
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        const unsigned mine = static_cast<unsigned>(std::max(1, CPU_COUNT(&set)));
        bound = mine < cores;
        cores = mine;
    }
#endif
    // An MPI rank that may use every core of the node shares them with the node's other ranks:
    // MPI counts them (set_ranks_on_node), else Open MPI says how many there are
    // (OMPI_COMM_WORLD_LOCAL_SIZE; MPICH/Slurm: MPI_LOCALNRANKS).
    if (const unsigned ranks = g_ranks_on_node.load(); ranks > 0)
        return bound || ranks == 1 ? cores : std::max(1u, cores / ranks);
    for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
        const char* env = std::getenv(var);
        const long ranks = env ? std::strtol(env, nullptr, 10) : 0;
        if (!bound && ranks > 1) return std::max(1u, cores / static_cast<unsigned>(ranks));
    }
    return cores;
}

void set_ranks_on_node(unsigned n) { g_ranks_on_node = n; }

void set_threads(unsigned n) {
    g_threads = n == 0 ? default_threads() : n;
    omp_set_num_threads(static_cast<int>(g_threads.load()));
}

unsigned threads() {
    if (g_threads == 0) g_threads = default_threads();
    return g_threads;
}

std::size_t default_window() { return threads() + 2; }

void ordered(std::size_t n, std::size_t window, const std::function<void(std::size_t, std::size_t)>& prepare,
             const std::function<void(std::size_t, std::size_t)>& work,
             const std::function<void(std::size_t, std::size_t)>& consume) {
    window = std::max<std::size_t>(1, window);
    auto serial = [&] {
        for (std::size_t i = 0; i < n; ++i) {
            prepare(i, i % window);
            work(i, i % window);
            consume(i, i % window);
        }
    };
    if (threads() <= 1 || n <= 1) return serial();
    Pool& p = pool();
    if (p.size() == 0) return serial();
    std::mutex m;
    std::condition_variable cv;
    std::vector<Slot> slots(window);
    std::size_t submitted = 0, in_flight = 0;
    std::exception_ptr failed;
    auto submit = [&](std::size_t i) {
        const std::size_t s = i % window;
        slots[s] = Slot{};
        prepare(i, s);
        {
            std::lock_guard<std::mutex> l(m);
            ++in_flight;
        }
        p.submit([&, i, s] {
            std::exception_ptr e;
            try {
                work(i, s);
            } catch (...) {
                e = std::current_exception();
            }
            // Notify under the lock: the caller may return (and destroy cv) once in_flight is 0.
            std::lock_guard<std::mutex> l(m);
            slots[s].error = e;
            slots[s].done = true;
            --in_flight;
            cv.notify_all();
        });
    };
    try {
        for (; submitted < std::min(n, window); ++submitted) submit(submitted);
        for (std::size_t i = 0; i < n; ++i) {
            const std::size_t s = i % window;
            {
                std::unique_lock<std::mutex> l(m);
                cv.wait(l, [&] { return slots[s].done; });
                if (slots[s].error) std::rethrow_exception(slots[s].error);
            }
            consume(i, s);
            if (submitted < n) submit(submitted++);
        }
    } catch (...) {
        failed = std::current_exception();
    }
    // Every job in flight references this frame: wait for them before leaving.
    std::unique_lock<std::mutex> l(m);
    cv.wait(l, [&] { return in_flight == 0; });
    if (failed) std::rethrow_exception(failed);
}

}  // namespace fp8kit::parallel
