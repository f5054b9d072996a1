// The "re:" patterns of a compressed-tensors config (its ignore list and config_groups targets,
// compressed_tensors/utils/match.py: Python `re`), matched against module names without
// backtracking.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace fp8kit::checkpoint::detail {

// The pattern in POSIX extended syntax, or nullopt where ERE cannot say it (lookaround, named
// groups, inline flags, back-references, escapes such as \n or \A): \d and \D become classes,
// (?:...) a group, lazy quantifiers greedy ones (the same names match either way).
std::optional<std::string> python_re_to_ere(std::string_view pattern);

// Whether `pattern` (Python syntax) matches somewhere in `name`, as re.search does. Run by glibc's
// regexec, whose matcher does not backtrack: std::regex took minutes on a config's
// "re:(.*.*)*zq" (tests/cli/adversarial.sh). A pattern that cannot be translated or compiled
// matches nothing (as std::regex_error did).
bool re_search(std::string_view pattern, const std::string& name);

}  // namespace fp8kit::checkpoint::detail
