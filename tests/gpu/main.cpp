// Catch2 main for the GPU tests: a machine without a usable CUDA device reports every test as
// skipped (exit 77 = SKIP_RETURN_CODE), never as passed. Listing tests needs no device.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <string>

#include "fp8kit/cuda/kernels.hpp"

int main(int argc, char** argv) {
    bool listing = false;
    for (int i = 1; i < argc; ++i)
        if (std::strncmp(argv[i], "--list", 6) == 0 || std::strcmp(argv[i], "-h") == 0 ||
            std::strcmp(argv[i], "--help") == 0)
            listing = true;
    if (!listing) {
        std::string why;
        if (fp8kit::cuda::device_count(&why) == 0) {
            std::printf("SKIPPED: no CUDA device: %s\n", why.c_str());
            return 77;
        }
        std::printf("device: %s\n", fp8kit::cuda::device_name().c_str());
    }
    return Catch::Session().run(argc, argv);
}
