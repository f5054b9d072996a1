// Printing names on a terminal: how wide it is, and how to shorten a name without losing the
// parts that tell it from its neighbours.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace fp8kit::cli {

// Columns available for one line of a table: the terminal's width when standard output is one,
// else $COLUMNS when set, else 0 (no limit: a file or a pipe gets whole names).
std::size_t output_width();

// `name` in at most `width` columns. When it must be cut, the tail (the leaf, e.g.
// "self.query.weight") and the first component holding a number (the layer index, "layer.3") are
// kept and "..." marks what was left out. width 0: no limit. Control characters are escaped first
// (io::printable), so the result is safe to print.
std::string fit_name(std::string_view name, std::size_t width);

}  // namespace fp8kit::cli
