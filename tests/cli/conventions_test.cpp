// Command-line conventions: --version names the LLVM it was built with,
// --diagnostics-format json puts one JSON object per diagnostic on stderr, nothing else,
// and a warning is printed once, about the model that runs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <cctype>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "NncProcess.h"

namespace {
using nnc_cli_test::runNnc;
using nnc_cli_test::ScopedEnv;

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

// With --diagnostics-format json, what an action says besides its diagnostics (a file
// written, --generate's rates) and a warning about no line of the program (the kernel
// cache's) are JSON objects too: they were text lines among the JSON ones.
TEST(Conventions, JsonDiagnosticsCarryTheStatusLinesAndWarnings) {
  nnc_cli_test::TempDir dir;
  std::string blocker = dir.write("a_file", "not a directory");
  ScopedEnv on("NNC_CACHE", std::nullopt), at("NNC_CACHE_DIR", blocker + "/nnc");
  const std::string out = dir.write("y.npy", "");
  auto run = runNnc({"examples/digits/digits.nn", "--run", "examples/digits/test_images_5.npy", "--weights",
                     "examples/digits/digits.safetensors", "--output", out, "--diagnostics-format", "json"},
                    60);
  ASSERT_EQ(run.exitCode, 0) << run.describe();
  const std::vector<nlohmann::json> lines = jsonLines(run.err);
  ASSERT_EQ(lines.size(), 2u) << run.err;
  EXPECT_EQ(lines[0]["severity"], "warning") << run.err;
  EXPECT_NE(lines[0]["message"].get<std::string>().find("not caching compiled kernels"), std::string::npos);
  EXPECT_EQ(lines[1], (nlohmann::json{{"severity", "info"}, {"message", "wrote f32[5, 10] output to " + out}}));

  const std::string prompt = dir.write("p.npy", nnc_cli_test::npyIntegers({1, 2}, {1, 2}));
  auto generate = runNnc({"tests/fixtures/hf_llama/model.nn", "--generate", "3", "--prompt", prompt,
                          "--random-weights", "1", "--profile", "--diagnostics-format", "json"},
                         120);
  ASSERT_EQ(generate.exitCode, 0) << generate.describe();
  const std::vector<nlohmann::json> said = jsonLines(generate.err);
  ASSERT_GT(said.size(), 4u) << generate.err;
  for (const nlohmann::json &j : said)
    EXPECT_TRUE(j["severity"] == "info" || j["severity"] == "warning") << j.dump();
  EXPECT_NE(said[1]["message"].get<std::string>().find("model hf_llama batch 1"), std::string::npos) << generate.err;
}

// A message is cut to 4,096 bytes in JSON as in text (docs/errors.md): a 100 KB
// misspelt name was a 100 KB JSON line.
TEST(Conventions, JsonDiagnosticsAreBoundedAsTextIs) {
  nnc_cli_test::TempDir dir;
  const std::string path =
      dir.write("long.nn", "model m {\n  input x: [4]\n  desne" + std::string(100'000, 'e') + "(3)\n}\n");
  auto text = runNnc({path, "--check"});
  EXPECT_EQ(text.exitCode, 1) << text.describe();
  auto json = runNnc({path, "--check", "--diagnostics-format", "json"});
  EXPECT_EQ(json.exitCode, 1) << json.describe();
  EXPECT_LT(json.err.size(), 4096u + 512) << json.err.size();
  auto lines = jsonLines(json.err);
  ASSERT_EQ(lines.size(), 1u) << json.err.substr(0, 300);
  const std::string message = lines[0]["message"];
  EXPECT_LE(message.size(), 4096u);
  EXPECT_NE(message.find("(message cut: 100,"), std::string::npos) << message.substr(4000);
  EXPECT_NE(text.err.find(message), std::string::npos); // the same cut in both
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

// A command line that must be a usage error (exit 2) saying `says`.
struct UsageCase {
  std::vector<std::string> args;
  const char *says;
};
nnc_cli_test::Result expectUsageError(const UsageCase &c) {
  auto r = runNnc(c.args);
  EXPECT_EQ(r.exitCode, 2) << r.describe();
  EXPECT_NE(r.err.find(c.says), std::string::npos) << r.describe();
  return r;
}

// An option the action does not read, or a value given twice, was silently unused or
// overruled (`--output` with --report wrote nothing; `--emit plan --format json` printed
// text; `--batch 8 --batch 4` ran at 4): each is a usage error naming what it goes with.
TEST(Conventions, NothingOnTheCommandLineIsSilentlyUnused) {
  const std::string m = "examples/seeds/mnist.nn";
  const UsageCase cases[] = {
      {{m, "--output", "x.npy"}, "--output goes with --run or --generate; it does nothing with --report (the default"},
      {{m, "--check", "--threads", "2"}, "--threads goes with --run, --bench, --generate or --compare-dtypes"},
      {{m, "--runs", "3", "--random-weights", "1", "--run", "x.npy"}, "--runs goes with --bench or --compare-dtypes"},
      {{m, "--max-memory", "100"}, "--max-memory goes with --run, --bench, --generate or --compare-dtypes"},
      // the report counts i8 and i4 as bare bits; the IR comes before the kernels
      {{m, "--quant", "per-tensor"}, "--quant goes with --run, --bench, --generate, --compare-dtypes or --emit; it "
                                     "does nothing with --report (the default"},
      {{m, "--check", "--dtype", "i4", "--quant-group", "16"}, "--quant-group goes with --run, --bench, --generate, "
                                                               "--compare-dtypes or --emit; it does nothing with --check"},
      {{m, "--emit", "ir", "--dtype", "i4", "--quant-group", "16"}, "--quant-group shapes the kernels (--emit plan, "
                                                                    "llvm or asm); --emit ir prints the IR before them"},
      {{m, "--compare-dtypes", "--random-weights", "1", "--dtype", "i8"},
       "--compare-dtypes runs the model in every storage dtype and activation mode itself; --dtype would choose one"},
      {{m, "--compare-dtypes", "--random-weights", "1", "--activations", "bf16"}, "--activations would choose one"},
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
      // only a decoder keeps a KV cache: no program --emit prints has one
      {{m, "--emit", "plan", "--kv-dtype", "i8"}, "--kv-dtype goes with --generate or --report"},
  };
  for (const UsageCase &c : cases) expectUsageError(c);
  EXPECT_EQ(runNnc({m, "--batch", "4", "--set", "batch=4"}).exitCode, 0); // the same value twice agrees
  // What the message adds fits the flag: a flag without a value takes none; the hint
  // that --batch is --set batch= only where batch is the parameter.
  auto twice = expectUsageError({{m, "--check", "--check"}, "--check is given twice"});
  EXPECT_EQ(twice.err.find("it takes one value"), std::string::npos) << twice.err;
  auto hidden = expectUsageError({{m, "--set", "hidden=3", "--set", "hidden=4"},
                                  "--set hidden=4 sets hidden to 4, but it was already set to 3"});
  EXPECT_EQ(hidden.err.find("--batch"), std::string::npos) << hidden.err;
}

// `-o FILE` is `--output FILE`, and takes its value after '=' as every flag does.
TEST(Conventions, ShortOutputTakesItsValueAfterAnEqualsSign) {
  nnc_cli_test::TempDir dir;
  const std::string out = dir.write("y.npy", "");
  auto r = runNnc({"examples/digits/digits.nn", "--run", "examples/digits/test_images_5.npy", "--weights",
                   "examples/digits/digits.safetensors", "-o=" + out});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_NE(r.err.find("wrote f32[5, 10] output to " + out), std::string::npos) << r.err;
}

// --help names every flag the command line takes, and docs/cli.md documents each.
TEST(Conventions, TheHelpAndTheDocsNameEveryFlag) {
  auto help = runNnc({"--help"});
  ASSERT_EQ(help.exitCode, 0) << help.describe();
  std::ifstream docFile(std::string(NNC_SOURCE_DIR) + "/docs/cli.md");
  const std::string doc((std::istreambuf_iterator<char>(docFile)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(doc.empty());
  for (const char *flag :
       {"--model", "--set", "--batch", "--dtype", "--quant", "--quant-group", "--activations", "--weights-in-place",
        "--kv-dtype", "--denormals", "--check", "--report", "--format", "--explain", "--sweep", "--svg", "--expand",
        "--run", "--weights", "--random-weights", "--weight-map", "--output", "-o", "--threads", "--max-memory",
        "--generate", "--prompt", "--temperature", "--top-k", "--top-p", "--seed", "--stop", "--profile", "--bench",
        "--runs", "--compare-dtypes", "--input", "--emit", "--print-after", "--diagnostics-format", "--no-color",
        "--help", "-h", "--version"}) {
    const auto named = [&](const std::string &text) { // the flag itself, not the start of a longer one
      for (size_t at = text.find(flag); at != std::string::npos; at = text.find(flag, at + 1)) {
        const char next = at + std::strlen(flag) < text.size() ? text[at + std::strlen(flag)] : ' ';
        if (!std::isalnum(static_cast<unsigned char>(next)) && next != '-') return true;
      }
      return false;
    };
    EXPECT_TRUE(named(help.out)) << flag << " is not in --help";
    EXPECT_NE(doc.find("`" + std::string(flag)), std::string::npos) << flag << " is not in docs/cli.md";
    // and the parser takes it: not an unknown option
    auto r = runNnc({"examples/seeds/mnist.nn", flag});
    EXPECT_EQ(r.err.find("unknown option"), std::string::npos) << flag << ": " << r.err;
  }
}

// `--flag=value` is read as `--flag value`, so a flag that takes no value given one
// made the value the next argument: `--check=m.nn` checked m.nn, `--weights-in-place=true`
// was "a second FILE.nn".
TEST(Conventions, AFlagThatTakesNoValueRefusesOne) {
  const std::string m = "examples/seeds/mnist.nn";
  const UsageCase cases[] = {
      {{"--check=" + m}, "--check takes no value, found '--check=examples/seeds/mnist.nn'"},
      {{"--report=" + m}, "--report takes no value"},
      {{m, "--check=yes"}, "--check takes no value, found '--check=yes'"},
      {{m, "--bench=1", "--random-weights", "1"}, "--bench takes no value"},
      {{m, "--run", "x.npy", "--random-weights", "1", "--weights-in-place=true"}, "--weights-in-place takes no value"},
      {{m, "--explain=1"}, "--explain takes no value"},
      {{m, "--no-color=1"}, "--no-color takes no value"},
  };
  for (const UsageCase &c : cases) expectUsageError(c);
  EXPECT_EQ(runNnc({m, "--batch=2", "--format=json"}).exitCode, 0); // a value flag takes '=' as ever
}

// An integer written wrong is "expects an integer", and only well-written digits beyond
// 64 bits are "at most": `1__0` and `2_` were reported as too large, with the bound of
// the flag and "(2^63 - 1)" side by side.
TEST(Conventions, AMalformedIntegerIsNotCalledTooLarge) {
  const std::string m = "examples/seeds/mnist.nn";
  const UsageCase cases[] = {
      {{m, "--batch=1__0"}, "--batch expects an integer, found '1__0'"},
      {{m, "--batch", "_1"}, "--batch expects an integer, found '_1'"},
      {{m, "--run", "x.npy", "--random-weights", "1", "--threads", "2_"}, "--threads expects an integer, found '2_'"},
      {{m, "--batch", "99999999999999999999"}, "--batch must be at most 9223372036854775807, found '99999999999999999999'"},
      {{m, "--run", "x.npy", "--random-weights", "1", "--threads", "1_000_000_000_000_000_000_000"},
       "--threads must be at most 256, found '1_000_000_000_000_000_000_000'"},
      {{m, "--batch", "-99999999999999999999"}, "--batch must be at least 1, found '-99999999999999999999'"},
      {{m, "--set", "batch=99999999999999999999"}, "--set batch: expected an integer value from -(2^63 - 1) to 2^63 - 1"},
      {{m, "--set", "batch=1__0"}, "--set batch: expected an integer value, found '1__0'"},
  };
  for (const UsageCase &c : cases) {
    const auto r = expectUsageError(c);
    EXPECT_EQ(r.err.find(" (2^63 - 1), found"), std::string::npos) << r.describe(); // the old bound beside another
  }
  EXPECT_EQ(runNnc({m, "--batch", "1_0"}).exitCode, 0); // separators between digits are fine
}

// --quant sets the scales of i8 weights, --quant-group those of i4 ones: for a model
// that stores none they did nothing, silently. An error of the model (exit 1), as
// --activations is for a model with no GEMM in its dtype.
TEST(Conventions, QuantOptionsNeedWeightsTheyQuantise) {
  nnc_cli_test::TempDir dir;
  const std::string input = dir.write("x.f32", std::string(784 * 4, '\0'));
  const std::string m = "examples/seeds/mnist.nn";
  const auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {m, "--run", input, "--random-weights", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return runNnc(args);
  };
  const auto perTensor = run({"--quant", "per-tensor"});
  EXPECT_EQ(perTensor.exitCode, 1) << perTensor.describe();
  EXPECT_NE(perTensor.err.find("--quant per-tensor sets the scales of i8 weights, and model 'mnist' stores none in "
                               "i8 (give --dtype i8, or dtype=i8 on its layers; or drop --quant)"),
            std::string::npos)
      << perTensor.describe();
  const auto group = run({"--dtype", "i8", "--quant-group", "16"});
  EXPECT_EQ(group.exitCode, 1) << group.describe();
  EXPECT_NE(group.err.find("--quant-group 16 sets the scales of i4 weights, and model 'mnist' stores none in i4"),
            std::string::npos)
      << group.describe();
  EXPECT_EQ(run({"--dtype", "i8", "--quant", "per-tensor"}).exitCode, 0);
  EXPECT_EQ(run({"--dtype", "i4", "--quant-group", "16"}).exitCode, 0);
  // One layer stored in i4 by its dtype= is enough.
  const std::string one = dir.write("one.nn", "model one {\n  input x: [784]\n  a = dense(16)\n  b = dense(10, dtype=i4)\n}\n");
  const auto layer = runNnc({one, "--run", input, "--random-weights", "1", "--quant-group", "16"});
  EXPECT_EQ(layer.exitCode, 0) << layer.describe();
  const auto emitted = runNnc({one, "--emit", "plan", "--quant", "per-channel"});
  EXPECT_EQ(emitted.exitCode, 1) << emitted.describe(); // no i8 layer: --emit too
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
