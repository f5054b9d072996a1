// Captures the GPU's approximate reciprocal and square root (rcp.approx.ftz.f32, MUFU.RCP;
// sqrt.approx.ftz.f32, MUFU.SQRT), the two operations of nvcc --use_fast_math that no document
// defines bit for bit, as the tables of numerics/fast_math.hpp, and checks that header against the
// hardware:
//   1. the tables: on [1, 2) for RCP and [1, 4) for SQRT, hardware bits minus the correctly rounded
//      bits (__frcp_rn, __fsqrt_rn), written as int8 files;
//   2. every one of the 2^32 float32 inputs: the hardware's result against fast_math::rcp / sqrt
//      with those tables (bit for bit, NaN included);
//   3. the flushing operations add.ftz, mul.ftz and fma.rn.ftz against fast_math::add / mul / fma
//      on 2^24 operand sets drawn around the smallest normal 2^-126, where flushing decides.
// Built with nvcc's defaults (IEEE division and square root, no flushing), so that the model's own
// arithmetic is IEEE; the hardware operations are inline PTX.
//
// Usage: mufu_capture RCP_TABLE SQRT_TABLE SAMPLES (write_samples says its layout). Prints the delta histograms, the mismatch counts and up
// to 8 mismatches of each check; exits 1 on any mismatch.
#include <cstdint>
#include <cstdio>
#include <vector>

#include "fp8kit/numerics/fast_math.hpp"
#include "probe_host.hpp"

namespace fm = fp8kit::numerics::fast_math;
using fp8kit::numerics::bits_of;
using fp8kit::numerics::float_of;

