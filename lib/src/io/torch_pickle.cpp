// The non-executing pickle interpreter (see torch_pickle.hpp). Opcode meanings: CPython's
// Lib/pickletools.py (the `opcodes` table) and Lib/pickle.py (_Unpickler.load_*).
#include "io/torch_pickle.hpp"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include <fmt/format.h>

#include "fp8kit/io/printable.hpp"

namespace fp8kit::dump::detail {
namespace {

// Globals a torch.save of a TransformerEngine DumpTensors dict references.
constexpr std::string_view kCallables[] = {
    "torch._utils._rebuild_tensor_v2",  // torch/_utils.py (a tensor over a typed storage)
    "torch._utils._rebuild_tensor_v3",  // torch/_utils.py: the dtypes of torch.storage._new_dtypes()
    "torch._utils._rebuild_tensor",
    "torch._utils._rebuild_parameter",  // nn.Parameter (weights)
    "torch.Size",
    "collections.OrderedDict",  // _rebuild_tensor_v2's backward_hooks
    // TransformerEngine: Float8Tensor.__reduce_ex__ and its relatives
    // (transformer_engine/pytorch/tensor/{float8,mxfp8,nvfp4,float8_blockwise}_tensor.py) and the
    // enums they carry: tex.DType reduces to (DType, (int,))
    // (transformer_engine/common/util/pybind_helper.h), DType in transformer_engine/pytorch/constants.py
    // is an IntEnum, reduced the same way.
    "transformer_engine.pytorch.tensor.float8_tensor._make_float8_tensor_in_reduce_ex",
    "transformer_engine.pytorch.tensor.mxfp8_tensor._make_mxfp8_tensor_in_reduce_ex",
    "transformer_engine.pytorch.tensor.nvfp4_tensor._make_nvfp4_tensor_in_reduce_ex",
    "transformer_engine.pytorch.tensor.float8_blockwise_tensor._make_float8_blockwise_tensor_in_reduce_ex",
    "transformer_engine_torch.DType",
    "transformer_engine.pytorch.constants.DType",
    // TE 2.15: __reduce_ex__ returns the bound classmethod Cls._make_in_reduce_ex, which pickles as
    // getattr(Cls, "_make_in_reduce_ex") (Python's method.__reduce__); Machine::reduce turns exactly
    // that REDUCE into the names below, with the argument tuples of the 2.16 reconstructors.
    "transformer_engine.pytorch.tensor.float8_tensor.Float8Tensor._make_in_reduce_ex",
    "transformer_engine.pytorch.tensor.mxfp8_tensor.MXFP8Tensor._make_in_reduce_ex",
    "transformer_engine.pytorch.tensor.nvfp4_tensor.NVFP4Tensor._make_in_reduce_ex",
    "transformer_engine.pytorch.tensor.float8_blockwise_tensor.Float8BlockwiseQTensor._make_in_reduce_ex",
};
// The TE tensor classes whose bound classmethod TE 2.15 pickles; values only (never called or
// constructed): the first argument of getattr.
constexpr std::string_view kTensorClasses[] = {
    "transformer_engine.pytorch.tensor.float8_tensor.Float8Tensor",
    "transformer_engine.pytorch.tensor.mxfp8_tensor.MXFP8Tensor",
    "transformer_engine.pytorch.tensor.nvfp4_tensor.NVFP4Tensor",
    "transformer_engine.pytorch.tensor.float8_blockwise_tensor.Float8BlockwiseQTensor",
};
bool is_getattr(std::string_view q) { return q == "__builtin__.getattr" || q == "builtins.getattr"; }

// A dtype a newer torch may add ("torch.float6_e3m2fn_x4"): torch.<float|int|uint|bits|complex|
// bcomplex|bfloat><lowercase, digits, _>, at most 48 characters. Accepted as a value only (REDUCE
// and NEWOBJ take only the allow-lists above), so a tensor of a dtype fp8kit does not know is
// skipped with a note instead of refusing its file.
bool future_dtype(std::string_view q) {
    if (q.size() > 48 || q.substr(0, 6) != "torch.") return false;
    const std::string_view n = q.substr(6);
    bool known_prefix = false;
    for (std::string_view p : {"float", "int", "uint", "bits", "complex", "bcomplex", "bfloat"})
        known_prefix = known_prefix || n.substr(0, p.size()) == p;
    if (!known_prefix) return false;
    for (char c : n)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
    return true;
}
// Classes NEWOBJ may name: the quantizer objects TE 2.16+ puts in its MXFP8, NVFP4 and blockwise
// argument tuples (transformer_engine/pytorch/tensor/*_tensor.py __reduce_ex__: self._quantizer).
// They pickle by object.__reduce_ex__(2): NEWOBJ (cls, ()) then BUILD with their __dict__
// (NVFP4Quantizer.__getstate__ drops amax_reduction_group). Only recorded, never constructed.
constexpr std::string_view kClasses[] = {
    "transformer_engine.pytorch.tensor.mxfp8_tensor.MXFP8Quantizer",
    "transformer_engine.pytorch.tensor.nvfp4_tensor.NVFP4Quantizer",
    "transformer_engine.pytorch.tensor.float8_blockwise_tensor.Float8BlockQuantizer",
    "transformer_engine.pytorch.tensor.float8_tensor.Float8Quantizer",
    "transformer_engine.pytorch.tensor.float8_tensor.Float8CurrentScalingQuantizer",
};
constexpr std::string_view kValues[] = {
    // torch dtypes (a dtype pickles as the global torch.<name>)
    "torch.float64",
    "torch.float32",
    "torch.float16",
    "torch.bfloat16",
    "torch.float8_e4m3fn",
    "torch.float8_e5m2",
    "torch.float8_e4m3fnuz",
    "torch.float8_e5m2fnuz",
    "torch.float8_e8m0fnu",
    "torch.uint8",
    "torch.int8",
    "torch.int16",
    "torch.int32",
    "torch.int64",
    "torch.bool",
    // the dtypes torch pickles through _rebuild_tensor_v3 over an untyped storage
    // (torch/storage.py _new_dtypes, torch/_tensor.py _reduce_ex_internal; torch >= 2.2)
    "torch.float4_e2m1fn_x2",
    "torch.uint16",
    "torch.uint32",
    "torch.uint64",
    "torch.bits8",
    "torch.bits16",
    "torch.bits1x8",
    "torch.bits2x4",
    "torch.bits4x2",
    "torch.complex32",
    "torch.bcomplex32",
    // storage types (torch/serialization.py persistent_id: the typed storage's class)
    "torch.UntypedStorage",
    "torch.storage.UntypedStorage",
    "torch.DoubleStorage",
    "torch.FloatStorage",
    "torch.HalfStorage",
    "torch.BFloat16Storage",
    "torch.ByteStorage",
    "torch.CharStorage",
    "torch.ShortStorage",
    "torch.IntStorage",
    "torch.LongStorage",
    "torch.BoolStorage",
    "torch.Float8_e4m3fnStorage",
    "torch.Float8_e5m2Storage",
    "torch.Float8_e4m3fnuzStorage",
    "torch.Float8_e5m2fnuzStorage",
    "torch.Float8_e8m0fnuStorage",
};

std::string_view opcode_name(std::uint8_t op) {
    static const std::unordered_map<std::uint8_t, std::string_view> kNames = {{'b', "BUILD"},
                                                                              {0x81, "NEWOBJ"},
                                                                              {0x92, "NEWOBJ_EX"},
                                                                              {'i', "INST"},
                                                                              {'o', "OBJ"},
                                                                              {'P', "PERSID"},
                                                                              {'I', "INT"},
                                                                              {'L', "LONG"},
                                                                              {'F', "FLOAT"},
                                                                              {'S', "STRING"},
                                                                              {'V', "UNICODE"},
                                                                              {'p', "PUT"},
                                                                              {'g', "GET"},
                                                                              {'U', "SHORT_BINSTRING"},
                                                                              {'T', "BINSTRING"},
                                                                              {'B', "BINBYTES"},
                                                                              {'C', "SHORT_BINBYTES"},
                                                                              {0x8e, "BINBYTES8"},
                                                                              {0x8b, "LONG4"},
                                                                              {0x82, "EXT1"},
                                                                              {0x83, "EXT2"},
                                                                              {0x84, "EXT4"},
                                                                              {0x8f, "EMPTY_SET"},
                                                                              {0x90, "ADDITEMS"},
                                                                              {0x91, "FROZENSET"},
                                                                              {0x96, "BYTEARRAY8"},
                                                                              {0x97, "NEXT_BUFFER"},
                                                                              {0x98, "READONLY_BUFFER"},
                                                                              {'l', "LIST"},
                                                                              {'d', "DICT"},
                                                                              {'2', "DUP"}};
    const auto it = kNames.find(op);
    return it == kNames.end() ? std::string_view("unknown") : it->second;
}

class Machine {
public:
    Machine(const std::uint8_t* d, std::size_t n, const std::string& what) : d_(d), n_(n), what_(what) {}
    PRef run();

private:
    [[noreturn]] void fail(const std::string& msg) const {
        throw PickleError(fmt::format("{}: pickle byte {}: {}", what_, op_at_, msg));
    }
    const std::uint8_t* take(std::size_t k) {
        if (k > n_ - at_) fail("truncated pickle (ends inside an opcode)");
        const std::uint8_t* p = d_ + at_;
        at_ += k;
        return p;
    }
    std::uint64_t le(std::size_t k) {
        const std::uint8_t* p = take(k);
        std::uint64_t v = 0;
        for (std::size_t b = k; b-- > 0;) v = (v << 8) | p[b];
        return v;
    }
    std::string line() {
        const std::size_t end = std::min(n_, at_ + 512);
        for (std::size_t k = at_; k < end; ++k)
            if (d_[k] == '\n') {
                std::string s(reinterpret_cast<const char*>(d_ + at_), k - at_);
                at_ = k + 1;
                return s;
            }
        fail("GLOBAL name without an end of line (truncated, or longer than 512 bytes)");
    }
    PRef pop() {
        if (stack_.size() <= floor()) fail("stack underflow");
        PRef v = std::move(stack_.back());
        stack_.pop_back();
        return v;
    }
    std::size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
    std::vector<PRef> pop_mark() {
        if (marks_.empty()) fail("no MARK for this opcode");
        std::vector<PRef> v(std::make_move_iterator(stack_.begin() + marks_.back()),
                            std::make_move_iterator(stack_.end()));
        stack_.resize(marks_.back());
        marks_.pop_back();
        return v;
    }
    PRef& top() {
        if (stack_.size() <= floor()) fail("stack underflow");
        return stack_.back();
    }
    void push(PRef v) {
        if (stack_.size() >= (std::size_t(1) << 22)) fail("more than 4 Mi values on the stack");
        stack_.push_back(std::move(v));
    }
    static PRef make(PValue::Kind k) {
        auto v = std::make_shared<PValue>();
        v->kind = k;
        return v;
    }
    // Places `child` inside `parent`: the child is frozen and the depth is bounded.
    void adopt(PValue& parent, PValue& child) {
        child.frozen = true;
        parent.depth = std::max(parent.depth, child.depth + 1);
        if (parent.depth > kMaxDepth) fail(fmt::format("values nested more than {} deep", kMaxDepth));
    }
    PRef tuple(std::vector<PRef> items) {
        PRef t = make(PValue::Kind::tuple);
        for (auto& c : items) adopt(*t, *c);
        t->items = std::move(items);
        return t;
    }
    PValue& mutable_top(PValue::Kind want, const char* op) {
        PValue& c = *top();
        if (c.kind != want) fail(fmt::format("{} on {}", op, describe(c)));
        if (c.frozen) fail(fmt::format("{} changes a container already placed in another value", op));
        return c;
    }
    void memo_put(std::uint64_t k) {
        if (memo_.size() >= (std::size_t(1) << 20) && !memo_.count(k)) fail("more than 1 Mi memo entries");
        memo_[k] = top();
    }
    PRef memo_get(std::uint64_t k) {
        const auto it = memo_.find(k);
        if (it == memo_.end()) fail(fmt::format("memo key {} was never stored", k));
        return it->second;
    }
    void global(const std::string& module, const std::string& name);
    void reduce();
    void persistent_id();
    void string(std::size_t len);
    bool step(std::uint8_t op);

