// The byte records ranks send each other (cluster/inspect.cpp, cluster/sweep.cpp): the raw bytes of
// trivially copyable fields. Every rank runs the same binary on the same kind of node, so binary64
// values travel bit for bit. lib/src only.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace fp8kit::cluster::detail {

template <class T>
void put(std::string& out, const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

inline void put_string(std::string& out, const std::string& s) {
    put<std::uint64_t>(out, s.size());
    out += s;
}

// Reads a record from `pos` on; a read past the end throws "fp8kit cluster: truncated <what>".
struct Reader {
    const std::string& in;
    std::size_t& pos;
    const char* what = "record";
    void need(std::size_t n) const {
        if (n > in.size() - pos) throw std::runtime_error(std::string("fp8kit cluster: truncated ") + what);
    }
    template <class T>
    T get() {
        static_assert(std::is_trivially_copyable_v<T>);
        need(sizeof(T));
        T v;
        std::memcpy(&v, in.data() + pos, sizeof v);
        pos += sizeof v;
        return v;
    }
    std::string get_string() {
        const auto n = get<std::uint64_t>();
        need(n);
        std::string s = in.substr(pos, n);
        pos += n;
        return s;
    }
};

}  // namespace fp8kit::cluster::detail
