// Which tensors a rank analyses: a contiguous range of the dump's tensors (Dump::tensors() order),
// cut so that every rank reads about the same number of bytes. Whole tensors only: a tensor's
// statistics are then computed by one rank exactly as one process computes them, so the merged
// report does not depend on the rank count (docs/mpi.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace fp8kit::cluster {

// [first, last) of the items with these sizes for `rank` of `size` ranks: item i goes to the rank
// whose equal share of the total holds the middle of item i (its bytes before it plus half its
// own). Ranks may get none (more ranks than items, or one item larger than several shares).
std::pair<std::size_t, std::size_t> share(const std::vector<std::uint64_t>& bytes, int rank, int size);

}  // namespace fp8kit::cluster
