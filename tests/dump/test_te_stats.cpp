// TransformerEngine statistics logs (LogTensorStats, LogFp8TensorStats, LogNvfp4TensorStats):
// names split with the known tensor and stat names, every stat read, ranks combined only where
// the statistic allows it, the free-text log refused, and the cur_amax series fed to replay.
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <catch2/catch.hpp>

#include "dump_test_util.hpp"
#include "fp8kit/io/te_debug.hpp"
#include "fp8kit/io/trace.hpp"

using namespace fp8kit;

namespace {

// A line as nvdlfw_inspect's MetricLogger writes it for stats_buffer.py's log_scalar.
std::string line(const std::string& name, int iter, const std::string& value) {
    return fmt::format("{} \t\t\t\t iteration={:06d} \t\t\t\t value={}\n", name, iter, value);
}

std::string make_run() {
    const std::string root = dump::test::scratch("te_run");
    ::mkdir(root.c_str(), 0755);
    ::mkdir((root + "/nvdlfw_inspect_statistics_logs").c_str(), 0755);
    ::mkdir((root + "/nvdlfw_inspect_logs").c_str(), 0755);
    const std::string s = root + "/nvdlfw_inspect_statistics_logs/";
    dump::test::write_bytes(s + "nvdlfw_inspect_20261124-1200_globalrank-0.log",
                            line("decoder_layers_1_self_attention_linear_qkv_activation_cur_amax", 1, "3.5000") +
                                line("decoder_layers_1_self_attention_linear_qkv_activation_min", 1, "-3.5000") +
                                line("decoder_layers_1_self_attention_linear_qkv_activation_mean", 1, "0.0100") +
                                line("model_fc1_gradient_mxfp8_scale_inv_min_columnwise", 1, "0.0039") +
                                line("model_fc1_gradient_underflows%", 1, "1.5000") +
                                line("model_fc1_weight_max_blockwise_dynamic_range_block_size_32_dims_1", 1, "7.2500") +
                                line("decoder_layers_1_self_attention_linear_qkv_activation_cur_amax", 2, "4.0000"));
    dump::test::write_bytes(s + "nvdlfw_inspect_20261124-1200_globalrank-1.log",
                            line("decoder_layers_1_self_attention_linear_qkv_activation_cur_amax", 1, "5.2500") +
                                line("decoder_layers_1_self_attention_linear_qkv_activation_min", 1, "-1.0000") +
                                line("decoder_layers_1_self_attention_linear_qkv_activation_mean", 1, "0.0300"));
    // The free-text log of the same name: never read as statistics.
    dump::test::write_bytes(root + "/nvdlfw_inspect_logs/nvdlfw_inspect_globalrank-0.log",
                            "INFO - Default logging to file enabled at ./log\nLayer name: fc1\n");
    return root;
}

}  // namespace

TEST_CASE("te stats: names split with the known tensor and stat lists", "[dump]") {
    auto a = te::split_stat_name("decoder_layers_1_mlp_fc1_activation_cur_amax");
    REQUIRE(a);
    CHECK(a->layer == "decoder_layers_1_mlp_fc1");
    CHECK(a->tensor == "activation");
    CHECK(a->stat == "cur_amax");
    auto b = te::split_stat_name("fc2_wgrad_fp8_current_scaling_underflows%");
    REQUIRE(b);
    CHECK(b->layer == "fc2");
    CHECK(b->tensor == "wgrad");
    CHECK(b->recipe == "fp8_current_scaling");
    CHECK(b->stat == "underflows%");
    auto c =
        te::split_stat_name("layer_weight_output_mxfp8_scale_inv_max_columnwise");  // "weight" inside the layer name
    REQUIRE(c);
    CHECK(c->layer == "layer_weight");
    CHECK(c->tensor == "output");
    CHECK(c->recipe == "mxfp8");
    CHECK(c->stat == "scale_inv_max");
    CHECK(c->columnwise);
    auto d = te::split_stat_name("x_gradient_dynamic_range_bottom");
    REQUIRE(d);
    CHECK(d->stat == "dynamic_range_bottom");
    auto e = te::split_stat_name("qkv_dgrad_nvfp4_mse");
    REQUIRE(e);
    CHECK(e->recipe == "nvfp4");
    CHECK(e->stat == "mse");
    CHECK_FALSE(te::split_stat_name("fc1_activation_median"));  // not a TE stat
    CHECK_FALSE(te::split_stat_name("_activation_max"));        // no layer
}

