// Names and text that come from files, made safe to print: control characters escaped (a name
// must not retitle or clear a terminal, nor forge a report line with a newline) and quoted input
// cut to a bounded length (a 10 MB attribute is not echoed whole in an error message).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace fp8kit::io {

// `s` with every control character (C0, DEL, and the C1 range of UTF-8: U+0080..U+009F) written
// as a C escape: \n, \t, \r, \e (ESC), \0 (NUL), \xHH or \u00HH. Other bytes, UTF-8 and
// backslashes included, pass unchanged. The CLI applies it to every line of human-readable
// output (JSON and CSV escape by their own rules); library messages stay unescaped.
std::string printable(std::string_view s);

// The one quoting function for untrusted text in a message (a tensor name, an attribute, a
// dtype, a path): `s` cut to its first `max` bytes, ending "... (N bytes)" when cut, with its
// control characters escaped as printable() does (so printable() of the result is the result:
// applying it again where the message is printed changes nothing).
std::string quoted(std::string_view s, std::size_t max = 200);

// The inputs a message is about, each quoted: "'a'", "'a', 'b'", "'a', 'b', 'c' and 4 more" (at
// most `shown` named), so that a command's "nothing to do" error names what it was given.
std::string quoted_list(const std::vector<std::string>& items, std::size_t shown = 3);

// One CSV field (RFC 4180): quoted, with inner quotes doubled, when it holds a separator, a quote
// or a line break; as it is otherwise. Names are never cut.
std::string csv_field(std::string_view s);

// `name` as the first cell of a table row whose name column is `width` characters wide and starts
// at column `indent`. A name that fits is padded to the width. A longer one is never cut (neighbours
// such as layers.3.q_proj and layers.13.q_proj must stay apart): it is written whole, then the row
// continues on the next line at column indent + width, so the other columns stay aligned. width 0:
// no column (the name alone). Control characters are escaped first (printable), so the result is
// safe to print.
std::string name_cell(std::string_view name, std::size_t width, std::size_t indent);

}  // namespace fp8kit::io