__device__ float hw_rcp(float x) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
__device__ float hw_sqrt(float x) {
    float r;
    asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
__device__ float hw_mul(float a, float b) {
    float r;
    asm("mul.ftz.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
__device__ float hw_add(float a, float b) {
    float r;
    asm("add.ftz.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
__device__ float hw_fma(float a, float b, float c) {
    float r;
    asm("fma.rn.ftz.f32 %0, %1, %2, %3;" : "=f"(r) : "f"(a), "f"(b), "f"(c));
    return r;
}

// Deltas on the base binades; `bad` counts deltas outside int8.
__global__ void capture(std::int8_t* rcp, std::int8_t* sqrt_t, unsigned* bad) {
    const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < fm::kRcpEntries) {
        const float x = float_of(0x3F800000u | i);
        const int d = static_cast<int>(bits_of(hw_rcp(x)) - bits_of(fm::rcp_rn(x)));
        if (d < -128 || d > 127) atomicAdd(bad, 1u);
        rcp[i] = static_cast<std::int8_t>(d);
    }
    if (i < fm::kSqrtEntries) {
        const float x = float_of(((127u + (i >> 23)) << 23) | (i & 0x7FFFFFu));
        const int d = static_cast<int>(bits_of(hw_sqrt(x)) - bits_of(fm::sqrt_rn(x)));
        if (d < -128 || d > 127) atomicAdd(bad, 1u);
        sqrt_t[i] = static_cast<std::int8_t>(d);
    }
}

struct Mismatch {
    std::uint32_t a, b, c, hw, model;
};
constexpr unsigned kKeep = 8;

__device__ void record(unsigned* count, Mismatch* keep, Mismatch m) {
    const unsigned k = atomicAdd(count, 1u);
    if (k < kKeep) keep[k] = m;
}

// Every float32 input (2^32 = gridDim.x * blockDim.x * per-thread), RCP and SQRT.
__global__ void check_all(fm::MufuTables t, unsigned* count, Mismatch* keep) {
    const std::uint64_t per = 64, first = (static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * per;
    for (std::uint64_t k = first; k < first + per; ++k) {
        const std::uint32_t u = static_cast<std::uint32_t>(k);
        const float x = float_of(u);
        const std::uint32_t r = bits_of(hw_rcp(x)), rm = bits_of(fm::rcp(x, t));
        if (r != rm) record(count, keep, {u, 0, 0, r, rm});
        const std::uint32_t s = bits_of(hw_sqrt(x)), sm = bits_of(fm::sqrt(x, t));
        if (s != sm) record(count + 1, keep + kKeep, {u, 1, 0, s, sm});
    }
}

// add, mul, fma on operand sets drawn on the host; the hardware's results are kept in `hw`
// (3 per set: a * b, a + c, a * b + c).
__global__ void check_ftz(const float* a, const float* b, const float* c, int n, std::uint32_t* hw, unsigned* count,
                          Mismatch* keep) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float x = a[i], y = b[i], z = c[i];
    const std::uint32_t pairs[3][2] = {{bits_of(hw_mul(x, y)), bits_of(fm::mul(x, y))},
                                       {bits_of(hw_add(x, z)), bits_of(fm::add(x, z))},
                                       {bits_of(hw_fma(x, y, z)), bits_of(fm::fma(x, y, z))}};
    for (int op = 0; op < 3; ++op) {
        hw[3 * static_cast<std::size_t>(i) + op] = pairs[op][0];
        if (pairs[op][0] != pairs[op][1])
            record(count + op, keep + op * kKeep, {bits_of(x), bits_of(y), bits_of(z), pairs[op][0], pairs[op][1]});
    }
}

// The hardware's RCP and SQRT of the given inputs.
__global__ void unary(const std::uint32_t* x, int n, std::uint32_t* out) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[2 * i] = bits_of(hw_rcp(float_of(x[i])));
    out[2 * i + 1] = bits_of(hw_sqrt(float_of(x[i])));
}

namespace {

using probe::check;
using probe::uniform;

template <class T>
T* device_array(std::size_t n) {
    T* p = nullptr;
    check(cudaMalloc(&p, n * sizeof(T)), "cudaMalloc");
    check(cudaMemset(p, 0, n * sizeof(T)), "cudaMemset");
    return p;
}

void write_table(const char* path, const std::int8_t* dev, std::uint32_t n) {
    std::vector<std::int8_t> h(n);
    check(cudaMemcpy(h.data(), dev, n, cudaMemcpyDeviceToHost), "cudaMemcpy table");
    long hist[256] = {};
    for (std::int8_t d : h) ++hist[d + 128];
    std::printf("%s: deltas (ulps: count)", path);
    for (int d = 0; d < 256; ++d)
        if (hist[d]) std::printf("  %d: %ld", d - 128, hist[d]);
    std::printf("\n");
    std::FILE* f = std::fopen(path, "wb");
    if (!f || std::fwrite(h.data(), 1, n, f) != n || std::fclose(f) != 0) {
        std::perror(path);
        std::exit(1);
    }
}

unsigned report(const char* what, const unsigned* count, const Mismatch* keep) {
    std::printf("%s: %u mismatches\n", what, *count);
    for (unsigned k = 0; k < *count && k < kKeep; ++k)
        std::printf("  in %08x %08x %08x  hardware %08x  model %08x\n", keep[k].a, keep[k].b, keep[k].c, keep[k].hw,
                    keep[k].model);
    return *count;
}

// The samples file for lib's tests (tests/golden/mufu/samples.bin): u32 magic 'MUFS', u32 count,
// count x (x, rcp, sqrt); u32 count, count x (a, b, c, a * b, a + c, a * b + c); all float32 bits,
// results the hardware's. Unary inputs: special values and random bit patterns; operand sets: the
// first drawn ones and those whose IEEE product or FMA is exactly +-2^-126, where flushing differs.
void write_samples(const char* path, const std::vector<float>& a, const std::vector<float>& b,
                   const std::vector<float>& c, const std::vector<std::uint32_t>& hw) {
    std::vector<std::uint32_t> x = {0x00000000u, 0x80000000u, 0x00000001u, 0x807FFFFFu, 0x00800000u, 0x80800000u,
                                    0x3F800000u, 0x40000000u, 0x40800000u, 0x7F000000u, 0x7E800000u, 0x7E800001u,
                                    0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u,
                                    0x7F800001u, 0x00FFFFFFu, 0x3F7FFFFFu, 0x3FFFFFFFu, 0x407FFFFFu, 0xBF800000u};
    while (x.size() < 16384) {
        const std::uint32_t r = static_cast<std::uint32_t>(uniform() * 4294967296.0);
        x.push_back(r);
    }
    std::uint32_t* dx = device_array<std::uint32_t>(x.size());
    std::uint32_t* dout = device_array<std::uint32_t>(2 * x.size());
    check(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
    unary<<<static_cast<unsigned>(x.size() + 255) / 256, 256>>>(dx, static_cast<int>(x.size()), dout);
    std::vector<std::uint32_t> out(2 * x.size());
    check(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
    std::vector<std::uint32_t> sets;
    const auto keep_set = [&](std::size_t i) {
        for (std::uint32_t v : {bits_of(a[i]), bits_of(b[i]), bits_of(c[i]), hw[3 * i], hw[3 * i + 1], hw[3 * i + 2]})
            sets.push_back(v);
    };
    std::size_t boundary = 0;
    for (std::size_t i = 0; i < a.size() && boundary < 4096; ++i)
        if (fm::is_min_normal(a[i] * b[i]) || fm::is_min_normal(std::fma(a[i], b[i], c[i]))) keep_set(i), ++boundary;
    for (std::size_t i = 0; i < 4096; ++i) keep_set(i);
    std::FILE* f = std::fopen(path, "wb");
    const std::uint32_t head[2] = {0x5346554Du, static_cast<std::uint32_t>(x.size())};
    const std::uint32_t nsets = static_cast<std::uint32_t>(sets.size() / 6);
    bool ok = f && std::fwrite(head, 4, 2, f) == 2;
    for (std::size_t i = 0; ok && i < x.size(); ++i) {
        const std::uint32_t row[3] = {x[i], out[2 * i], out[2 * i + 1]};
        ok = std::fwrite(row, 4, 3, f) == 3;
    }
    ok = ok && std::fwrite(&nsets, 4, 1, f) == 1 && std::fwrite(sets.data(), 4, sets.size(), f) == sets.size();
    if (!f || std::fclose(f) != 0 || !ok) {
        std::perror(path);
        std::exit(1);
    }
    std::printf("%s: %zu inputs, %u operand sets (%zu at +-2^-126)\n", path, x.size(), nsets, boundary);
}

// Operands around 2^-126: a in [0.5, 2) (some just below 1), b and c of magnitude 2^-127..2^-124
// (some subnormal), random signs for c, so products, sums and FMAs land on both sides of the
// smallest normal, ties included.
void draw(std::vector<float>& a, std::vector<float>& b, std::vector<float>& c) {
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double r = uniform();
        a[i] = r < 0.5 ? static_cast<float>(1.0 - std::ldexp(std::floor(uniform() * 64), -24))
                       : static_cast<float>(0.5 + 1.5 * uniform());
        b[i] = static_cast<float>(std::ldexp(1.0 + uniform(), -127 + static_cast<int>(uniform() * 3)));
        if (uniform() < 0.25) b[i] = float_of(0x00800000u + static_cast<std::uint32_t>(uniform() * 64));
        const float cc = static_cast<float>(std::ldexp(1.0 + uniform(), -127 + static_cast<int>(uniform() * 3)));
        c[i] = uniform() < 0.5 ? -cc : cc;
    }
}

}  // namespace

int main(int argc, char** argv) {
    probe::name = "mufu_capture";
    if (argc != 4) {
        std::fprintf(stderr, "usage: mufu_capture RCP_TABLE SQRT_TABLE SAMPLES\n");
        return 2;
    }
    std::int8_t* rcp = device_array<std::int8_t>(fm::kRcpEntries);
    std::int8_t* sq = device_array<std::int8_t>(fm::kSqrtEntries);
    unsigned* dcounts = device_array<unsigned>(8);
    Mismatch* dkeep = device_array<Mismatch>(8 * kKeep);
    unsigned counts[8];
    Mismatch keep[8 * kKeep];
    const auto fetch = [&](const char* what) {
        check(cudaDeviceSynchronize(), what);
        check(cudaMemcpy(counts, dcounts, sizeof counts, cudaMemcpyDeviceToHost), "cudaMemcpy counts");
        check(cudaMemcpy(keep, dkeep, sizeof keep, cudaMemcpyDeviceToHost), "cudaMemcpy mismatches");
    };
    capture<<<fm::kSqrtEntries / 256, 256>>>(rcp, sq, dcounts + 7);
    fetch("capture");
    if (counts[7]) {
        std::fprintf(stderr, "mufu_capture: %u deltas outside int8\n", counts[7]);
        return 1;
    }
    write_table(argv[1], rcp, fm::kRcpEntries);
    write_table(argv[2], sq, fm::kSqrtEntries);

    check_all<<<(1u << 26) / 256, 256>>>(fm::MufuTables{rcp, sq}, dcounts, dkeep);
    fetch("check_all");
    unsigned bad = report("rcp.approx.ftz.f32, all 2^32 inputs", counts, keep);
    bad += report("sqrt.approx.ftz.f32, all 2^32 inputs", counts + 1, keep + kKeep);

    const int n = 1 << 24;
    std::vector<float> a(n), b(n), c(n);
    draw(a, b, c);
    float *da = device_array<float>(n), *db = device_array<float>(n), *dc = device_array<float>(n);
    check(cudaMemcpy(da, a.data(), n * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
    check(cudaMemcpy(db, b.data(), n * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
    check(cudaMemcpy(dc, c.data(), n * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
    std::uint32_t* dhw = device_array<std::uint32_t>(3 * static_cast<std::size_t>(n));
    check_ftz<<<n / 256, 256>>>(da, db, dc, n, dhw, dcounts + 2, dkeep + 2 * kKeep);
    fetch("check_ftz");
    std::vector<std::uint32_t> hw(3 * static_cast<std::size_t>(n));
    check(cudaMemcpy(hw.data(), dhw, hw.size() * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
    write_samples(argv[3], a, b, c, hw);
    bad += report("mul.ftz.f32 (a * b)", counts + 2, keep + 2 * kKeep);
    bad += report("add.ftz.f32 (a + c)", counts + 3, keep + 3 * kKeep);
    bad += report("fma.rn.ftz.f32 (a * b + c)", counts + 4, keep + 4 * kKeep);
    std::printf("%s\n", bad ? "MISMATCHES" : "all equal");
    return bad ? 1 : 0;
}
