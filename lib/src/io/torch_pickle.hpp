// A pickle interpreter that never executes anything (not installed), for torch.save's data.pkl.
//
// It interprets the opcodes of protocols 2 to 5 itself (the ones torch.save and Python's pickle
// emit for dicts, tuples, lists, numbers, strings, globals, REDUCE and persistent ids; Python's
// Lib/pickletools.py documents each) and builds a tree of plain values. A GLOBAL is accepted only
// when its exact "module.name" is in the allow-list below; REDUCE of an allowed callable records
// the callable's name and its arguments as data and calls nothing. Any other global, REDUCE of
// a non-callable, NEWOBJ of a class not in the allow-list, BUILD of anything but such a fresh
// object with a dict, INST/OBJ, protocol-0/1 text opcodes, or an unknown opcode is a PickleError
// naming the opcode or the global and its byte offset. NEWOBJ of an allowed class (TE's quantizers,
// which pickle as copyreg.__newobj__ plus their __dict__) records the class and its state as data:
// no constructor and no __setstate__ runs. builtins.getattr is accepted only as REDUCE of
// getattr(<TE tensor class>, "_make_in_reduce_ex") (TE 2.15's bound classmethod), which yields the
// name "<class>._make_in_reduce_ex" as a value: nothing is looked up.
//
// Memory and depth are bounded: values nest at most kMaxDepth deep, a container cannot be changed
// after it has been placed in another (so no cycles), and the input is read once.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fp8kit::dump::detail {

struct PickleError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct PValue;
using PRef = std::shared_ptr<PValue>;

struct PValue {
    enum class Kind : std::uint8_t {
        none,
        boolean,
        integer,
        floating,
        string,
        tuple,
        list,
        dict,
        global,    // an allowed global used as a value (a dtype, a storage type): text = "module.name"
        object,    // REDUCE of an allowed callable: text = its "module.name", items = its arguments
        storage,   // a persistent id ('storage', type, key, location, numel): text = type, key, numel
        instance,  // NEWOBJ of an allowed class (a TE quantizer): text = its "module.name", items = the
                   // NEWOBJ arguments, entries = the BUILD state dict (i = 1 once built)
    };
    Kind kind = Kind::none;
    std::int64_t i = 0;  // integer, boolean; storage: numel
    double f = 0;
    std::string text;         // string, global, object (callable), storage (storage type "module.name")
    std::string key;          // storage: the data/<key> entry
    std::vector<PRef> items;  // tuple, list, object arguments
    std::vector<std::pair<PRef, PRef>> entries;  // dict (also OrderedDict objects: none used)
    int depth = 1;
    bool frozen = false;  // placed inside another value: no longer changed
};

inline constexpr int kMaxDepth = 64;

// Interprets `n` bytes of pickle; `what` names the input in messages ("file.pt: data.pkl").
PRef unpickle(const std::uint8_t* data, std::size_t n, const std::string& what);

// The globals accepted, by exact name: torch's tensor rebuild functions, storage types and
// dtypes, torch.Size, collections.OrderedDict, TransformerEngine's reconstructors and DType enums,
// TE's four tensor classes and builtins.getattr (as values, for TE 2.15's bound classmethods).
bool allowed_global(std::string_view qualified);
bool allowed_callable(std::string_view qualified);  // the subset REDUCE may name
bool allowed_class(std::string_view qualified);     // the subset NEWOBJ may name

// The kind in a message: "a tuple", "an integer", "torch.Size(...)", ...
std::string describe(const PValue& v);

}  // namespace fp8kit::dump::detail