TEST_CASE("te stats: ranks combined where the statistic allows it", "[dump]") {
    const std::string root = make_run();
    const auto files = te::find_stats_logs(root);
    REQUIRE(files.size() == 2);  // nvdlfw_inspect_logs/ is not searched
    std::vector<te::StatsLog> logs;
    for (const auto& f : files) logs.push_back(te::read_stats_log(f));
    CHECK(logs[0].rank == 0);
    CHECK(logs[1].rank == 1);
    CHECK(logs[0].lines.size() == 7);
    const auto series = te::combine_ranks(logs);
    auto find = [&](const std::string& stat, std::optional<int> rank) -> const te::StatSeries* {
        for (const auto& s : series)
            if (s.parts.stat == stat && s.parts.layer == "decoder_layers_1_self_attention_linear_qkv" && s.rank == rank)
                return &s;
        return nullptr;
    };
    const auto* amax = find("cur_amax", std::nullopt);
    REQUIRE(amax);
    CHECK(amax->ranks == 2);
    CHECK(amax->steps == std::vector<std::int64_t>{1, 2});
    CHECK(amax->values == std::vector<double>{5.25, 4.0});  // MAX over the ranks at step 1
    const auto* mn = find("min", std::nullopt);
    REQUIRE(mn);
    CHECK(mn->values == std::vector<double>{-3.5});  // MIN
    CHECK_FALSE(find("mean", std::nullopt));         // a mean needs counts: kept per rank
    REQUIRE(find("mean", 0));
    REQUIRE(find("mean", 1));
    CHECK(find("mean", 1)->values == std::vector<double>{0.03});

    // The free-text log is not a statistics log.
    CHECK_THROWS_WITH(te::read_stats_log(root + "/nvdlfw_inspect_logs/nvdlfw_inspect_globalrank-0.log"),
                      Catch::Contains("no statistics lines"));
    // replay reads the folder: the combined cur_amax series.
    const auto tr = trace::read_te_stats(root);
    REQUIRE(tr.series.size() == 1);
    CHECK(tr.series[0].tensor == "decoder_layers_1_self_attention_linear_qkv_activation");
    CHECK(tr.series[0].amax == std::vector<float>{5.25f, 4.0f});
}

TEST_CASE("te stats: a malformed statistics line is named", "[dump]") {
    const std::string p = dump::test::scratch("nvdlfw_inspect_globalrank-3.log");
    dump::test::write_bytes(p,
                            line("fc1_activation_max", 1, "1.0") + "fc1_activation_max \t iteration=x1 \t value=2\n");
    CHECK_THROWS_WITH(te::read_stats_log(p), Catch::Contains("globalrank-3.log:2: iteration= is not"));
    dump::test::write_bytes(p, line("fc1_activation_mean", 1, "1.0") + line("fc1_activation_mean", 1, "2.0"));
    CHECK_THROWS_WITH(te::combine_ranks({te::read_stats_log(p)}), Catch::Contains("logged twice by rank 3"));
}

TEST_CASE("te stats: significant digits of a logged value", "[dump]") {
    CHECK(te::significant_digits("0.0000") == 0);
    CHECK(te::significant_digits("0.0012") == 2);
    CHECK(te::significant_digits("-0.0123") == 3);
    CHECK(te::significant_digits("12.5000") == 6);
    CHECK(te::significant_digits("7.92742e-06") == te::kExact);  // exponent form: as written
    CHECK(te::significant_digits("3") == te::kExact);
    CHECK(te::unreadable("0.0000"));
    CHECK(te::unreadable("0.0012"));
    CHECK_FALSE(te::unreadable("0.0123"));
    CHECK_FALSE(te::unreadable("nan"));
    CHECK_FALSE(te::unreadable("1.5"));  // a short form from another writer is exact as written
    CHECK(te::unreadable("-0.0001"));
}

