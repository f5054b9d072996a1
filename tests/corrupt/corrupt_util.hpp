// Writing corrupt inputs (byte-level, independent of the readers) and running the CLI on them.
#pragma once

#include <stdlib.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "scratch_dir.hpp"

namespace fp8kit::corrupt {

// One temporary directory per test process, removed at exit (tests/scratch_dir.hpp).
inline const std::string& scratch_dir() {
    struct Tag {};
    return test::process_scratch<Tag>("fp8kit_corrupt").path();
}
inline std::string scratch(const std::string& name) { return scratch_dir() + "/" + name; }

inline std::string write_file(const std::string& name, const std::string& bytes) {
    const std::string path = scratch(name);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(out.good());
    return path;
}

inline std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

template <class T>
std::string raw(const std::vector<T>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// u64 little-endian header length, the header text as given (so it can lie), then the data.
inline std::string safetensors(const std::string& header, const std::string& data) {
    std::string out(8, '\0');
    std::uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    return out + header + data;
}

// A version 1.0 .npy file with the dictionary text as given.
inline std::string npy(const std::string& dict, const std::string& data) {
    std::string h = dict;
    while ((10 + h.size() + 1) % 64 != 0) h += ' ';
    h += '\n';
    std::string out = "\x93NUMPY\x01";
    out += '\0';
    out += static_cast<char>(h.size() & 0xff);
    out += static_cast<char>(h.size() >> 8);
    return out + h + data;
}

struct Run {
    int status;
    std::string out, err;
};

inline Run cli(const std::string& args) {
    const std::string o = scratch("stdout.txt"), e = scratch("stderr.txt");
    const int rc = std::system((std::string(FP8KIT_CLI) + " " + args + " >" + o + " 2>" + e).c_str());
    return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, read_file(o), read_file(e)};
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace fp8kit::corrupt