    const std::uint8_t* d_;
    std::size_t n_, at_ = 0, op_at_ = 0;
    const std::string& what_;
    std::vector<PRef> stack_;
    std::vector<std::size_t> marks_;
    std::unordered_map<std::uint64_t, PRef> memo_;
};

void Machine::global(const std::string& module, const std::string& name) {
    const std::string q = module + "." + name;
    if (!allowed_global(q))
        fail(
            fmt::format("refused global {} (only torch tensor/storage/dtype globals, collections.OrderedDict and "
                        "TransformerEngine's reconstructors are accepted; nothing is executed)",
                        io::quoted(q, 160)));
    PRef g = make(PValue::Kind::global);
    g->text = q;
    push(std::move(g));
}

void Machine::reduce() {
    PRef args = pop(), fn = pop();
    if (fn->kind == PValue::Kind::global && is_getattr(fn->text)) {
        // TE 2.15's bound classmethod: getattr(<TE tensor class>, "_make_in_reduce_ex") becomes the
        // name "<class>._make_in_reduce_ex" (a value; nothing is looked up or called). Any other
        // getattr is refused.
        const auto& a = args->items;
        const bool ok =
            args->kind == PValue::Kind::tuple && a.size() == 2 && a[0]->kind == PValue::Kind::global &&
            std::find(std::begin(kTensorClasses), std::end(kTensorClasses), a[0]->text) != std::end(kTensorClasses) &&
            a[1]->kind == PValue::Kind::string && a[1]->text == "_make_in_reduce_ex";
        if (!ok)
            fail(
                fmt::format("REDUCE of getattr{}: refused (only TransformerEngine 2.15's getattr(<TE tensor class>, "
                            "'_make_in_reduce_ex') is read, as a name; nothing is executed)",
                            args->kind == PValue::Kind::tuple && !a.empty() ? " of " + describe(*a[0]) : ""));
        PRef g = make(PValue::Kind::global);
        g->text = a[0]->text + "._make_in_reduce_ex";
        push(std::move(g));
        return;
    }
    if (fn->kind != PValue::Kind::global || !allowed_callable(fn->text))
        fail(fmt::format("REDUCE of {}: refused (nothing is executed)", describe(*fn)));
    if (args->kind != PValue::Kind::tuple) fail(fmt::format("REDUCE arguments are {}, not a tuple", describe(*args)));
    PRef o = make(PValue::Kind::object);
    o->text = fn->text;
    for (auto& c : args->items) adopt(*o, *c);
    o->items = args->items;
    push(std::move(o));
}

// torch/serialization.py _save persistent_id: ('storage', storage_type, key, location, numel).
void Machine::persistent_id() {
    PRef pid = pop();
    const auto& it = pid->items;
    const bool ok = pid->kind == PValue::Kind::tuple && it.size() == 5 && it[0]->kind == PValue::Kind::string &&
                    it[0]->text == "storage" && it[1]->kind == PValue::Kind::global && it[1]->text.size() > 7 &&
                    it[1]->text.compare(it[1]->text.size() - 7, 7, "Storage") == 0 &&
                    it[2]->kind == PValue::Kind::string && it[3]->kind == PValue::Kind::string &&
                    it[4]->kind == PValue::Kind::integer && it[4]->i >= 0;
    if (!ok)
        fail(fmt::format("persistent id {} is not torch's ('storage', type, key, location, numel)", describe(*pid)));
    PRef s = make(PValue::Kind::storage);
    s->text = it[1]->text;
    s->key = it[2]->text;
    s->i = it[4]->i;
    push(std::move(s));
}

void Machine::string(std::size_t len) {
    if (len > n_ - at_) fail("truncated pickle (a string runs past its end)");
    PRef s = make(PValue::Kind::string);
    s->text.assign(reinterpret_cast<const char*>(take(len)), len);
    push(std::move(s));
}

// One opcode; false at STOP.
bool Machine::step(std::uint8_t op) {
    using K = PValue::Kind;
    switch (op) {
        case 0x80: {  // PROTO
            const auto p = le(1);
            if (p < 2 || p > 5) fail(fmt::format("pickle protocol {} (2 to 5 are read)", p));
            return true;
        }
        case 0x95: le(8); return true;  // FRAME: a length hint only
        case '.': return false;         // STOP
        case '(': marks_.push_back(stack_.size()); return true;
        case '0': pop(); return true;       // POP
        case '1': pop_mark(); return true;  // POP_MARK
        case '}': push(make(K::dict)); return true;
        case ']': push(make(K::list)); return true;
        case ')': push(tuple({})); return true;
        case 't': push(tuple(pop_mark())); return true;
        case 0x85:
        case 0x86:
        case 0x87: {  // TUPLE1..3
            std::vector<PRef> v(op - 0x84);
            for (std::size_t k = v.size(); k-- > 0;) v[k] = pop();
            push(tuple(std::move(v)));
            return true;
        }
        case 'q': memo_put(le(1)); return true;
        case 'r': memo_put(le(4)); return true;
        case 0x94: memo_put(memo_.size()); return true;  // MEMOIZE
        case 'h': push(memo_get(le(1))); return true;
        case 'j': push(memo_get(le(4))); return true;
        case 'c': {
            const std::string module = line();
            global(module, line());
            return true;
        }
        case 0x93: {  // STACK_GLOBAL
            PRef name = pop(), module = pop();
            if (module->kind != K::string || name->kind != K::string) fail("STACK_GLOBAL of non-strings");
            global(module->text, name->text);
            return true;
        }
        case 'X': string(le(4)); return true;
        case 0x8c: string(le(1)); return true;
        case 0x8d: string(le(8)); return true;
        case 'J':
        case 'K':
        case 'M':
        case 0x8a: {
            PRef v = make(K::integer);
            if (op == 'J')
                v->i = static_cast<std::int32_t>(le(4));
            else if (op == 'K')
                v->i = static_cast<std::int64_t>(le(1));
            else if (op == 'M')
                v->i = static_cast<std::int64_t>(le(2));
            else {  // LONG1: n bytes, little-endian two's complement
                const auto k = le(1);
                if (k > 8) fail(fmt::format("LONG1 of {} bytes (integers up to 64 bits are read)", k));
                const std::uint64_t u = k == 0 ? 0 : le(k);
                v->i = k == 0 || k == 8 ? static_cast<std::int64_t>(u)
                                        : static_cast<std::int64_t>(u << (64 - 8 * k)) >> (64 - 8 * k);
            }
            push(std::move(v));
            return true;
        }
        case 'N': push(make(K::none)); return true;
        case 0x88:
        case 0x89: {
            PRef v = make(K::boolean);
            v->i = op == 0x88;
            push(std::move(v));
            return true;
        }
        case 'G': {  // BINFLOAT: big-endian float64
            const std::uint8_t* p = take(8);
            std::uint64_t u = 0;
            for (int b = 0; b < 8; ++b) u = (u << 8) | p[b];
            PRef v = make(K::floating);
            std::memcpy(&v->f, &u, 8);
            push(std::move(v));
            return true;
        }
        case 's':
        case 'u': {  // SETITEM, SETITEMS
            std::vector<PRef> kv;
            if (op == 's') {
                PRef v = pop(), k = pop();
                kv = {std::move(k), std::move(v)};
            } else {
                kv = pop_mark();
            }
            if (kv.size() % 2) fail("SETITEMS with an odd number of values");
            PValue& d = mutable_top(K::dict, op == 's' ? "SETITEM" : "SETITEMS");
            for (std::size_t k = 0; k < kv.size(); k += 2) {
                adopt(d, *kv[k]);
                adopt(d, *kv[k + 1]);
                d.entries.emplace_back(kv[k], kv[k + 1]);
            }
            return true;
        }
        case 'a':
        case 'e': {  // APPEND, APPENDS
            std::vector<PRef> v;
            if (op == 'a')
                v.push_back(pop());
            else
                v = pop_mark();
            PValue& l = mutable_top(K::list, op == 'a' ? "APPEND" : "APPENDS");
            for (auto& c : v) adopt(l, *c);
            l.items.insert(l.items.end(), v.begin(), v.end());
            return true;
        }
        case 'R': reduce(); return true;
        case 0x81: {  // NEWOBJ: cls.__new__(cls, *args), recorded only
            if (stack_.size() < floor() + 2) fail("refused opcode NEWOBJ (0x81) without a class and arguments");
            PRef args = pop(), cls = pop();
            if (cls->kind != K::global || !allowed_class(cls->text))
                fail(
                    fmt::format("NEWOBJ of {}: refused (only TransformerEngine's quantizer classes are read, as "
                                "data; nothing is executed)",
                                describe(*cls)));
            if (args->kind != K::tuple) fail(fmt::format("NEWOBJ arguments are {}, not a tuple", describe(*args)));
            PRef o = make(K::instance);
            o->text = cls->text;
            for (auto& c : args->items) adopt(*o, *c);
            o->items = args->items;
            push(std::move(o));
            return true;
        }
        case 'b': {  // BUILD: the state of a fresh NEWOBJ instance, kept as its entries
            if (stack_.size() < floor() + 2) fail("refused opcode BUILD (0x62) without an object and a state");
            PRef state = pop();
            PValue& o = *top();
            if (o.kind != K::instance || o.frozen || o.i)
                fail(
                    fmt::format("BUILD on {}: refused (only a TransformerEngine quantizer just made by NEWOBJ takes "
                                "a state)",
                                describe(o)));
            if (state->kind != K::dict) fail(fmt::format("BUILD state is {}, not a dict", describe(*state)));
            adopt(o, *state);
            o.entries = state->entries;
            o.i = 1;
            return true;
        }
        case 'Q': persistent_id(); return true;
        default:
            fail(fmt::format("refused opcode {} (0x{:02x}): not part of what torch.save writes, or could run code",
                             opcode_name(op), op));
    }
}

PRef Machine::run() {
    while (true) {
        op_at_ = at_;
        if (at_ >= n_) fail("truncated pickle (no STOP)");
        if (!step(*take(1))) break;
    }
    if (!marks_.empty() || stack_.size() != 1) fail("STOP with an unbalanced stack");
    return stack_.back();
}

}  // namespace

bool allowed_callable(std::string_view q) {
    return std::find(std::begin(kCallables), std::end(kCallables), q) != std::end(kCallables);
}

bool allowed_class(std::string_view q) {
    return std::find(std::begin(kClasses), std::end(kClasses), q) != std::end(kClasses);
}

bool allowed_global(std::string_view q) {
    return allowed_callable(q) || allowed_class(q) || is_getattr(q) || future_dtype(q) ||
           std::find(std::begin(kTensorClasses), std::end(kTensorClasses), q) != std::end(kTensorClasses) ||
           std::find(std::begin(kValues), std::end(kValues), q) != std::end(kValues);
}

std::string describe(const PValue& v) {
    using K = PValue::Kind;
    switch (v.kind) {
        case K::none: return "None";
        case K::boolean: return v.i ? "True" : "False";
        case K::integer: return fmt::format("the integer {}", v.i);
        case K::floating: return fmt::format("the float {}", v.f);
        case K::string: return fmt::format("the string {}", io::quoted(v.text, 60));
        case K::tuple: return fmt::format("a tuple of {}", v.items.size());
        case K::list: return fmt::format("a list of {}", v.items.size());
        case K::dict: return fmt::format("a dict of {}", v.entries.size());
        case K::global: return v.text;
        case K::object: return fmt::format("{}(...)", v.text);
        case K::storage: return fmt::format("a {} ({} elements)", v.text, v.i);
        case K::instance: return fmt::format("a {} object", v.text);
    }
    return "?";
}

PRef unpickle(const std::uint8_t* data, std::size_t n, const std::string& what) { return Machine(data, n, what).run(); }

}  // namespace fp8kit::dump::detail
