// te_rht16_columnwise on the GPU (cuda/include/fp8kit/cuda/hadamard.hpp): one thread per
// (column, group of 16 rows), the same three calls as lib/src/convert/hadamard.cpp (rht16.cuh
// rht16_round: widen each element exactly to binary64, numerics::te_rht16_group, round once to
// the type, nearest even).
#include <string>

#include "fp8kit/cuda/hadamard.hpp"
#include "rht16.cuh"

namespace fp8kit::cuda {

using namespace detail;

namespace {

template <class S>
__global__ void __launch_bounds__(kThreads)
    rht16_kernel(const typename S::storage_t* __restrict__ in, typename S::storage_t* __restrict__ out,
                 std::size_t rows, std::size_t cols, bool random_signs) {
    const std::size_t groups = rows / 16 * cols;
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t k = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < groups; k += stride) {
        const std::size_t c = k % cols, g = k / cols * 16;  // adjacent threads: adjacent columns
        rht16_round<S>([&](int i) { return in[(g + i) * cols + c]; }, random_signs,
                       [&](int j, typename S::storage_t y) { out[c * rows + g + j] = y; });
    }
}

}  // namespace

void te_rht16_columnwise(Wide type, const void* in, std::size_t rows, std::size_t cols, void* out, bool random_signs,
                         Stream stream) {
    require_input(type, "te_rht16_columnwise");
    if (rows % 16 != 0)
        throw std::invalid_argument("fp8kit::cuda::te_rht16_columnwise: the row count " + std::to_string(rows) +
                                    " must be a multiple of the Hadamard dimension 16");
    const std::size_t groups = rows / 16 * cols;
    if (groups == 0) return;
    with_input(type, [&](auto si) {
        using S = decltype(si);
        rht16_kernel<S><<<grid_for(groups), kThreads, 0, as_stream(stream)>>>(
            static_cast<const typename S::storage_t*>(in), static_cast<typename S::storage_t*>(out), rows, cols,
            random_signs);
    });
    check_launch("rht16_kernel");
}

namespace detail {

std::string rht_columnwise_shape_error(int block_rows, int block_cols, std::size_t rows) {
    if (block_rows != 1 || block_cols != 16)
        return "columnwise_rht needs 1 x 16 blocks (TE's Hadamard dimension is the NVFP4 tile length 16), got " +
               std::to_string(block_rows) + " x " + std::to_string(block_cols);
    if (rows % 16 != 0)
        return "columnwise_rht: the row count " + std::to_string(rows) +
               " must be a multiple of 16 (TE's random Hadamard transform works on 16 rows of each column)";
    return {};
}

void with_rht_columnwise_copy(Wide type, const void* in, std::size_t rows, std::size_t cols, Stream stream,
                              const std::function<void(const void* copy)>& use) {
    const cudaStream_t s = as_stream(stream);
    void* copy = nullptr;
    const std::size_t bytes = rows * cols * wide_bytes(type);
    if (bytes > 0) FP8KIT_CUDA_CHECK(cudaMallocAsync(&copy, bytes, s));
    try {
        te_rht16_columnwise(type, in, rows, cols, copy, true, stream);
        use(copy);
    } catch (...) {
        if (copy) cudaFreeAsync(copy, s);  // unchecked: the first error is the one reported
        throw;
    }
    if (copy) FP8KIT_CUDA_CHECK(cudaFreeAsync(copy, s));
}

}  // namespace detail

}  // namespace fp8kit::cuda
