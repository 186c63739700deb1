// Command-line conventions: --version names the LLVM it was built with, and
// --diagnostics-format json puts one JSON object per diagnostic on stderr, nothing else.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "NncProcess.h"

namespace {
using nnc_cli_test::runNnc;

std::vector<nlohmann::json> jsonLines(const std::string &text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    EXPECT_NO_THROW(out.push_back(nlohmann::json::parse(line))) << "not JSON: " << line;
  }
  return out;
}

TEST(Conventions, VersionNamesLlvm) {
  auto r = runNnc({"--version"});
  ASSERT_EQ(r.exitCode, 0);
  EXPECT_NE(r.out.find("built with LLVM 19."), std::string::npos) << r.out;
}

TEST(Conventions, JsonDiagnosticsAreAllThereIsOnStderr) {
  nnc_cli_test::TempDir dir;
  std::string path = dir.write("bad.nn", "model m {\n  input x: [4]\n  desne(3)\n  dense(2, biass=true)\n}\n");
  auto r = runNnc({path, "--diagnostics-format", "json"});
  EXPECT_EQ(r.exitCode, 1);
  auto lines = jsonLines(r.err);
  ASSERT_EQ(lines.size(), 2u) << r.err;
  EXPECT_EQ(lines[0]["severity"], "error");
  EXPECT_EQ(lines[0]["file"], path);
  EXPECT_EQ(lines[0]["line"], 3);
  EXPECT_EQ(lines[0]["column"], 3);
  EXPECT_NE(lines[0]["message"].get<std::string>().find("desne"), std::string::npos);
  EXPECT_EQ(lines[1]["line"], 4);

  // Errors that are not located in the program are JSON objects too.
  auto missing = runNnc({path + ".missing", "--diagnostics-format", "json"});
  EXPECT_EQ(missing.exitCode, 1);
  auto one = jsonLines(missing.err);
  ASSERT_EQ(one.size(), 1u) << missing.err;
  EXPECT_NE(one[0]["message"].get<std::string>().find("cannot open"), std::string::npos);
  auto usage = runNnc({"--diagnostics-format", "json", "--frobnicate"});
  EXPECT_EQ(usage.exitCode, 2);
  EXPECT_EQ(jsonLines(usage.err).size(), 1u) << usage.err;
}

} // namespace

namespace {
TEST(Conventions, FlagsThatCannotWorkTogetherAreUsageErrors) {
  auto bench = runNnc({"examples/seeds/mnist.nn", "--bench"});
  EXPECT_EQ(bench.exitCode, 2);
  EXPECT_NE(bench.err.find("--bench needs weights"), std::string::npos) << bench.err;
  auto explain = runNnc({"examples/seeds/mnist.nn", "--format", "json", "--explain"});
  EXPECT_EQ(explain.exitCode, 2);
  EXPECT_NE(explain.err.find("--explain writes text"), std::string::npos) << explain.err;
}

TEST(Conventions, DepthwiseStoredBelowF32RunsInItsDtype) {
  nnc_cli_test::TempDir dir;
  std::string path = dir.write("n.nn", "model m {\n  input x: [2, 6, 6]\n  n = depthwise(3, pad=1, dtype=f16)\n}\n");
  auto r = runNnc({path, "--bench", "--random-weights", "1", "--format", "json"});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  auto plan = runNnc({path, "--emit", "plan"});
  EXPECT_NE(plan.out.find("_f16"), std::string::npos) << plan.out; // the kernel reads f16 weights
}
} // namespace
