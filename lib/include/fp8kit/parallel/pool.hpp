// The one thread pool of fp8kit: every reader and command that decodes or reads data in parallel
// goes through it (dump readers: io/chunk_task.hpp), so `--threads N` / OMP_NUM_THREADS set the
// parallelism of the whole process in one place.
//
// Results never depend on the thread count: ordered() hands results back in task order on the
// calling thread, so callers merge partial results in a fixed order, never in completion order.
#pragma once

#include <cstddef>
#include <functional>

namespace fp8kit::parallel {

// OMP_NUM_THREADS when it is set to a positive number (its first entry), else the cores this
// process may run on (sched_getaffinity, so `taskset -c 0,1` means 2), divided by the MPI ranks on
// the node when a launcher says how many there are and did not bind the rank to its own cores.
unsigned default_threads();
// The MPI ranks on this node as MPI itself counts them (MPI_Comm_split_type SHARED; set by
// cluster::MpiSession before any parallel work): default_threads() then divides the cores by
// it, whatever the launcher (mpirun, srun) puts in the environment. 0: not known.
void set_ranks_on_node(unsigned n);
// The thread count of the process: the pool's workers and OpenMP's team (omp_set_num_threads).
// 0 means default_threads(). Call before parallel work starts (the CLI: from --threads).
void set_threads(unsigned n);
unsigned threads();

// Runs tasks 0..n-1 with at most `window` of them in flight, and hands each one back in order:
//   prepare(i, slot)  on the calling thread, in order (e.g. libhdf5 calls, which take its global
//                     lock anyway: chunk addresses);
//   work(i, slot)     on a pool worker (pread, decode, statistics);
//   consume(i, slot)  on the calling thread, in order i = 0, 1, ... (merging, delivery).
// `slot` = i % window names the caller's buffers for task i: memory is window x per-task buffers.
// With threads() == 1 everything runs on the calling thread, one task at a time.
// An exception from any callback is rethrown here after every task in flight has finished (the
// first in task order wins); no task is started after it.
void ordered(std::size_t n, std::size_t window, const std::function<void(std::size_t, std::size_t)>& prepare,
             const std::function<void(std::size_t, std::size_t)>& work,
             const std::function<void(std::size_t, std::size_t)>& consume);

// Runs f on the calling thread while every pool worker is idle (no job queued or running, the
// last job's captures already freed) and keeps them idle until f returns. For fork() without
// exec: a worker inside malloc/free at the moment of the fork leaves the child's allocator
// locked (GCC 12's AddressSanitizer allocator takes no lock around fork, unlike glibc's malloc),
// and the child then blocks on its first allocation. f must not submit work to the pool.
void while_idle(const std::function<void()>& f);

// The window that keeps every worker busy while the caller consumes: threads() + 2.
std::size_t default_window();

}  // namespace fp8kit::parallel
