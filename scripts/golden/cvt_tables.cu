// Exhaustive tables from the GPU's own conversion instruction (sm_89+ cvt.rn.satfinite), the
// reference for profile cuda-satfinite. Writes f16/bf16 tables as raw bytes and, for all 2^32
// float32 inputs, one zlib CRC-32 per slice of 2^24 outputs. Build: nvcc -arch=sm_90 ... -lz
#include <cuda_runtime.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
#error "cvt.rn.satfinite.e4m3x2 needs sm_89 or newer"
#endif

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); std::exit(1); } } while (0)

template <bool E5M2>
__device__ uint8_t cvt_f32(float x) {
    uint16_t r;
    if (E5M2) asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(x));
    else asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(x));
    return static_cast<uint8_t>(r & 0xFF);
}
template <bool E5M2>
__device__ uint8_t cvt_f16(uint16_t h) {
    uint16_t r;
    uint32_t pair = h;
    if (E5M2) asm("cvt.rn.satfinite.e5m2x2.f16x2 %0, %1;" : "=h"(r) : "r"(pair));
    else asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(r) : "r"(pair));
    return static_cast<uint8_t>(r & 0xFF);
}

template <bool E5M2>
__global__ void f32_slice(uint8_t* out, uint64_t base, uint64_t n) {
    for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x)
        out[i] = cvt_f32<E5M2>(__uint_as_float(static_cast<uint32_t>(base + i)));
}
template <bool E5M2>
__global__ void table16(uint8_t* f16, uint8_t* bf16) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= 65536) return;
    f16[i] = cvt_f16<E5M2>(static_cast<uint16_t>(i));
    bf16[i] = cvt_f32<E5M2>(__uint_as_float(i << 16));  // bf16 -> f32 is exact; then one rounding
}

static void write(const std::string& path, const std::vector<uint8_t>& v) {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(v.data(), 1, v.size(), f) != v.size()) { std::perror(path.c_str()); std::exit(1); }
    std::fclose(f);
}

template <bool E5M2>
static void run(const std::string& dir, const char* name) {
    uint8_t *d16, *dbf;
    CHECK(cudaMalloc(&d16, 65536));
    CHECK(cudaMalloc(&dbf, 65536));
    table16<E5M2><<<256, 256>>>(d16, dbf);
    CHECK(cudaGetLastError());
    std::vector<uint8_t> h(65536);
    CHECK(cudaMemcpy(h.data(), d16, 65536, cudaMemcpyDeviceToHost));
    write(dir + "/f16_" + name + ".bin", h);
    CHECK(cudaMemcpy(h.data(), dbf, 65536, cudaMemcpyDeviceToHost));
    write(dir + "/bf16_" + name + ".bin", h);

    const uint64_t slice = 1u << 24;
    uint8_t* d;
    CHECK(cudaMalloc(&d, slice));
    std::vector<uint8_t> hs(slice);
    std::string crcs;
    for (uint64_t s = 0; s < 256; ++s) {
        CHECK(cudaMemset(d, 0xAB, slice));  // poison: every byte must be written
        f32_slice<E5M2><<<1024, 256>>>(d, s * slice, slice);
        CHECK(cudaGetLastError());
        CHECK(cudaMemcpy(hs.data(), d, slice, cudaMemcpyDeviceToHost));
        char buf[16];
        std::snprintf(buf, sizeof buf, "%08lx\n", crc32(0L, hs.data(), static_cast<uInt>(slice)));
        crcs += buf;
    }
    FILE* f = std::fopen((dir + "/f32_" + name + ".crc").c_str(), "w");
    std::fputs(crcs.c_str(), f);
    std::fclose(f);
    cudaFree(d); cudaFree(d16); cudaFree(dbf);
}

int main(int argc, char** argv) {
    std::string dir = argc > 1 ? argv[1] : ".";
    run<false>(dir, "e4m3");
    run<true>(dir, "e5m2");
    std::printf("cvt tables written to %s\n", dir.c_str());
    return 0;
}
