// amax traces: the CSV reader and the nvidia-dlfw-inspect log reader, each forced, and the
// by-content dispatch between them.
#include <cstdint>
#include <cstdlib>

#include "fp8kit/io/trace.hpp"
#include "fuzz_input_file.hpp"

namespace {

void check(const fp8kit::trace::Trace& t) {
    for (const auto& s : t.series) {
        if (s.steps.size() != s.amax.size() || s.steps.size() != s.lines.size()) std::abort();
        for (std::size_t i = 1; i < s.steps.size(); ++i)
            if (s.steps[i] <= s.steps[i - 1]) std::abort();  // documented: strictly increasing
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fp8kit::fuzz::InputFile file(data, size);
    using namespace fp8kit::trace;
    for (auto* reader : {&read_csv, &read_dlfw_log, &read_trace}) {
        try {
            check(reader(file.path()));
        } catch (const TraceError&) {}
    }
    return 0;
}
