// fp8kit validate, pointed at the project's own CUDA kernels, as a kernel author would use it:
// the output must be bit-exact and consistent with the profile it was asked for.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fp8kit/cuda/kernels.hpp"
#include "fp8kit/convert/format_info.hpp"
#include "fp8kit/validate.hpp"

namespace cu = fp8kit::cuda;
using fp8kit::Format;
using fp8kit::Policy;
using fp8kit::Wide;

namespace {

// Random float32 bit patterns plus every exact tie between adjacent E4M3 and E5M2 values, both
// signs, and the specials around them.
std::vector<float> adversarial_inputs() {
    std::vector<float> x;
    std::mt19937 rng(2026);
    for (int i = 0; i < (1 << 20); ++i) {
        const std::uint32_t b = rng();
        float f;
        std::memcpy(&f, &b, 4);
        x.push_back(f);
    }
    for (Format f : {Format::e4m3, Format::e5m2}) {
        for (int c = 0; c < 127; ++c) {
            const double a = fp8kit::decode_value(f, static_cast<std::uint8_t>(c));
            const double b = fp8kit::decode_value(f, static_cast<std::uint8_t>(c + 1));
            if (!std::isfinite(a) || !std::isfinite(b)) continue;
            const float mid = static_cast<float>((a + b) / 2);
            for (float v : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
                x.push_back(v);
                x.push_back(-v);
            }
        }
    }
    for (float v : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 464.0f, 61440.0f, 1e-45f, -1e-45f}) x.push_back(v);
    return x;
}

struct DeviceBuffers {
    void* in;
    std::uint8_t* out;
    explicit DeviceBuffers(const std::vector<float>& x)
        : in(cu::device_alloc(x.size() * 4)), out(static_cast<std::uint8_t*>(cu::device_alloc(x.size()))) {
        cu::copy_to_device(in, x.data(), x.size() * 4);
    }
    ~DeviceBuffers() {
        cu::device_free(in);
        cu::device_free(out);
    }
};

fp8kit::ValidateReport check(const std::vector<float>& x, const std::vector<std::uint8_t>& codes, Format to,
                             const Policy& p, fp8kit::Scaling scaling = {}) {
    fp8kit::ValidateRequest req{Wide::f32, x.data(), codes.data(), x.size(), to, p, scaling};
    return fp8kit::validate(req);
}

}  // namespace

TEST_CASE("validate finds the project's CUDA quantize kernels bit-exact", "[gpu]") {
    const auto x = adversarial_inputs();
    DeviceBuffers d(x);
    std::vector<std::uint8_t> codes(x.size());
    for (Format f : {Format::e4m3, Format::e5m2}) {
        for (auto profile : fp8kit::emu::kAllProfiles) {
            const Policy p = fp8kit::emu::profile_policy(profile, f).policy;
            cu::quantize(f, Wide::f32, d.in, d.out, x.size(), p);
            cu::copy_to_host(codes.data(), d.out, codes.size());
            const auto r = check(x, codes, f, p);
            INFO(fp8kit::name(f) << " " << fp8kit::name(profile) << "\n" << r.summary());
            CHECK(r.exact());
            bool named = false;
            for (const auto& s : r.consistent_profiles)
                named = named || s.rfind(std::string(fp8kit::name(profile)), 0) == 0;
            CHECK(named);
        }
        // With a per-tensor scale: the kernel's fl32(x * scale) is what validate's --scale means.
        const Policy sat = fp8kit::emu::profile_policy(fp8kit::emu::Profile::cuda_satfinite, f).policy;
        fp8kit::Scaling s;
        s.mode = fp8kit::ScaleMode::scale;
        s.value = 448.0f / 1234.5f;
        cu::quantize(f, Wide::f32, d.in, d.out, x.size(), sat, s.value);
        cu::copy_to_host(codes.data(), d.out, codes.size());
        const auto r = check(x, codes, f, sat, s);
        INFO(r.summary());
        CHECK(r.exact());
    }
}

TEST_CASE("validate finds the cvt.rn.satfinite hardware path equal to profile cuda-satfinite", "[gpu]") {
    const auto x = adversarial_inputs();
    DeviceBuffers d(x);
    std::vector<std::uint8_t> codes(x.size());
    for (Format f : {Format::e4m3, Format::e5m2}) {
        if (f == Format::e4m3)
            cu::quantize_e4m3_cvt_satfinite(static_cast<const float*>(d.in), d.out, x.size());
        else
            cu::quantize_e5m2_cvt_satfinite(static_cast<const float*>(d.in), d.out, x.size());
        cu::copy_to_host(codes.data(), d.out, codes.size());
        const Policy p = fp8kit::emu::profile_policy(fp8kit::emu::Profile::cuda_satfinite, f).policy;
        const auto r = check(x, codes, f, p);
        INFO(fp8kit::name(f) << "\n" << r.summary());
        CHECK(r.exact());
        CHECK(fp8kit::describe_consistency(r).find("cuda-satfinite") != std::string::npos);
    }
}
