// Numbers and strings as Python's csv and json modules write them, for files that the Python
// package writes from C++ (the monitor's stats.csv and stats.json) byte for byte as those modules
// would: a reader of one run's files cannot tell which side wrote a row. A string CSV field needs
// nothing of its own: csv.writer's default dialect (QUOTE_MINIMAL) quotes exactly as every CSV of
// fp8kit does, io::csv_field (io/printable.hpp).
#pragma once

#include <string>
#include <string_view>

namespace fp8kit::io {

// `v` as Python's repr() writes a float (Objects/floatobject.c float_repr: PyOS_double_to_string
// with format code 'r' and Py_DTSF_ADD_DOT_0; the layout is Python/pystrtod.c format_float_short):
// the shortest digits d1 d2 ... dn that read back to `v`, with decpt the decimal exponent of
// 0.d1d2...dn. Positional when -4 < decpt <= 16, an integer getting ".0" (1e15 -> 1000000000000000.0,
// 0.0001 -> 0.0001); otherwise d1.d2...dn, 'e', a sign and at least two exponent digits (1e-05,
// 1.5e+16). Non-finite values as repr() writes them: nan, inf, -inf (`json`: NaN, Infinity,
// -Infinity, as json.dumps(allow_nan=True) writes them).
void append_python_float(std::string& out, double v, bool json = false);

// `s` (UTF-8) as json.dumps writes a str (ensure_ascii=True, Lib/json/encoder.py
// py_encode_basestring_ascii, ESCAPE_ASCII): in double quotes; '"', '\\', '\n', '\r', '\t', '\b', '\f'
// as their two-character escapes; every other character outside ' ' .. '~' (DEL included) as
// \uXXXX in lowercase hex, characters past U+FFFF as a UTF-16 surrogate pair. Returns false
// (leaving `out` as it was) when `s` is not valid UTF-8.
bool append_python_json_string(std::string& out, std::string_view s);

}  // namespace fp8kit::io
