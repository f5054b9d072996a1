// JSON written in pieces for outputs too large to build as one nlohmann::json (sweep's rows of
// 10^5 tensors): numbers and strings are spelled by nlohmann's own routines, so a row written
// here is byte-identical to dump(-1, ' ', false, error_handler_t::replace) of the same object
// (whose keys nlohmann sorts: a writer lists them in that order).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace fp8kit::io::json_out {

// A finite double as nlohmann writes it (its shortest round-trip form: "1.0", "1e-05").
inline void number(fmt::memory_buffer& b, double v) {
    char tmp[64];
    const char* end = nlohmann::detail::to_chars(tmp, tmp + sizeof tmp, v);
    b.append(tmp, end);
}

// A statistic that may be non-finite: NaN, +-Inf -> "nan", "inf", "-inf" (strings), as every
// report writes them (fp8kit/io/json_number.hpp).
inline void stat(fmt::memory_buffer& b, double v) {
    if (std::isnan(v))
        b.append(std::string_view("\"nan\""));
    else if (std::isinf(v))
        b.append(std::string_view(v > 0 ? "\"inf\"" : "\"-inf\""));
    else
        number(b, v);
}

// An integer as "{}" writes it (written straight into the buffer: sweep writes 10^8 of them).
template <typename Int>
inline void integer(fmt::memory_buffer& b, Int v) {
    const fmt::format_int f(v);
    b.append(f.data(), f.data() + f.size());
}

// A string with nlohmann's escaping (invalid UTF-8 replaced by U+FFFD, as dump(..., replace)).
inline void string(fmt::memory_buffer& b, std::string_view s) {
    const std::string q = nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    b.append(q.data(), q.data() + q.size());
}

// Writes into a span of `b` reserved beforehand (`Row r(b, 1024); ...; r.done();`): literal
// pieces are fixed-size copies and numbers are written in place, without a call per piece
// into the buffer (sweep --json writes 6.3 million rows of 17 fields at 10^5 tensors).
class Row {
public:
    Row(fmt::memory_buffer& b, std::size_t most) : b_(b), start_(b.size()) {
        b_.resize(start_ + most);
        p_ = b_.data() + start_;
    }
    template <std::size_t N>
    void lit(const char (&s)[N]) {
        std::memcpy(p_, s, N - 1);
        p_ += N - 1;
    }
    template <typename Int>
    void integer(Int v) {
        const fmt::format_int f(v);
        std::memcpy(p_, f.data(), f.size());
        p_ += f.size();
    }
    void stat(double v) {  // as json_out::stat
        if (std::isnan(v))
            lit("\"nan\"");
        else if (std::isinf(v))
            v > 0 ? lit("\"inf\"") : lit("\"-inf\"");
        else
            p_ = nlohmann::detail::to_chars(p_, p_ + 64, v);
    }
    // `size` bytes of `slot`, copied as N bytes (a constant-size copy, no library call): the
    // source holds N readable bytes and the reserved span N from here (io::FieldTable's keys).
    template <std::size_t N>
    void slot(const char* slot, std::size_t size) {
        std::memcpy(p_, slot, N);
        p_ += size;
    }
    void done() { b_.resize(static_cast<std::size_t>(p_ - b_.data())); }

private:
    fmt::memory_buffer& b_;
    std::size_t start_;
    char* p_;
};

// "key": (keys are literals here, no escaping needed); `first` puts no comma before it.
inline void key(fmt::memory_buffer& b, std::string_view k, bool first = false) {
    b.append(std::string_view(first ? "\"" : ",\""));
    b.append(k);
    b.append(std::string_view("\":"));
}

}  // namespace fp8kit::io::json_out