TEST_CASE("te stats: unknown names skipped with a note, means weighted by numel, coarse amax left out", "[dump]") {
    const std::string root = dump::test::scratch("te_run2");
    ::mkdir(root.c_str(), 0755);
    const std::string a = root + "/nvdlfw_inspect_globalrank-0.log", b = root + "/nvdlfw_inspect_globalrank-1.log";
    // As TE writes it: "%(asctime)s - %(levelname)s - " then the line, value with 4 decimals.
    auto tl = [](const std::string& n, int it, const std::string& v) {
        return "2026-11-29 01:00:00,000 - INFO - " + line(n, it, v);
    };
    dump::test::write_bytes(a, tl("fc1_activation_mean", 1, "1.0000") + tl("fc1_activation_numel", 1, "100.0000") +
                                   tl("fc1_activation_some_future_stat", 1, "3.0000") +
                                   tl("fc1_gradient_cur_amax", 1, "0.0000") + tl("fc1_gradient_cur_amax", 2, "0.0250") +
                                   tl("fc2_activation_max", 1, "2.5000") + tl("fc2_activation_min", 1, "-4.0000") +
                                   tl("fc1_activation_dynamic_range_top", 1, "3.0000") +
                                   tl("fc1_activation_sum", 1, "100.0000"));
    dump::test::write_bytes(b, tl("fc1_activation_mean", 1, "4.0000") + tl("fc1_activation_numel", 1, "300.0000") +
                                   tl("fc1_gradient_cur_amax", 1, "0.0001") + tl("fc1_gradient_cur_amax", 2, "0.0300") +
                                   tl("fc1_activation_dynamic_range_top", 1, "5.0000") +
                                   tl("fc1_activation_sum", 1, "1200.0000"));
    const auto run = te::read_run_stats(root);
    REQUIRE(run.files.size() == 2);
    REQUIRE(run.skipped.size() == 1);  // an item of the reports' "skipped", the file still read
    CHECK(run.skipped[0].file == a);
    CHECK(run.skipped[0].name == "fc1_activation_some_future_stat");
    CHECK_THAT(run.skipped[0].message, Catch::Contains("line 3") && Catch::Contains("not a statistic"));
    auto find = [&](const std::string& n, std::optional<int> rank) -> const te::StatSeries* {
        for (const auto& s : run.series)
            if (s.name == n && s.rank == rank) return &s;
        return nullptr;
    };
    const auto* mean = find("fc1_activation_mean", std::nullopt);
    REQUIRE(mean);
    CHECK(mean->ranks == 2);
    CHECK(mean->values == std::vector<double>{(100.0 * 1 + 300.0 * 4) / 400.0});  // 3.25
    const auto* top = find("fc1_activation_dynamic_range_top", std::nullopt);
    REQUIRE(top);
    CHECK(top->values == std::vector<double>{5.0});
    CHECK_FALSE(find("fc1_activation_sum", std::nullopt));  // a sum would double-count ranks of one group
    REQUIRE(find("fc1_activation_sum", 1));
    const auto* g = find("fc1_gradient_cur_amax", std::nullopt);
    REQUIRE(g);
    CHECK(g->values == std::vector<double>{0.0001, 0.03});
    CHECK_FALSE(g->readable(0));  // 0.0000 and 0.0001: too few digits
    CHECK(g->readable(1));

    // replay: the unreadable step is left out with a note, never read as 0; fc2 has no cur_amax,
    // so its amax is max(|max|, |min|).
    const auto tr = trace::read_te_stats(root);
    REQUIRE(tr.series.size() == 2);
    CHECK(tr.series[0].tensor == "fc1_gradient");
    CHECK(tr.series[0].steps == std::vector<std::int64_t>{2});
    CHECK(tr.series[0].amax == std::vector<float>{0.03f});
    CHECK(tr.series[1].tensor == "fc2_activation");
    CHECK(tr.series[1].amax == std::vector<float>{4.0f});
    bool noted = false;
    for (const auto& n : tr.notes)
        noted = noted || (n.find("fc1_gradient") != std::string::npos && n.find("unreadable") != std::string::npos);
    CHECK(noted);
    REQUIRE(tr.skipped.size() == 1);  // replay reports the unknown name in its "skipped"
    CHECK(tr.skipped[0].name == "fc1_activation_some_future_stat");

    // A single-file dlfw log: the same rule.
    const auto one = trace::read_dlfw_log(a);
    REQUIRE(one.series.size() == 1);
    CHECK(one.series[0].steps == std::vector<std::int64_t>{2});
    REQUIRE(one.notes.size() == 1);
    CHECK_THAT(one.notes[0], Catch::Contains("value=0.0000") && Catch::Contains("fewer than 3 significant digits"));
}

