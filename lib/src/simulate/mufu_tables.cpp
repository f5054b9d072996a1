// The MUFU.RCP / MUFU.SQRT tables of numerics/fast_math.hpp, inflated once from the gzip streams
// compiled into the library (cmake/fp8kitEmbed.cmake, lib/data/mufu_sm90_*.i8.gz).
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <zlib.h>

#include "fp8kit/simulate.hpp"

namespace fp8kit::embedded {
extern const unsigned char mufu_sm90_rcp[];
extern const std::size_t mufu_sm90_rcp_size;
extern const unsigned char mufu_sm90_sqrt[];
extern const std::size_t mufu_sm90_sqrt_size;
}  // namespace fp8kit::embedded

namespace fp8kit::simulate {
namespace {

// A whole gzip member (zlib's 16 + 15 window bits: gzip header and CRC-32 checked), which must
// inflate to exactly `want` bytes.
std::vector<std::int8_t> gunzip(const unsigned char* in, std::size_t size, std::size_t want, const char* what) {
    std::vector<std::int8_t> out(want + 1);
    z_stream z{};
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw std::runtime_error("zlib could not start");
    z.next_in = const_cast<unsigned char*>(in);
    z.avail_in = static_cast<uInt>(size);
    z.next_out = reinterpret_cast<unsigned char*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    const int rc = inflate(&z, Z_FINISH);
    const std::size_t got = out.size() - z.avail_out;
    inflateEnd(&z);
    if (rc != Z_STREAM_END || got != want)
        throw std::runtime_error(
            fmt::format("the built-in {} table is damaged (zlib {}, {} of {} bytes)", what, rc, got, want));
    out.resize(want);
    return out;
}

}  // namespace

const numerics::fast_math::MufuTables& mufu_sm90_tables() {
    namespace fm = numerics::fast_math;
    static const std::vector<std::int8_t> rcp =
        gunzip(embedded::mufu_sm90_rcp, embedded::mufu_sm90_rcp_size, fm::kRcpEntries, "MUFU.RCP");
    static const std::vector<std::int8_t> sqrt =
        gunzip(embedded::mufu_sm90_sqrt, embedded::mufu_sm90_sqrt_size, fm::kSqrtEntries, "MUFU.SQRT");
    static const fm::MufuTables tables{rcp.data(), sqrt.data()};
    return tables;
}

}  // namespace fp8kit::simulate
