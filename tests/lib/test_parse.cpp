// The strict number parsers of the command line (convert/parse.hpp): the whole text is a number,
// read correctly rounded (values from the C standard's strtod/strtof contract, worked by hand),
// or the answer is no.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>

#include "fp8kit/convert/parse.hpp"

using namespace fp8kit;

TEST_CASE("parse_number: whole decimal or hex-float text, overflow refused, underflow kept", "[lib]") {
    CHECK(parse_number("1.5") == 1.5);
    CHECK(parse_number("-0x1.8p-9") == -0x1.8p-9);
    CHECK(parse_number("0.1") == 0.1);
    CHECK(std::isinf(*parse_number("-inf")));
    CHECK(std::isnan(*parse_number("nan")));
    CHECK(parse_number("4.9406564584124654e-324") == std::numeric_limits<double>::denorm_min());
    CHECK(parse_number("1e-400") == 0.0);  // underflow: the correctly rounded zero
    CHECK_FALSE(parse_number("1e400"));    // overflow: not Inf
    CHECK_FALSE(parse_number(""));
    CHECK_FALSE(parse_number(" 1"));
    CHECK_FALSE(parse_number("1 "));
    CHECK_FALSE(parse_number("1x"));
    CHECK_FALSE(parse_number(std::string(4097, '1')));
}

TEST_CASE("parse_float32: rounded to float32 once, overflow refused, underflow kept", "[lib]") {
    CHECK(parse_float32("1.5") == 1.5f);
    CHECK(parse_float32("0.1") == 0.1f);
    CHECK(parse_float32("16777217") == 16777216.0f);
    CHECK(parse_float32("3.4028235e38") == std::numeric_limits<float>::max());
    CHECK(parse_float32("1e-50") == 0.0f);
    CHECK(std::isinf(*parse_float32("inf")));
    CHECK_FALSE(parse_float32("1e39"));
    CHECK_FALSE(parse_float32(""));
    CHECK_FALSE(parse_float32("\t2"));
    CHECK_FALSE(parse_float32("2.5f"));
}
