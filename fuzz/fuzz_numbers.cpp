// The CLI's numeric arguments: values, codes, bit patterns, scales.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fp8kit/convert/names.hpp"
#include "fp8kit/convert/parse.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    if (auto v = fp8kit::parse_unsigned(text, 255); v && *v > 255) std::abort();
    if (auto v = fp8kit::parse_unsigned(text, ~0ull); v) (void)*v;
    if (auto d = fp8kit::parse_number(text); d && std::isinf(*d) && text.find_first_of("iI") == std::string_view::npos)
        std::abort();
    (void)fp8kit::parse_float32(text);
    (void)fp8kit::parse_format(text);
    (void)fp8kit::parse_rounding(text);
    (void)fp8kit::parse_profile(text);
    return 0;
}
