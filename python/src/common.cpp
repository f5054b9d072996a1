#include <fmt/format.h>

#include <stdexcept>

#include "bindings.hpp"
#include "fp8kit/convert/policy_args.hpp"
#include "fp8kit/emu/emu.hpp"

namespace fp8kit::py {

Format require_format(const std::string& s, const char* arg) {
    const auto f = parse_format(s);
    if (!f)
        throw std::invalid_argument(fmt::format("{}: unknown format '{}' (choose from {})", arg, s, format_choices()));
    return *f;
}

Wide require_wide(const std::string& s, const char* arg) {
    const auto w = parse_wide(s);
    if (!w) throw std::invalid_argument(fmt::format("{}: unknown type '{}' (choose from {})", arg, s, wide_choices()));
    return *w;
}

Policy resolve_policy(Format format, Wide from, const OptStr& profile, const OptStr& round, const OptStr& overflow,
                      const OptStr& nan) {
    return fp8kit::resolve_policy(format, from, PolicyArgs{profile, round, overflow, nan}, ArgStyle::python);
}

const void* contiguous_data(const pyb::array& a, std::size_t itemsize, const char* arg) {
    if (!(a.flags() & pyb::array::c_style))
        throw std::invalid_argument(fmt::format("{}: array must be C-contiguous", arg));
    if (static_cast<std::size_t>(a.itemsize()) != itemsize)
        throw std::invalid_argument(
            fmt::format("{}: elements of {} bytes expected, got {}", arg, itemsize, a.itemsize()));
    return a.data();
}

std::vector<pyb::ssize_t> shape_of(const pyb::array& a) {
    return std::vector<pyb::ssize_t>(a.shape(), a.shape() + a.ndim());
}

}  // namespace fp8kit::py
