// A listing as bytes; see listing_wire.hpp. Little-endian fixed-width integers, strings as a
// length and their bytes, a trailing magic so that a cut-off stream is never taken as whole.
#include "io/listing_wire.hpp"

#include <cstdint>
#include <cstring>

namespace fp8kit::dump::detail {
namespace {

constexpr std::uint64_t kEnd = 0x464b4c5354454e44ull;  // "DNETSLKF": end of a whole listing

void put(std::string& o, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) o.push_back(static_cast<char>(v >> (8 * i)));
}
void put(std::string& o, const std::string& s) {
    put(o, s.size());
    o += s;
}

struct Reader {
    const std::string& b;
    std::size_t at = 0;
    bool ok = true;
    std::uint64_t u() {
        if (b.size() - at < 8) return ok = false, 0;
        std::uint64_t v = 0;
        for (int i = 0; i < 8; ++i) v |= std::uint64_t(static_cast<unsigned char>(b[at + i])) << (8 * i);
        at += 8;
        return v;
    }
    std::string s() {
        const std::uint64_t n = u();
        if (!ok || b.size() - at < n) return ok = false, std::string();
        std::string r = b.substr(at, n);
        at += n;
        return r;
    }
};

void put_problems(std::string& o, const std::vector<Problem>& v) {
    put(o, v.size());
    for (const auto& p : v) put(o, p.file), put(o, p.name), put(o, p.message);
}
void get_problems(Reader& r, std::vector<Problem>& v) {
    const std::uint64_t n = r.u();
    for (std::uint64_t i = 0; r.ok && i < n; ++i) {
        Problem p;
        p.file = r.s(), p.name = r.s(), p.message = r.s();
        v.push_back(std::move(p));
    }
}

}  // namespace

std::string encode_listing(const Listing& l) {
    std::string o;
    put(o, l.tensors.size());
    for (const auto& t : l.tensors) {
        put(o, t.file), put(o, t.name), put(o, t.shape.size());
        for (auto d : t.shape) put(o, d);
        put(o, t.numel), put(o, t.storage);
        put(o, static_cast<std::uint64_t>(t.dtype)), put(o, static_cast<std::uint64_t>(t.wide));
        put(o, t.step.has_value()), put(o, static_cast<std::uint64_t>(t.step.value_or(0)));
        put(o, t.step_guessed), put(o, static_cast<std::uint64_t>(t.role)), put(o, t.role_guessed);
    }
    put_problems(o, l.errors);
    put_problems(o, l.notes);
    put(o, l.extents.size());
    for (const auto& e : l.extents) put(o, e.addr), put(o, e.bytes);
    put(o, kEnd);
    return o;
}

bool decode_listing(const std::string& bytes, Listing& out) {
    Reader r{bytes};
    Listing l;
    const std::uint64_t n = r.u();
    for (std::uint64_t i = 0; r.ok && i < n; ++i) {
        TensorInfo t;
        t.file = r.s(), t.name = r.s();
        const std::uint64_t rank = r.u();
        for (std::uint64_t k = 0; r.ok && k < rank; ++k) t.shape.push_back(r.u());
        t.numel = r.u(), t.storage = r.s();
        t.dtype = static_cast<DType>(r.u()), t.wide = static_cast<Wide>(r.u());
        const bool has_step = r.u() != 0;
        const auto step = static_cast<std::int64_t>(r.u());
        if (has_step) t.step = step;
        t.step_guessed = r.u() != 0, t.role = static_cast<Role>(r.u()), t.role_guessed = r.u() != 0;
        l.tensors.push_back(std::move(t));
    }
    get_problems(r, l.errors);
    get_problems(r, l.notes);
    const std::uint64_t ne = r.u();
    if (ne != 0 && ne != l.tensors.size()) return false;
    for (std::uint64_t i = 0; r.ok && i < ne; ++i) {
        Extent e;
        e.addr = r.u(), e.bytes = r.u();
        l.extents.push_back(e);
    }
    if (!r.ok || r.u() != kEnd || !r.ok || r.at != bytes.size()) return false;
    out = std::move(l);
    return true;
}

}  // namespace fp8kit::dump::detail
