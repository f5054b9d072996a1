// What sweep's report writers share: the tensor classes in report order, and the per-series rows
// made and written through ReportOptions::over.
#pragma once

#include <algorithm>
#include <cstdio>

#include "fp8kit/analysis/sweep_report.hpp"

namespace fp8kit::sweep {

inline constexpr Role kClasses[] = {Role::activation, Role::weight, Role::gradient};

// The index of a series' class in kClasses (an unclassed series counts as an activation).
inline int class_index(Role cls) { return cls == Role::weight ? 1 : cls == Role::gradient ? 2 : 0; }

// Rank 0's bytes to `out` (the other ranks only make rows).
inline void write_bytes(const std::string& bytes, std::FILE* out) { std::fwrite(bytes.data(), 1, bytes.size(), out); }

// make's rows of every series, written to `out` in series order: through o.over, or here.
inline void write_series_rows(const ReportOptions& o, std::size_t series, const MakeRows& make, std::FILE* out) {
    const WriteRows write = [out](const std::string& bytes) { write_bytes(bytes, out); };
    if (o.over) return o.over(series, make, write);
    for (std::size_t first = 0; first < series; first += Sweep::kSeriesGroup)
        write(make(first, std::min(series, first + Sweep::kSeriesGroup)));
}

}  // namespace fp8kit::sweep
