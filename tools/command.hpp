// The fp8kit CLI: each subcommand lives in its own cmd_*.cpp and registers itself here.
#pragma once

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fp8kit/convert/names.hpp"

namespace fp8kit::cli {

// Bad input from the user (argument, file, dataset): one line on stderr, exit status 2.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// A subcommand's callback stores its exit status here (0 unless it has something to report).
int& exit_status();

using Setup = std::function<void(CLI::App& root)>;
std::vector<Setup>& registry();
struct Register {
    explicit Register(Setup s) { registry().push_back(std::move(s)); }
};

// --profile | --round --overflow --nan, shared by every command that converts.
struct PolicyOptions {
    std::string profile, round, overflow, nan;
    void add_to(CLI::App* cmd);
    // The policy for `format`, or UsageError naming the missing or conflicting option.
    Policy resolve(Format format, Wide from) const;
    std::string describe(Format format, Wide from) const;  // "profile cuda-satfinite: nearest-even, ..."
};

// lib's parse_X(name) (each enum's names table), its std::invalid_argument as a UsageError
// naming the option: "--hop: unknown hop arithmetic 'x' (choose from half, float32)".
template <class Parse>
auto parse_named(Parse parse, const std::string& s, const char* option) {
    try {
        return parse(s);
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string(option) + ": " + e.what());
    }
}

Format require_format(const std::string& s, const char* option);
Wide require_wide(const std::string& s, const char* option);

// Double rendered so it reads back as the same binary64 ("%.17g", trimmed).
std::string exact(double v);

}  // namespace fp8kit::cli
