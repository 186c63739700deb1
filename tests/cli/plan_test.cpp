// `--emit plan` and the one liveness: for every example the kernel program prints, its
// arena equals the report's "as nnc runs it" figure (memory.runtime_arena_bytes), and
// for every example that runs, `--bench --format json` reports that same arena_bytes —
// the report, the plan and the runtime use one planner.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "NncProcess.h"

namespace {
using nnc_cli_test::runNnc;

std::vector<std::string> examples() {
  std::vector<std::string> out;
  for (const auto &e : std::filesystem::directory_iterator(std::string(NNC_SOURCE_DIR) + "/examples/seeds"))
    if (e.path().extension() == ".nn") out.push_back("examples/seeds/" + e.path().filename().string());
  out.push_back("examples/digits/digits.nn");
  std::sort(out.begin(), out.end());
  return out;
}

// "arena 266,240 B" in the plan's first line, as a number.
int64_t planArena(const std::string &plan) {
  std::smatch m;
  if (!std::regex_search(plan, m, std::regex("arena ([0-9,]+) B"))) return -1;
  std::string digits = m[1];
  digits.erase(std::remove(digits.begin(), digits.end(), ','), digits.end());
  return std::stoll(digits);
}

TEST(Plan, EveryExampleHasAPlanWhoseArenaIsTheReportsAndTheRuntimes) {
  int ran = 0;
  for (const std::string &ex : examples()) {
    SCOPED_TRACE(ex);
    for (const char *batch : {"1", "3"}) {
      auto report = runNnc({ex, "--format", "json", "--batch", batch});
      ASSERT_EQ(report.exitCode, 0) << report.describe();
      const int64_t reported = nlohmann::json::parse(report.out)["memory"]["runtime_arena_bytes"];
      auto plan = runNnc({ex, "--emit", "plan", "--batch", batch});
      ASSERT_EQ(plan.exitCode, 0) << plan.describe();
      EXPECT_EQ(planArena(plan.out), reported);
      EXPECT_NE(plan.out.find("steps:"), std::string::npos);
      if (plan.out.find("no kernel:") != std::string::npos) continue; // cannot run yet
      auto bench = runNnc({ex, "--bench", "--random-weights", "1", "--runs", "1", "--format", "json", "--batch", batch},
                          120);
      ASSERT_EQ(bench.exitCode, 0) << bench.describe();
      EXPECT_EQ(nlohmann::json::parse(bench.out)["arena_bytes"].get<int64_t>(), reported);
      ++ran;
    }
  }
  EXPECT_GE(ran, 20); // the MLP examples run at both batches
}

TEST(Plan, MnistAtBatch64IsThreeFusedGemms) {
  auto r = runNnc({"examples/seeds/mnist.nn", "--emit", "plan", "--batch", "64"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_NE(r.out.find("3 steps, 6 constants"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fc1 (dense, line 4): gemm_m64_n256_k784_wf32_bias_relu"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fc3 (dense, line 6): gemm_m64_n10_k128_wf32_bias_"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("packed for gemm_m64_n256_k784"), std::string::npos) << r.out;
}

TEST(Plan, FoldedChainReadsBothLayersAtLoad) {
  nnc_cli_test::TempDir dir;
  std::string path = dir.write("chain.nn", "model m {\n  input x: [8]\n  a = dense(4)\n  b = dense(2)\n}\n");
  auto r = runNnc({path, "--emit", "plan"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_NE(r.out.find("1 steps"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fold the chain's weights"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("of a, b"), std::string::npos) << r.out;
}

} // namespace
