// How the checks of a checkpoint folder add their findings to its report (check.cpp's Checker and
// kv_names.cpp's Names): a failure fails the check, a note does not.
#pragma once

#include <string>

#include "fp8kit/checkpoint.hpp"

namespace fp8kit::checkpoint::detail {

struct Findings {
    const Folder& F;
    Report& R;
    void fail(const std::string& tensor, const std::string& check, const std::string& message) {
        R.findings.push_back({tensor, check, message, true});
    }
    void note(const std::string& tensor, const std::string& check, const std::string& message) {
        R.findings.push_back({tensor, check, message, false});
    }
};

}  // namespace fp8kit::checkpoint::detail
