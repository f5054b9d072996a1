// torch.save archives and pickles broken every way: truncated at every byte, bytes flipped, and
// pickles crafted to run code. Nothing may crash, hang, or read outside the archive.

#include <cstring>

#include "exercise.hpp"
#include "fp8kit/io/te_debug.hpp"

using namespace fp8kit::corrupt;

namespace {

const std::string kGood =
    std::string(FP8KIT_DATA_DIR) + "/te/dumps/tensor_dumps/rank_0/layers_0_fc1_activation_iter_000010.pt";

std::string slurp(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// The good archive with its data.pkl replaced by `pkl` of the same length (padded with STOP-
// following bytes the interpreter never reaches): entry sizes and offsets stay valid.
std::string with_pickle(const std::string& pkl) {
    std::string z = slurp(kGood);
    const std::size_t at = z.find('\x80');  // data.pkl is the first entry; it starts with PROTO
    REQUIRE(at != std::string::npos);
    REQUIRE(pkl.size() <= 495);
    z.replace(at, pkl.size(), pkl);
    return z;
}

std::string refused(const std::string& pkl, const std::string& name) {
    const Outcome o = exercise(write_file(name, with_pickle(pkl)));
    REQUIRE(o.file_error);
    REQUIRE(o.errors.size() == 1);
    return o.errors[0];
}

}  // namespace

// The bytes that carry structure: the first entry's header and data.pkl, and the central
// directory at the end (the storages' payloads between them are plain numbers).
bool structural(std::size_t i, std::size_t size) { return i < 700 || i + 800 >= size; }

TEST_CASE("torch: truncated at every offset", "[corrupt]") {
    const std::string full = slurp(kGood);
    REQUIRE(exercise(write_file("pt_full.pt", full)).tensors_read == 2);
    for (std::size_t n = 0; n < full.size(); ++n) {
        if (!structural(n, full.size()) && n % 16 != 0) continue;
        const Outcome o = exercise(write_file("pt_trunc.pt", full.substr(0, n)));
        INFO(n);
        CHECK((o.file_error || !o.errors.empty()));
    }
}

TEST_CASE("torch: every byte flipped", "[corrupt]") {
    const std::string full = slurp(kGood);
    for (std::size_t i = 0; i < full.size(); ++i) {
        if (!structural(i, full.size())) continue;
        std::string bad = full;
        bad[i] = static_cast<char>(bad[i] ^ 0xff);
        exercise(write_file("pt_flip.pt", bad));  // any outcome but a crash or an escape
    }
}

TEST_CASE("torch: pickles that would run code are refused by name", "[corrupt]") {
    CHECK_THAT(refused(std::string("\x80\x02"
                                   "cos\nsystem\nX\x02\x00\x00\x00id\x85R.",
                                   23),
                       "p1.pt"),
               Catch::Contains("refused global os.system"));
    CHECK_THAT(refused(std::string("\x80\x04\x8c\x08"
                                   "builtins\x8c\x04"
                                   "exec\x93.",
                                   20),
                       "p2.pt"),
               Catch::Contains("refused global builtins.exec"));
    // An allowed value global called: torch.float32 is a dtype, not a callable.
    CHECK_THAT(refused(std::string("\x80\x02"
                                   "ctorch\nfloat32\n)R.",
                                   20),
                       "p3.pt"),
               Catch::Contains("REDUCE of torch.float32"));
    CHECK_THAT(refused(std::string("\x80\x02}b.", 5), "p4.pt"), Catch::Contains("refused opcode BUILD"));
    CHECK_THAT(refused(std::string("\x80\x02(i__main__\nX\n.", 16), "p5.pt"), Catch::Contains("refused opcode INST"));
    CHECK_THAT(refused(std::string("\x80\x02)\x81.", 5), "p6.pt"), Catch::Contains("refused opcode NEWOBJ"));
    // NEWOBJ and BUILD are read only for TransformerEngine's quantizer classes, as data.
    CHECK_THAT(refused(std::string("\x80\x02"
                                   "ctorch\nfloat32\n)\x81.",
                                   20),
                       "p6b.pt"),
               Catch::Contains("NEWOBJ of torch.float32: refused"));
    CHECK_THAT(refused(std::string("\x80\x02"
                                   "cos\nsystem\n)\x81.",
                                   16),
                       "p6c.pt"),
               Catch::Contains("refused global os.system"));
    CHECK_THAT(refused(std::string("\x80\x02}}b.", 6), "p6d.pt"), Catch::Contains("BUILD on a dict of 0: refused"));
    // getattr is read only as TE 2.15's getattr(<TE tensor class>, "_make_in_reduce_ex"), as a
    // name: any other attribute or object is refused.
    static const char kOtherAttr[] =
        "\x80\x02"
        "c__builtin__\ngetattr\n"
        "ctransformer_engine.pytorch.tensor.mxfp8_tensor\nMXFP8Tensor\n"
        "X\x08\x00\x00\x00__init__\x86R.";
    CHECK_THAT(refused(std::string(kOtherAttr, sizeof kOtherAttr - 1), "p6e.pt"),
               Catch::Contains("REDUCE of getattr of transformer_engine.pytorch.tensor.mxfp8_tensor.MXFP8Tensor: "
                               "refused"));
    static const char kOtherObject[] =
        "\x80\x02"
        "c__builtin__\ngetattr\n"
        "ccollections\nOrderedDict\n"
        "X\x12\x00\x00\x00_make_in_reduce_ex\x86R.";
    CHECK_THAT(refused(std::string(kOtherObject, sizeof kOtherObject - 1), "p6f.pt"),
               Catch::Contains("REDUCE of getattr of collections.OrderedDict: refused"));
    static const char kGetattrCalled[] =
        "\x80\x02"
        "c__builtin__\ngetattr\n"
        "ctransformer_engine.pytorch.tensor.mxfp8_tensor\nMXFP8Tensor\n"
        "X\x12\x00\x00\x00_make_in_reduce_ex\x86R"
        ")R.";  // the name made by getattr, called with no arguments: not a layout TE writes
    CHECK_THAT(refused(std::string(kGetattrCalled, sizeof kGetattrCalled - 1), "p6g.pt"),
               Catch::Contains("MXFP8Tensor reconstructed from 0 arguments"));
    // A list placed inside itself (a cycle) and values nested deeper than the limit.
    CHECK_THAT(refused(std::string("\x80\x02]q\x00]h\x00"
                                   "a0h\x00"
                                   "a.",
                                   14),
                       "p7.pt"),
               Catch::Contains("already placed in another value"));
    CHECK_THAT(refused("\x80\x02" + std::string(100, ']') + std::string(99, 'a') + ".", "p8.pt"),
               Catch::Contains("nested more than"));
    CHECK_THAT(refused(std::string("\x80\x02h\x07.", 5), "p9.pt"), Catch::Contains("memo key 7 was never stored"));
}
