// validate's way of reading one tensor (`--input/--output file.h5:/x` through load_array,
// `model.safetensors:x` through load_safetensors), run on every tensor a listing names: each call
// opens the file again and lists only that tensor, which is a different path through the reader
// than inspect's listing of the whole file. Bounded: at most kMaxTensors calls per input, and
// only tensors of at most 2^20 elements (a few bytes of header can claim 2^40 elements of fill
// value, which would only show up as a timeout).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "fp8kit/io/array_file.hpp"
#include "fp8kit/io/dump.hpp"

namespace fp8kit::fuzz {

constexpr std::size_t kMaxTensors = 16;

// The names to load: the tensors a listing offers (small ones) and the datasets it skipped or
// refused (validate must refuse them too, without reading anything), in listing order.
inline std::vector<std::string> names_to_validate(const dump::Source& src) {
    std::vector<std::string> names;
    for (const auto& t : src.tensors())
        if (t.numel <= (std::uint64_t(1) << 20) && names.size() < kMaxTensors) names.push_back(t.name);
    for (const auto* list : {&src.errors(), &src.notes()})
        for (const auto& p : *list)
            if (!p.name.empty() && names.size() < kMaxTensors) names.push_back(p.name);
    return names;
}

// Loads each name as validate does. An ArrayFileError (or the reader's DumpError) is the
// expected answer to a bad tensor; a load that succeeds must hold exactly its shape's bytes.
inline void load_each_as_validate(const std::string& path, const std::vector<std::string>& names, bool hdf5,
                                  const dump::ReadOptions& opts) {
    for (const std::string& n : names) {
        try {
            const ArrayFile a = hdf5 ? load_array(path + ":/" + (!n.empty() && n[0] == '/' ? n.substr(1) : n), {}, opts)
                                     : load_safetensors(path + ":" + n, path, n, opts);
            std::size_t count = 1;
            for (std::size_t d : a.shape) count *= d;
            if (a.data.size() != count * element_size(a.type)) std::abort();
            if (a.codes_format && a.type != ElementType::u8) std::abort();
        } catch (const std::exception&) {}
    }
}

}  // namespace fp8kit::fuzz
