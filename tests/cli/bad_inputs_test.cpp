// The bad-input corpus (tests/bad/*.nn) and generated hostile inputs, run through the
// built `nnc`. LANGUAGE.md §4: every error names file:line:col, shows the source line
// with a caret and says what was expected and what was found; no input crashes the
// compiler. docs/cli.md: exit 1 for a problem in the user's program, 2 for bad usage,
// 3 only for an internal error (never acceptable here).
//
// Each corpus file states what it must produce in header comments:
//   # expect: LINE:COL "key phrase"   an error at that position whose text has the phrase
//   # expect: "key phrase"            a file-level error (no position to show)
//   # expect-exit: N                  exit code, 1 when absent
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>

#include "NncProcess.h"

namespace {
namespace fs = std::filesystem;
using nnc_cli_test::Result;
using nnc_cli_test::runNnc;
using nnc_cli_test::TempDir;

const std::string kSeedMnist = std::string(NNC_SOURCE_DIR) + "/examples/seeds/mnist.nn";

struct Expectation {
  int line = 0, col = 0; // 0: no position
  std::string phrase;
};

struct CorpusFile {
  std::string path; // relative to the source tree, as nnc is given it
  std::vector<Expectation> expects;
  int exitCode = 1;
};

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CorpusFile parseHeader(const std::string &relPath) {
  CorpusFile f;
  f.path = relPath;
  static const std::regex expect(R"re(^# expect: (?:(\d+):(\d+) )?"(.*)"\s*$)re");
  static const std::regex exitCode(R"re(^# expect-exit: (\d+)\s*$)re");
  std::istringstream in(readFile(std::string(NNC_SOURCE_DIR) + "/" + relPath));
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (std::regex_match(line, m, expect)) {
      Expectation e;
      if (m[1].matched) e.line = std::stoi(m[1]), e.col = std::stoi(m[2]);
      e.phrase = m[3];
      f.expects.push_back(e);
    } else if (std::regex_match(line, m, exitCode)) {
      f.exitCode = std::stoi(m[1]);
    }
  }
  return f;
}

