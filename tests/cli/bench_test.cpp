// `nnc --bench`: the JSON keys scripts rely on, the peak and its share, and the
// compile split between kernels compiled now and kernels linked from the object cache
// of an earlier process. No timing is asserted (benchmarks are not tests).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "NncProcess.h"

namespace {

using nnc_cli_test::Result;
using nnc_cli_test::runNnc;
using nnc_cli_test::ScopedEnv;
using nnc_cli_test::SharedKernelCache;
using nnc_cli_test::TempCache;
using nnc_cli_test::TempDir;

nlohmann::json benchJson(const std::vector<std::string> &extra = {}) {
  std::vector<std::string> args = {"examples/seeds/mnist.nn", "--bench", "--random-weights", "1",
                                   "--format", "json", "--runs", "5"};
  args.insert(args.end(), extra.begin(), extra.end());
  Result r = runNnc(args, 120);
  EXPECT_EQ(r.exitCode, 0) << r.describe();
  auto j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(j.is_object()) << r.out;
  return j;
}

TEST(Bench, JsonHasEveryKey) {
  SharedKernelCache kernels;
  const TempCache &cache = kernels.cache;
  nlohmann::json j = benchJson();
  for (const char *key : {"median_us", "min_us", "gflops", "compile_ms", "runs", "threads", "batch",
                          "peak_gflops", "share_of_peak", "kernels_compiled", "kernels_from_cache",
                          "run_stack_bytes"})
    EXPECT_TRUE(j.contains(key) && j[key].is_number()) << key << " in " << j.dump(2);
  EXPECT_EQ(j["runs"], 5);
  EXPECT_EQ(j["batch"], 1);
  EXPECT_GE(j["threads"].get<int>(), 1);
  EXPECT_GT(j["median_us"].get<double>(), 0);
  EXPECT_GE(j["run_stack_bytes"].get<int64_t>(), 64 * 1024); // the runtime's frames and the kernels'
  EXPECT_LE(j["min_us"].get<double>(), j["median_us"].get<double>());
  EXPECT_GT(j["peak_gflops"].get<double>(), 0);
  EXPECT_NEAR(j["share_of_peak"].get<double>(), j["gflops"].get<double>() / j["peak_gflops"].get<double>(), 1e-9);
  EXPECT_TRUE(j["peak_isa"].is_string());
  EXPECT_EQ(j["products"].get<std::string>().rfind("f32 ", 0), 0u) << j["products"]; // f32 activations
  EXPECT_TRUE(j["kernel_row"].is_string());
  EXPECT_TRUE(j["kernel_row_choice"].is_string());
  EXPECT_TRUE(j["kernel_row_half_rate"].is_boolean());
  EXPECT_EQ(j["denormals"], "flush"); // the default (--denormals)
  EXPECT_EQ(j["kernel_cache"], cache.path);
}

// --profile: every layer that ran (the MLP's three dense layers among them), slowest
// first, each with its MACs' rate; slowest_layers is the list's head.
TEST(Bench, ProfileListsEveryLayerSlowestFirst) {
  nlohmann::json j = benchJson({"--profile"});
  ASSERT_TRUE(j["layers"].is_array()) << j.dump(2);
  ASSERT_TRUE(j["slowest_layers"].is_array()) << j.dump(2);
  const nlohmann::json &layers = j["layers"];
  int dense = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (i > 0) {
      EXPECT_GE(layers[i - 1]["us_per_run"].get<double>(), layers[i]["us_per_run"].get<double>());
    }
    if (layers[i]["layer_kind"] == "dense") {
      ++dense;
      EXPECT_GT(layers[i]["gflops"].get<double>(), 0) << layers[i];
    }
  }
  EXPECT_EQ(dense, 3) << layers.dump(2);
  ASSERT_EQ(j["slowest_layers"].size(), std::min<size_t>(8, layers.size()));
  for (size_t i = 0; i < j["slowest_layers"].size(); ++i) EXPECT_EQ(j["slowest_layers"][i], layers[i]);
}

