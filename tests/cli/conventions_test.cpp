// Command-line conventions: --version names the LLVM it was built with,
// --diagnostics-format json puts one JSON object per diagnostic on stderr, nothing else,
// and a warning is printed once, about the model that runs.
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
size_t count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// --generate analyses the model at its context, the prompt's length and one position;
// --run whose .npy sets the batch analyses it again: one warning each, and the run's
// about the model at the .npy's batch (dense(batch * 2) is 5 → 6 at batch 3).
TEST(Conventions, AWarningIsPrintedOnceAboutTheModelThatRuns) {
  nnc_cli_test::TempDir dir;
  const std::string lm = dir.write("lm.nn", "model lm(seq = 8) {\n  input tokens: i32[seq]\n  tok = embedding(11, 8)\n"
                                            "  residual { rmsnorm; attention(2) }\n  dense(4)\n  head = dense(11)\n}\n");
  auto gen = runNnc({lm, "--generate", "2", "--prompt", dir.write("p.npy", nnc_cli_test::npyIntegers({2, 3}, {1, 2, 3, 4, 5, 6})),
                     "--random-weights", "1"});
  ASSERT_EQ(gen.exitCode, 0) << gen.describe();
  EXPECT_EQ(count(gen.err, "warning:"), 1u) << gen.err;

  const std::string mlp = dir.write("b.nn", "model m {\n  input x: [4]\n  dense(5)\n  dense(batch * 2)\n}\n");
  auto run = runNnc({mlp, "--run", dir.write("x.npy", nnc_cli_test::npyIntegers({3, 4}, std::vector<int64_t>(12), "<f4")),
                     "--random-weights", "1"});
  ASSERT_EQ(run.exitCode, 0) << run.describe();
  EXPECT_EQ(count(run.err, "warning:"), 1u) << run.err;
  EXPECT_NE(run.err.find("(dense 5 → 6)"), std::string::npos) << run.err;
}

TEST(Conventions, FlagsThatCannotWorkTogetherAreUsageErrors) {
  auto bench = runNnc({"examples/seeds/mnist.nn", "--bench"});
  EXPECT_EQ(bench.exitCode, 2);
  EXPECT_NE(bench.err.find("--bench needs weights"), std::string::npos) << bench.err;
  auto explain = runNnc({"examples/seeds/mnist.nn", "--format", "json", "--explain"});
  EXPECT_EQ(explain.exitCode, 2);
  EXPECT_NE(explain.err.find("--explain writes text"), std::string::npos) << explain.err;
}

// An option the action does not read, or a value given twice, was silently unused or
// overruled (`--output` with --report wrote nothing; `--emit plan --format json` printed
// text; `--batch 8 --batch 4` ran at 4): each is a usage error naming what it goes with.
TEST(Conventions, NothingOnTheCommandLineIsSilentlyUnused) {
  const std::string m = "examples/seeds/mnist.nn";
  const struct {
    std::vector<std::string> args;
    const char *says;
  } cases[] = {
      {{m, "--output", "x.npy"}, "--output goes with --run or --generate; it does nothing with --report (the default"},
      {{m, "--check", "--threads", "2"}, "--threads goes with --run, --bench, --generate or --compare-dtypes"},
      {{m, "--runs", "3", "--random-weights", "1", "--run", "x.npy"}, "--runs goes with --bench or --compare-dtypes"},
      {{m, "--max-memory", "100"}, "--max-memory goes with --run, --bench or --generate"},
      {{m, "--check", "--random-weights", "1"}, "--random-weights goes with"},
      {{m, "--weights-in-place"}, "--weights-in-place goes with --run, --bench, --generate, --compare-dtypes or --emit"},
      {{m, "--denormals", "keep"}, "--denormals goes with --run, --bench, --generate or --compare-dtypes"},
      {{m, "--bench", "--random-weights", "1", "-o", "x.npy"}, "--output goes with --run or --generate; it does "
                                                              "nothing with --bench"},
      {{m, "--emit", "plan", "--print-after", "verify"}, "--print-after goes with --emit ir"},
      {{m, "--emit", "plan", "--format", "json"}, "--format json goes with --report, --bench, --generate and "
                                                   "--compare-dtypes; --emit prints"},
      {{m, "--check", "--format", "md"}, "--format md goes with --report"},
      {{m, "--sweep", "batch=1,2", "--expand"}, "--expand lists one model's layers"},
      {{m, "--batch", "8", "--batch", "4"}, "--batch is given twice (it takes one value)"},
      {{m, "--set", "batch=3", "--batch", "4"}, "--batch sets batch to 4, but it was already set to 3"},
      {{m, "--sweep", "batch=4", "--set", "batch=8"}, "--sweep batch= and --set batch= both set batch"},
      {{m, "--dtype", "i8", "--dtype", "i4"}, "--dtype is given twice"},
  };
  for (const auto &c : cases) {
    auto r = runNnc(c.args);
    EXPECT_EQ(r.exitCode, 2) << r.describe();
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.describe();
  }
  EXPECT_EQ(runNnc({m, "--batch", "4", "--set", "batch=4"}).exitCode, 0); // the same value twice agrees
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
