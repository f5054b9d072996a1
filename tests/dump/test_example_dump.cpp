// The committed dump of a real training run (scripts/fixtures/make_example_dump.py): the listing, the
// metadata, and every value compared with a plain whole-dataset H5Dread done here, plus a few
// elements as h5py 3.16 reads them.
#include <map>
#include <set>

#include "dump_test_util.hpp"

using namespace fp8kit;
using namespace fp8kit::dump;
using namespace fp8kit::dump::test;

namespace {

const std::string kPath = std::string(FP8KIT_DATA_DIR) + "/example/llama_tiny_dump.h5";

std::vector<std::uint64_t> raw_bits(const std::string& name) { return h5_raw_bits(kPath, name); }

}  // namespace

TEST_CASE("example dump: listing, shapes, steps and roles", "[dump]") {
    Dump dump({kPath});
    CHECK(dump.errors().empty());
    CHECK(dump.notes().empty());
    const auto& ts = dump.tensors();
    // 3 steps x 15 Linear modules x 6 tensors, plus lm_head/weight_fp8 at each step.
    REQUIRE(ts.size() == 273);
    CHECK(ts.front().name == "step_000000/lm_head/exp_avg");
    CHECK(ts.back().name == "step_000299/model.layers.1.self_attn.v_proj/wgrad");
    std::map<Role, int> roles;
    std::set<std::int64_t> steps;
    for (const auto& t : ts) {
        INFO(t.name);
        CHECK(t.file == kPath);
        REQUIRE(t.step.has_value());
        CHECK_FALSE(t.step_guessed);  // every dataset has a step attribute
        CHECK_FALSE(t.role_guessed);
        // The attribute and the name agree in this dump.
        CHECK(guess_step(t.name) == t.step);
        CHECK(guess_role(t.name) == t.role);
        steps.insert(*t.step);
        ++roles[t.role];
    }
    CHECK(steps == std::set<std::int64_t>{0, 100, 299});
    CHECK(roles[Role::activation] == 90);
    CHECK(roles[Role::gradient] == 90);
    CHECK(roles[Role::weight] == 48);
    CHECK(roles[Role::optimizer_state] == 45);

    const std::string q = "step_000100/model.layers.1.self_attn.q_proj/";
    auto get = [&](const std::string& n) {
        const auto* t = find(ts, n);
        REQUIRE(t);
        return *t;
    };
    auto t = get(q + "input");
    CHECK(t.shape == std::vector<std::uint64_t>{1, 128, 64});
    CHECK(t.dtype == DType::bf16);
    CHECK(t.storage == "uint16");
    CHECK(t.role == Role::activation);
    t = get(q + "output");
    CHECK(t.dtype == DType::bf16);
    CHECK(t.storage == "opaque2");
    t = get(q + "grad_output");
    CHECK(t.dtype == DType::f16);
    CHECK(t.role == Role::gradient);
    t = get(q + "weight");
    CHECK(t.shape == std::vector<std::uint64_t>{64, 64});
    CHECK(t.dtype == DType::f32);
    CHECK(t.role == Role::weight);
    t = get(q + "exp_avg");
    CHECK(t.role == Role::optimizer_state);
    t = get("step_000299/lm_head/weight_fp8");
    CHECK(t.shape == std::vector<std::uint64_t>{256, 64});
    CHECK(t.dtype == DType::e4m3);
    CHECK(t.wide == Wide::f32);
    CHECK(t.role == Role::weight);
    CHECK(t.step == 299);
    const auto* mlp = find(ts, "step_000000/model.layers.0.mlp.down_proj/input");
    REQUIRE(mlp);
    CHECK(mlp->shape == std::vector<std::uint64_t>{1, 128, 192});
}

TEST_CASE("example dump: elements as h5py reads them", "[dump]") {
    Dump dump({kPath});
    auto bits_of = [&](const std::string& name) {
        for (std::size_t i = 0; i < dump.tensors().size(); ++i)
            if (dump.tensors()[i].name == name)
                return collect([&](const ChunkFn& fn) { dump.read(i, fn); }, dump.tensors()[i], 1 << 20).bits;
        FAIL("no tensor " << name);
        return std::vector<std::uint64_t>{};
    };
    // Literals printed by h5py 3.16 (numpy views as uint16/uint32, ml_dtypes for float8).
    const std::string q = "step_000100/model.layers.1.self_attn.q_proj/";
    auto b = bits_of(q + "input");
    CHECK(b[0] == 0xbf87);
    CHECK(b[1] == 0x3e92);
    CHECK(b[4099] == 0xbf73);
    CHECK(b[8191] == 0x3de7);
    b = bits_of(q + "output");
    CHECK(b[0] == 0xbf9f);
    CHECK(b[1] == 0xc043);
    CHECK(b[4099] == 0xc03b);
    CHECK(b[8191] == 0xbfe0);
    b = bits_of(q + "grad_output");
    CHECK(b[0] == 0x0);
    CHECK(b[4099] == 0x22);
    b = bits_of(q + "weight");
    CHECK(b[0] == 0x3d9cff8a);
    CHECK(b[1] == 0x3dc83918);
    CHECK(b[2051] == 0x3d8cb83c);
    CHECK(b[4095] == 0x3be5c0f9);
    b = bits_of(q + "wgrad");
    CHECK(b[0] == 0xba1c0000);
    CHECK(b[4095] == 0x39d50000);
    b = bits_of(q + "exp_avg");
    CHECK(b[0] == 0xb7dc36ab);
    CHECK(b[2051] == 0xb6646d39);
    // weight_fp8 codes 0x22, 0x19, 0x10 are 0.15625, 0.0703125, 0.03125 (ml_dtypes).
    b = bits_of("step_000299/lm_head/weight_fp8");
    CHECK(b[0] == f32_bits(0.15625f));
    CHECK(b[1] == f32_bits(0.0703125f));
    CHECK(b[5000] == f32_bits(0.03125f));
    CHECK(b[16383] == f32_bits(0.03125f));
}

TEST_CASE("example dump: every tensor equals a whole-dataset read, in any chunk size", "[dump]") {
    for (std::size_t chunk_bytes : {std::size_t(3000), std::size_t(16) << 20}) {
        ReadOptions opts;
        opts.chunk_bytes = chunk_bytes;
        Dump dump({kPath}, {}, opts);
        std::size_t mismatched = 0, multi_chunk = 0;
        for (std::size_t i = 0; i < dump.tensors().size(); ++i) {
            const auto& t = dump.tensors()[i];
            const auto got = collect([&](const ChunkFn& fn) { dump.read(i, fn); }, t, chunk_bytes);
            multi_chunk += got.chunks > 1;
            auto want = raw_bits(t.name);
            if (const auto f = fp8_format(t.dtype))
                for (auto& w : want) w = emu::decode(*f, Wide::f32, static_cast<std::uint8_t>(w));
            if (got.bits != want) {
                ++mismatched;
                UNSCOPED_INFO("mismatch in " << t.name);
            }
        }
        INFO("chunk_bytes " << chunk_bytes);
        CHECK(mismatched == 0);
        if (chunk_bytes < 4096) CHECK(multi_chunk == dump.tensors().size());
    }
}