TEST(Bench, SecondProcessLinksEveryKernelFromTheCache) {
  SharedKernelCache kernels;
  nlohmann::json cold = benchJson({"--batch", "3"});
  EXPECT_GT(cold["kernels_compiled"].get<int>(), 0) << cold.dump(2);
  EXPECT_EQ(cold["kernels_from_cache"], 0);
  nlohmann::json warm = benchJson({"--batch", "3"});
  EXPECT_EQ(warm["kernels_compiled"], 0) << warm.dump(2);
  EXPECT_EQ(warm["kernels_from_cache"], cold["kernels_compiled"]);
  EXPECT_EQ(warm["compile_breakdown_ms"]["optimisation"], 0.0);
  EXPECT_EQ(warm["compile_breakdown_ms"]["codegen"], 0.0);
  // Another batch is other kernels: compiled, not confused with these.
  nlohmann::json other = benchJson({"--batch", "4"});
  EXPECT_GT(other["kernels_compiled"].get<int>(), 0) << other.dump(2);
}

TEST(Bench, CacheOffCompilesEverythingAndWritesNothing) {
  TempCache cache;
  ScopedEnv off("NNC_CACHE", "off"), dir("NNC_CACHE_DIR", cache.path);
  for (int i = 0; i < 2; ++i) {
    nlohmann::json j = benchJson();
    EXPECT_GT(j["kernels_compiled"].get<int>(), 0);
    EXPECT_EQ(j["kernels_from_cache"], 0);
    EXPECT_TRUE(j["kernel_cache"].is_null());
  }
  EXPECT_FALSE(std::filesystem::exists(cache.path));
}

TEST(Bench, UnwritableCacheWarnsOnceAndStillRuns) {
  TempDir dir;
  std::string blocker = dir.write("a_file", "not a directory"); // no directory can be made below it
  ScopedEnv on("NNC_CACHE", std::nullopt), at("NNC_CACHE_DIR", blocker + "/nnc");
  Result r = runNnc({"examples/seeds/mnist.nn", "--bench", "--random-weights", "1", "--runs", "1"}, 120);
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  const std::string warning = "nnc: warning: not caching compiled kernels in '" + blocker + "/nnc'";
  const size_t first = r.err.find(warning);
  ASSERT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(warning, first + 1), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("NNC_CACHE=off turns the cache off"), std::string::npos) << r.err;
  // --compare-dtypes and --generate compile too: they dropped the warning.
  Result compare = runNnc({"examples/seeds/mnist.nn", "--compare-dtypes", "--random-weights", "1", "--runs", "1"}, 120);
  ASSERT_EQ(compare.exitCode, 0) << compare.describe();
  EXPECT_NE(compare.err.find(warning), std::string::npos) << compare.err;
  const std::string prompt = dir.write("p.npy", nnc_cli_test::npyIntegers({1, 2}, {1, 2}));
  Result generate = runNnc({"tests/fixtures/hf_llama/model.nn", "--generate", "2", "--prompt", prompt,
                            "--random-weights", "1"},
                           120);
  ASSERT_EQ(generate.exitCode, 0) << generate.describe();
  const size_t once = generate.err.find(warning);
  ASSERT_NE(once, std::string::npos) << generate.err;
  EXPECT_EQ(generate.err.find(warning, once + 1), std::string::npos) << generate.err;
}

TEST(Bench, TextSaysTheSameInWords) {
  ScopedEnv off("NNC_CACHE", "off");
  Result r = runNnc({"examples/seeds/mnist.nn", "--bench", "--random-weights", "1", "--runs", "3"}, 120);
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  for (const char *phrase : {"model mnist batch 1 threads", "GFLOP/s", "% of this machine's measured peak",
                             "kernels compiled, 0 from the kernel cache (off)", "compiling (summed over kernels"})
    EXPECT_NE(r.out.find(phrase), std::string::npos) << phrase << "\n" << r.out;
}

} // namespace
