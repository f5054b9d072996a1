// What a writer that takes a FILE* wrote, read back from an unnamed temporary file (removed when
// closed): the lib reports' tests compare these bytes.
#pragma once

#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

template <class Write>
std::string written(Write write) {
    std::FILE* f = std::tmpfile();
    REQUIRE(f);
    write(f);
    std::string s(static_cast<std::size_t>(std::ftell(f)), '\0');
    std::rewind(f);
    REQUIRE(std::fread(s.data(), 1, s.size(), f) == s.size());
    std::fclose(f);
    return s;
}