std::vector<std::string> corpusFiles() {
  std::vector<std::string> out;
  for (const auto &entry : fs::directory_iterator(fs::path(NNC_SOURCE_DIR) / "tests" / "bad"))
    if (entry.path().extension() == ".nn") out.push_back("tests/bad/" + entry.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// A rendered diagnostic has a line "      | <spaces/tabs>^~~~" under the source line.
bool hasCaretLine(const std::string &err) {
  static const std::regex caret(R"((^|\n) *\| [ \t]*\^)");
  return std::regex_search(err, caret);
}

bool contains(const std::string &hay, const std::string &needle) { return hay.find(needle) != std::string::npos; }

// ------------------------------------------------------------------ the corpus

class BadInputs : public ::testing::TestWithParam<std::string> {};

void checkCorpusRun(const CorpusFile &f, const Result &r, const std::string &mode) {
  SCOPED_TRACE(f.path + " (" + mode + ")");
  ASSERT_TRUE(r.clean()) << r.describe();
  EXPECT_EQ(r.exitCode, f.exitCode) << r.describe();
  EXPECT_FALSE(contains(r.err, "internal error")) << r.describe();
  bool positioned = false;
  for (const auto &e : f.expects) {
    if (e.line) {
      positioned = true;
      std::string where = f.path + ":" + std::to_string(e.line) + ":" + std::to_string(e.col) + ":";
      EXPECT_TRUE(contains(r.err, where)) << "expected an error at " << where << "\n" << r.describe();
    }
    EXPECT_TRUE(contains(r.err, e.phrase)) << "expected \"" << e.phrase << "\" in stderr\n" << r.describe();
  }
  if (positioned) {
    EXPECT_TRUE(hasCaretLine(r.err)) << "no source line with a caret\n" << r.describe();
  }
}

TEST_P(BadInputs, ReportsTheExpectedError) {
  CorpusFile f = parseHeader(GetParam());
  ASSERT_FALSE(f.expects.empty()) << f.path << " has no '# expect:' header";
  // --check stops after the shape checks; the default action (the report) runs every
  // analysis, which must fail the same way.
  checkCorpusRun(f, runNnc({f.path, "--check"}), "--check");
  checkCorpusRun(f, runNnc({f.path}), "report");
}

std::string testName(const ::testing::TestParamInfo<std::string> &info) {
  std::string n = fs::path(info.param).stem().string();
  for (char &c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Corpus, BadInputs, ::testing::ValuesIn(corpusFiles()), testName);

TEST(BadInputsCorpus, HasAtLeast45Files) {
  EXPECT_GE(corpusFiles().size(), 45u);
}

// ------------------------------------------------------------------ generated inputs
// Too big or too binary to commit; each must end in a user error (exit 1), quickly.

// Exit 1 without a crash or an internal error, `phrase` on stderr (when given), in
// under 15 s (scaled for sanitizer builds).
::testing::AssertionResult isUserError(const Result &r, const std::string &phrase = "") {
  if (!r.clean()) return ::testing::AssertionFailure() << "not a clean exit: " << r.describe();
  if (r.exitCode != 1) return ::testing::AssertionFailure() << "expected exit 1: " << r.describe();
  if (contains(r.err, "internal error")) return ::testing::AssertionFailure() << "an internal error: " << r.describe();
  if (!phrase.empty() && !contains(r.err, phrase))
    return ::testing::AssertionFailure() << "expected \"" << phrase << "\" on stderr: " << r.describe();
  if (r.seconds >= 15.0 * nnc_cli_test::timeScale())
    return ::testing::AssertionFailure() << "took " << r.seconds << " s: " << r.describe();
  return ::testing::AssertionSuccess();
}

// One mistake, one error: a residual body whose only layer is refused is not then also
// "a body with no layers" (it said so, a second and false error).
TEST(GeneratedInputs, ARefusedLayerAloneInAResidualIsReportedOnce) {
  TempDir dir;
  for (const char *layer : {"attention(0)", "dense(0)"}) {
    const Result r = runNnc(
        {dir.write("alone.nn", std::string("model m {\n  input x: [4, 8]\n  residual {\n    ") + layer + "\n  }\n}\n"),
         "--check"});
    EXPECT_TRUE(isUserError(r, "must be at least 1, found 0")) << layer;
    EXPECT_FALSE(contains(r.err, "has no layers")) << r.describe();
    EXPECT_FALSE(contains(r.err, "2 errors")) << r.describe();
  }
  // A body of lets alone has no layers, and says so.
  const Result lets = runNnc({dir.write("lets.nn", "model m {\n  input x: [4]\n  residual {\n    let a = 2\n  }\n}\n"), "--check"});
  EXPECT_TRUE(isUserError(lets, "residual body has no layers")) << lets.describe();
}

TEST(GeneratedInputs, EmptyFile) {
  TempDir dir;
  EXPECT_TRUE(isUserError(runNnc({dir.write("empty.nn", "")}), "the file is empty")) << "empty file";
  EXPECT_TRUE(isUserError(runNnc({dir.write("blank.nn", "\n \t\r\n")}), "the file is empty")) << "blank file";
}

TEST(GeneratedInputs, BinaryGarbage) {
  TempDir dir;
  std::mt19937 rng(20261129);
  for (size_t size : {1u, 17u, 4096u, 65536u, 1u << 20}) {
    std::string bytes(size, '\0');
    for (char &c : bytes) c = char(rng() & 0xff);
    std::string name = "garbage_" + std::to_string(size) + ".nn";
    EXPECT_TRUE(isUserError(runNnc({dir.write(name, bytes)}))) << name;
  }
  // Garbage inside an otherwise valid program, and a NUL byte in code.
  static const char nul[] = "model m {\n  input x: [4]\n  dense(\0)\n}\n";
  EXPECT_TRUE(isUserError(runNnc({dir.write("nul.nn", std::string(nul, sizeof nul - 1))}), "nul.nn:3:9:"))
      << "NUL in code";
}

std::string deepModel(const std::string &open, const std::string &middle, const std::string &close, int depth) {
  std::string s = "model m {\n  input x: [4]\n  ";
  for (int i = 0; i < depth; ++i) s += open;
  s += middle;
  for (int i = 0; i < depth; ++i) s += close;
  return s + "\n}\n";
}

TEST(GeneratedInputs, DeepNesting) {
  TempDir dir;
  EXPECT_TRUE(isUserError(runNnc({dir.write("parens.nn", deepModel("(", "dense(1)", ")", 10000))}),
                          "nested too deeply"))
      << "10,000 '('";
  const std::string args = std::string(10000, '(') + "1" + std::string(10000, ')');
  EXPECT_TRUE(isUserError(runNnc({dir.write("args.nn", "model m {\n  input x: [4]\n  dense(" + args + ")\n}\n")}),
                          "args.nn:3:"))
      << "10,000 '(' in an argument";
  EXPECT_TRUE(isUserError(runNnc({dir.write("braces.nn", deepModel("residual { ", "relu", " }", 10000))}),
                          "nested too deeply"))
      << "10,000 nested residual blocks";
  const std::string unclosed = "model m {\n  input x: [" + std::string(100000, '[') + "\n";
  EXPECT_TRUE(isUserError(runNnc({dir.write("unclosed.nn", unclosed)}), "nested too deeply"))
      << "100,000 unclosed '['";
}

// Block uses nest without brackets: b9999 uses b9998 ... uses b0 (it overflowed the
// stack), alone and with a residual around each use.
std::string blockChain(int depth, bool residuals) {
  std::string s = "block b0(w) { dense(w) }\n";
  for (int i = 1; i < depth; ++i)
    s += fmt::format(residuals ? "block b{}(w) {{ residual {{ b{}(w) }} }}\n" : "block b{}(w) {{ b{}(w) }}\n", i, i - 1);
  return s + fmt::format("model m {{\n  input x: [4]\n  b{}(4)\n}}\n", depth - 1);
}

TEST(GeneratedInputs, DeepBlockChains) {
  TempDir dir;
  EXPECT_TRUE(isUserError(runNnc({dir.write("chain.nn", blockChain(10000, false))}),
                          "nesting too deep: blocks, repeats and residuals expand here more than 200 levels deep"))
      << "10,000 blocks each using the last";
  EXPECT_TRUE(isUserError(runNnc({dir.write("residuals.nn", blockChain(4000, true))}),
                          "more than 200 levels deep"))
      << "4,000 blocks each using the last in a residual";
  // 200 levels are allowed: the model's body and 199 block bodies.
  const Result fine = runNnc({dir.write("fine.nn", blockChain(199, false)), "--check"});
  EXPECT_EQ(fine.exitCode, 0) << fine.err;
  // An empty block body one level deeper expands nothing and is no error; the layers
  // after the chain are kept (they were silently dropped, exit 0).
  std::string empty = blockChain(200, false);
  empty.replace(0, empty.find('\n'), "block b0(w) { }");
  empty.insert(empty.rfind('}'), "  dense(3)\n");
  const Result emptyBottom = runNnc({dir.write("empty.nn", empty), "--check"});
  EXPECT_EQ(emptyBottom.exitCode, 0) << emptyBottom.err;
  EXPECT_TRUE(contains(emptyBottom.out, "output f32[1, 3]")) << emptyBottom.out;
}

TEST(GeneratedInputs, LongExpressions) {
  TempDir dir;
  std::string sum = "1";
  for (int i = 0; i < 100000; ++i) sum += "+1";
  EXPECT_TRUE(isUserError(runNnc({dir.write("sum.nn", "model m {\n  input x: [4]\n  dense(" + sum + ")\n}\n")}),
                          "sum.nn:3:9:"))
      << "1+1+...+1, 100,000 operators";
  std::string signs;
  for (int i = 0; i < 100000; ++i) signs += "- ";
  EXPECT_TRUE(isUserError(runNnc({dir.write("signs.nn", "model m {\n  input x: [4]\n  dense(" + signs + "1)\n}\n")}),
                          "too many operators in a row"))
      << "100,000 unary minus signs";
  // The largest nesting each limit allows still parses (no stack exhaustion).
  std::string mixed;
  for (int i = 0; i < 190; ++i) mixed += "- - - - - - - - (";
  mixed += "1" + std::string(190, ')');
  Result r = runNnc({dir.write("mixed.nn", "model m {\n  input x: [4]\n  dense(" + mixed + ")\n}\n")});
  ASSERT_TRUE(r.clean()) << r.describe();
  EXPECT_LE(r.exitCode, 1) << r.describe();
}

// 2 MB of tokens of the language in random order: the parser must give up after a
// bounded number of errors instead of reporting (or recursing on) every one of them.
TEST(GeneratedInputs, TwoMegabytesOfRandomTokens) {
  static const char *tokens[] = {"model", "block", "let", "input", "repeat", "as", "residual", "shortcut",
                                 "dense", "relu", "conv2d", "attention", "f32", "i32", "x", "d", "n",
                                 "(", ")", "{", "}", "[", "]", ",", ";", ":", "=", "+", "-", "*", "/",
                                 "0", "1", "7", "32_000", "99999999999999999999", "1.5", "1e-5", "#c\n", "\n"};
  for (std::string prefix : {") ", "model m {\n  input x: [4]\n  dense("}) {
    std::mt19937 rng(7);
    std::string text = prefix; // ")": never a valid start; the model: errors inside a body
    int depth = 0;             // kept under the nesting limit, so the parser sees it all
    while (text.size() < (2u << 20)) {
      std::string t = tokens[rng() % (sizeof tokens / sizeof *tokens)];
      bool opens = t == "(" || t == "{" || t == "[", closes = t == ")" || t == "}" || t == "]";
      if (opens && depth >= 50) continue;
      depth += opens ? 1 : closes ? -1 : 0;
      depth = std::max(depth, 0);
      text += t + ' ';
    }
    TempDir dir;
    EXPECT_TRUE(isUserError(runNnc({dir.write("tokens.nn", text)}), "syntax error"))
        << "2 MB of random tokens after " + prefix;
  }
}

// 2 MB of well-formed statements with random, mostly wrong, arguments: parsing
// succeeds and the expander and shape checks see ~100,000 layers.
TEST(GeneratedInputs, TwoMegabytesOfRandomLayers) {
  static const char *layers[] = {"dense(%)", "relu", "conv2d(%, kernel=%)", "attention(%)", "maxpool(%)",
                                 "embedding(%, %)", "layernorm", "dropout(p=0.5)", "pos_embedding(%)",
                                 "residual { dense(%) }", "flatten", "global_avgpool", "dense(%, in=%)"};
  static const char *numbers[] = {"1", "2", "3", "7", "64", "0", "-1", "n", "n/2", "4_000_000_000"};
  std::mt19937 rng(11);
  std::string text = "model m(n = 8) {\n  input x: [3, 16, 16]\n";
  while (text.size() < (2u << 20)) {
    std::string l = layers[rng() % (sizeof layers / sizeof *layers)];
    for (size_t p; (p = l.find('%')) != std::string::npos;)
      l.replace(p, 1, numbers[rng() % (sizeof numbers / sizeof *numbers)]);
    text += "  " + l + "\n";
  }
  text += "}\n";
  TempDir dir;
  EXPECT_TRUE(isUserError(runNnc({dir.write("layers.nn", text)}))) << "2 MB of random layers";
}

// Every single-byte deletion, and random byte changes, of a valid program: each result
// either compiles or is a user error; none crashes.
TEST(GeneratedInputs, MutationsOfAValidProgram) {
  std::string base = readFile(kSeedMnist);
  ASSERT_FALSE(base.empty());
  TempDir dir;
  std::mt19937 rng(3);
  static const char replacements[] = "(){}[]=,;:#-+*/0 9x\n\xff";
  for (int i = 0; i < 120; ++i) {
    std::string text = base;
    if (i < 60) {
      text.erase(rng() % text.size(), 1 + rng() % 3);
    } else {
      for (int k = 0; k < 3; ++k) text[rng() % text.size()] = replacements[rng() % (sizeof replacements - 1)];
    }
    Result r = runNnc({dir.write("mutant.nn", text), "--check"});
    ASSERT_TRUE(r.clean()) << "mutant " << i << ":\n" << text << "\n" << r.describe();
    ASSERT_LE(r.exitCode, 1) << "mutant " << i << ":\n" << text << "\n" << r.describe();
  }
}

// ------------------------------------------------------------------ command line

TEST(CliUsage, NoArgumentsIsUsage) {
  Result r = runNnc({});
  ASSERT_TRUE(r.clean()) << r.describe();
  EXPECT_EQ(r.exitCode, 2) << r.describe();
  EXPECT_TRUE(contains(r.err, "FILE")) << r.describe();
}

TEST(CliUsage, UnknownFlagIsUsage) {
  Result r = runNnc({kSeedMnist, "--frobnicate"});
  ASSERT_TRUE(r.clean()) << r.describe();
  EXPECT_EQ(r.exitCode, 2) << r.describe();
  EXPECT_TRUE(contains(r.err, "--frobnicate")) << r.describe();
}

TEST(CliUsage, RunWithoutWeightsIsUsage) {
  Result r = runNnc({kSeedMnist, "--run", "x.npy"});
  ASSERT_TRUE(r.clean()) << r.describe();
  EXPECT_EQ(r.exitCode, 2) << r.describe();
  EXPECT_TRUE(contains(r.err, "--weights")) << r.describe();
  EXPECT_TRUE(contains(r.err, "--random-weights")) << r.describe();
}

TEST(CliUsage, BadNumbersAreUsage) {
  for (std::vector<std::string> args : {std::vector<std::string>{kSeedMnist, "--batch", "0"},
                                        {kSeedMnist, "--set", "hidden=abc"}}) {
    Result r = runNnc(args);
    ASSERT_TRUE(r.clean()) << r.describe();
    EXPECT_EQ(r.exitCode, 2) << args[1] << " " << args[2] << "\n" << r.describe();
  }
}

TEST(CliUsage, MissingFileIsAUserError) {
  Result r = runNnc({"tests/bad/no_such_file.nn"});
  ASSERT_TRUE(r.clean()) << r.describe();
  EXPECT_EQ(r.exitCode, 1) << r.describe();
  EXPECT_TRUE(contains(r.err, "no_such_file.nn")) << r.describe();
  EXPECT_TRUE(contains(r.err, "cannot open")) << r.describe();
}

// `--output=` wrote no file and `--weight-map ""` applied no map, with exit 0.
TEST(CliUsage, EmptyValuesAreUsage) {
  for (const char *flag : {"--output=", "--svg=", "--weight-map="}) {
    Result r = runNnc({kSeedMnist, "--run", "x.npy", "--weights", "w.safetensors", flag});
    ASSERT_TRUE(r.clean()) << r.describe();
    EXPECT_EQ(r.exitCode, 2) << flag << "\n" << r.describe();
    EXPECT_TRUE(contains(r.err, "needs a value, found an empty one")) << r.describe();
  }
}

TEST(CliUsage, DirectoryIsAUserError) { // it said "the file is empty"
  Result r = runNnc({"tests/bad"});
  ASSERT_TRUE(r.clean()) << r.describe();
  EXPECT_EQ(r.exitCode, 1) << r.describe();
  EXPECT_TRUE(contains(r.err, "tests/bad: is a directory: expected a .nn file")) << r.describe();
}

TEST(CliUsage, SetUnknownParameterListsTheParameters) {
  Result r = runNnc({kSeedMnist, "--set", "nosuch=3"});
  ASSERT_TRUE(r.clean()) << r.describe();
  EXPECT_EQ(r.exitCode, 1) << r.describe();
  EXPECT_TRUE(contains(r.err, "no parameter 'nosuch'")) << r.describe();
  EXPECT_TRUE(contains(r.err, "batch, hidden")) << r.describe();
}

// A second --sweep relabelled the first one's values as the second's parameter;
// --explain and --svg were dropped without a word.
TEST(CliUsage, SweepIsOneParameterOfOneReport) {
  const std::string model = "examples/seeds/mnist_hidden.nn";
  for (std::vector<std::string> args : {std::vector<std::string>{model, "--sweep", "hidden=3", "--sweep", "batch=2"},
                                        {model, "--sweep", "hidden=3,4", "--explain"},
                                        {model, "--sweep", "hidden=3,4", "--svg", "/dev/null"}}) {
    Result r = runNnc(args);
    ASSERT_TRUE(r.clean()) << r.describe();
    EXPECT_EQ(r.exitCode, 2) << args[3] << "\n" << r.describe();
    EXPECT_TRUE(r.out.empty()) << r.describe();
  }
  Result r = runNnc({model, "--sweep", "hiden=3,4"});
  EXPECT_EQ(r.exitCode, 1) << r.describe();
  EXPECT_TRUE(contains(r.err, "no parameter 'hiden' to set; did you mean 'hidden'?")) << r.describe();
  EXPECT_FALSE(contains(r.err, "--set")) << r.describe();
}

// A value from outside the file that the model cannot take: the error points at the
// source, which shows only the parameter, and a note gives the value and where it came from.
TEST(CliUsage, AnErrorFromASetValueNotesTheValue) {
  TempDir dir;
  const std::string model = dir.write("s.nn", "model s(h = 8) {\n  input x: [h]\n  dense(4)\n}\n");
  for (const char *flag : {"--set", "--sweep"}) {
    Result r = runNnc({model, flag, "h=0"});
    ASSERT_TRUE(r.clean()) << r.describe();
    EXPECT_EQ(r.exitCode, 1) << r.describe();
    EXPECT_TRUE(contains(r.err, "s.nn:2:13: error: input dimension must be at least 1, found 0")) << r.describe();
    EXPECT_TRUE(contains(r.err, "note: the model's parameters set from outside the file (--set, --sweep or "
                                "Options::set): h=0"))
        << r.describe();
  }
  Result fine = runNnc({model, "--set", "h=3"});
  EXPECT_EQ(fine.exitCode, 0) << fine.describe();
  EXPECT_FALSE(contains(fine.err, "note:")) << fine.describe();
}

TEST(CliUsage, SetMisspeltParameterSuggests) {
  Result r = runNnc({kSeedMnist, "--set", "hiden=3"});
  ASSERT_TRUE(r.clean()) << r.describe();
  EXPECT_EQ(r.exitCode, 1) << r.describe();
  EXPECT_TRUE(contains(r.err, "did you mean 'hidden'?")) << r.describe();
}

const char *kTwoModels = "model alpha {\n  input x: [4]\n  dense(2)\n}\nmodel beta {\n  input x: [8]\n  dense(3)\n}\n";

TEST(CliUsage, SeveralModelsNeedModel) {
  TempDir dir;
  std::string file = dir.write("two.nn", kTwoModels);
  Result r = runNnc({file, "--check"});
  ASSERT_TRUE(r.clean()) << r.describe();
  EXPECT_EQ(r.exitCode, 1) << r.describe();
  EXPECT_TRUE(contains(r.err, "alpha")) << r.describe();
  EXPECT_TRUE(contains(r.err, "beta")) << r.describe();
  EXPECT_TRUE(contains(r.err, "--model")) << r.describe();
  Result ok = runNnc({file, "--check", "--model", "beta"});
  EXPECT_EQ(ok.exitCode, 0) << ok.describe();
}

TEST(CliUsage, MisspeltModelSuggests) {
  TempDir dir;
  std::string file = dir.write("two.nn", kTwoModels);
  for (const char *typo : {"alpah", "bta"}) {
    Result r = runNnc({file, "--check", "--model", typo});
    ASSERT_TRUE(r.clean()) << r.describe();
    EXPECT_EQ(r.exitCode, 1) << r.describe();
    EXPECT_TRUE(contains(r.err, std::string("no model named '") + typo + "' in this file (its models: alpha, beta)"))
        << r.describe();
    EXPECT_TRUE(contains(r.err, std::string("did you mean '") + (typo[0] == 'a' ? "alpha" : "beta") + "'?"))
        << r.describe();
  }
}

} // namespace

TEST(CliUsage, ThreadCountIsBounded) {
  Result r = runNnc({"examples/seeds/mnist.nn", "--bench", "--random-weights", "1", "--threads", "100000"});
  EXPECT_EQ(r.exitCode, 2) << r.describe();
  EXPECT_NE(r.err.find("--threads must be at most 256, found 100000"), std::string::npos) << r.describe();
}