TEST_CASE("te stats: a file of only unknown statistics is read, every line skipped", "[dump]") {
    const std::string root = dump::test::scratch("te_run3");
    ::mkdir(root.c_str(), 0755);
    dump::test::write_bytes(root + "/nvdlfw_inspect_globalrank-0.log", line("fc1_activation_max", 4, "2.0000"));
    dump::test::write_bytes(
        root + "/nvdlfw_inspect_globalrank-1.log",
        line("fc1_activation_newstat", 4, "1.0000") + line("fc1_weight_other_newstat", 4, "1.0000"));
    const auto run = te::read_run_stats(root);
    REQUIRE(run.files.size() == 2);
    REQUIRE(run.skipped.size() == 2);
    CHECK(run.skipped[0].name == "fc1_activation_newstat");
    CHECK(run.skipped[1].name == "fc1_weight_other_newstat");
    REQUIRE(run.series.size() == 1);
    CHECK(run.series[0].values == std::vector<double>{2.0});
    CHECK(run.series[0].ranks == 1);
}

TEST_CASE("te stats: logs whose every line is skipped are an error naming the first", "[dump]") {
    // Was a report of "0 series" with exit 0 (tests/cli/adversarial.sh).
    const std::string root = dump::test::scratch("te_run_none");
    ::mkdir(root.c_str(), 0755);
    dump::test::write_bytes(root + "/nvdlfw_inspect_globalrank-0.log",
                            line("fc1_activation_newstat", 4, "1.0000") + line(std::string(100000, 'a'), 5, "1.0000"));
    try {
        te::read_run_stats(root);
        FAIL("read_run_stats accepted logs with no statistic");
    } catch (const std::runtime_error& e) {
        const std::string m = e.what();
        CHECK_THAT(m, Catch::Contains("no TransformerEngine statistic in 1 log file(s): 2 line(s) skipped") &&
                          Catch::Contains("fc1_activation_newstat"));
        CHECK(m.size() < 2000);
    }
}

TEST_CASE("te stats: the reports' JSON and CSV hold every statistic, how it combined and why not", "[dump]") {
    const std::string root = dump::test::scratch("te_run4");
    ::mkdir(root.c_str(), 0755);
    dump::test::write_bytes(root + "/nvdlfw_inspect_globalrank-0.log",
                            line("fc1_activation_max", 1, "2.0000") + line("fc1_activation_sum", 1, "10.0000") +
                                line("fc1_activation_std", 1, "0.5000") +
                                line("fc1_activation_mxfp8_underflows%_columnwise", 1, "1.2500") +
                                line("fc1_activation_max_blockwise_dynamic_range_block_size_32_dims_1", 1, "6.0000") +
                                line("fc1_activation_bogus", 1, "1.0000"));
    dump::test::write_bytes(root + "/nvdlfw_inspect_globalrank-1.log",
                            line("fc1_activation_max", 1, "inf") + line("fc1_activation_sum", 1, "12.0000") +
                                line("fc1_activation_max_blockwise_dynamic_range_block_size_32_dims_1", 1, "7.5000"));
    auto run = te::read_run_stats(root);
    const auto j = te::stats_json(run);
    REQUIRE(j["files"].size() == 2);
    REQUIRE(j["skipped"].size() == 1);
    CHECK(j["skipped"][0]["name"] == "fc1_activation_bogus");
    std::map<std::string, nlohmann::json> by;
    for (const auto& s : j["series"])
        by[s["name"].get<std::string>() + "@" + (s["rank"].is_null() ? "all" : s["rank"].dump())] = s;
    CHECK(by.size() == 6);  // max, blockwise (combined); sum on ranks 0 and 1, std, underflows% (per rank)
    CHECK(by.at("fc1_activation_max@all")["values"][0] == "inf");
    CHECK(by.at("fc1_activation_max@all")["combine"] == "max");
    CHECK(by.at("fc1_activation_max@all")["ranks"] == 2);
    const auto& bw = by.at("fc1_activation_max_blockwise_dynamic_range_block_size_32_dims_1@all");
    CHECK(bw["values"][0] == 7.5);
    CHECK(bw["stat"] == "max_blockwise_dynamic_range_block_size_32_dims_1");
    CHECK(by.at("fc1_activation_sum@0")["values"][0] == 10.0);
    CHECK(by.at("fc1_activation_sum@1")["values"][0] == 12.0);
    CHECK(by.at("fc1_activation_sum@1")["combine"] == "per rank");
    CHECK_THAT(by.at("fc1_activation_sum@1")["per_rank"].get<std::string>(), Catch::Contains("more than once"));
    CHECK_THAT(by.at("fc1_activation_std@0")["per_rank"].get<std::string>(), Catch::Contains("helper statistics"));
    const auto& u = by.at("fc1_activation_mxfp8_underflows%_columnwise@0");
    CHECK(u["recipe"] == "mxfp8");
    CHECK(u["stat"] == "underflows%");
    CHECK(u["columnwise"] == true);
    CHECK(u["values"][0] == 1.25);
    const std::string csv = te::stats_csv(run);
    CHECK_THAT(csv,
               Catch::StartsWith("step,name,layer,tensor,recipe,stat,columnwise,combine,rank,ranks,value,readable\n"));
    CHECK_THAT(csv, Catch::Contains("\n1,fc1_activation_max,fc1,activation,,max,0,max,,2,inf,1\n"));
    CHECK_THAT(csv, Catch::Contains("\n1,fc1_activation_sum,fc1,activation,,sum,0,per rank,1,1,12,1\n"));
    CHECK_THAT(csv,
               Catch::Contains("\n1,fc1_activation_mxfp8_underflows%_columnwise,fc1,activation,mxfp8,underflows%,1,"
                               "per rank,0,1,1.25,1\n"));
    te::keep_series(run, {"fc1_activation_s*"});
    REQUIRE(run.series.size() == 3);           // sum (ranks 0 and 1), std
    te::keep_series(run, {"fc1_activation"});  // {layer}_{tensor} matches too
    CHECK(run.series.size() == 3);
    te::keep_series(run, {"fc2_*"});
    CHECK(run.series.empty());
}

TEST_CASE("te stats: the table of fp8kit replay --stats", "[dump]") {
    const std::string root = dump::test::scratch("te_run5");
    ::mkdir(root.c_str(), 0755);
    dump::test::write_bytes(root + "/nvdlfw_inspect_globalrank-0.log", line("fc1_activation_max", 1, "2.0000") +
                                                                           line("fc1_activation_sum", 1, "10.0000") +
                                                                           line("fc1_activation_bogus", 1, "1.0000"));
    dump::test::write_bytes(root + "/nvdlfw_inspect_globalrank-1.log", line("fc1_activation_max", 1, "3.2500"));
    const auto run = te::read_run_stats(root);
    char* buf = nullptr;
    std::size_t len = 0;
    std::FILE* f = ::open_memstream(&buf, &len);
    REQUIRE(f);
    te::write_stats_text(run, 0, f);
    std::fclose(f);
    const std::string out(buf, len);
    std::free(buf);
    // The name column is as wide as the longest name (18); the max combines both ranks, the sum
    // (logged by rank 0 alone) stays per rank.
    CHECK_THAT(out, Catch::StartsWith("TransformerEngine statistics: 2 files, 2 series\n\n"
                                      "name                combine    rank   steps   last step      last value"
                                      "             max  unreadable\n"
                                      "fc1_activation_max  max       all 2       1           1            3.25"
                                      "            3.25           0\n"
                                      "fc1_activation_sum  per rank      0       1           1              10"
                                      "              10           0\n\n"
                                      "ranks combined by max, min or numel-weighted mean"));
    CHECK_THAT(out,
               Catch::EndsWith("--json or --csv for every step\nnote: skipped " + run.skipped[0].describe() + "\n"));
}
