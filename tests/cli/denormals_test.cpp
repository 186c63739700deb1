// --denormals (docs/cli.md): a run reads a subnormal input as zero unless told to keep
// subnormals; --bench says which it did. Inputs are raw little-endian f32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "NncProcess.h"

namespace {

using nnc_cli_test::Result;
using nnc_cli_test::runNnc;
using nnc_cli_test::TempDir;

std::vector<float> floatsIn(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

// 8 inputs of 2^-130 (subnormal) through a dense layer of random weights (|w| < 1/√8):
// every product and the sums are subnormal too.
std::vector<float> outputOf(const std::vector<std::string> &denormals) {
  TempDir dir;
  const std::string model = dir.write("m.nn", "model m {\n  input x: [8]\n  fc = dense(4, bias=false)\n}\n");
  const float x = std::ldexp(1.0f, -130);
  std::string input;
  for (int i = 0; i < 8; ++i) input.append(reinterpret_cast<const char *>(&x), 4);
  const std::string out = dir.write("y.raw", "");
  std::vector<std::string> args = {model, "--run", dir.write("x.raw", input), "--random-weights", "1", "--output", out};
  args.insert(args.end(), denormals.begin(), denormals.end());
  const Result r = runNnc(args);
  EXPECT_EQ(r.exitCode, 0) << r.describe();
  return floatsIn(out);
}

TEST(Denormals, ARunReadsSubnormalInputsAsZeroUnlessToldToKeepThem) {
  for (const auto &flushed : {outputOf({}), outputOf({"--denormals", "flush"})})
    EXPECT_EQ(flushed, std::vector<float>(4, 0.0f));
  const std::vector<float> kept = outputOf({"--denormals", "keep"});
  ASSERT_EQ(kept.size(), 4u);
  int nonzero = 0;
  for (float y : kept) {
    EXPECT_LT(std::fabs(y), std::ldexp(1.0f, -126)) << y; // subnormal
    nonzero += y != 0;
  }
  EXPECT_GE(nonzero, 3) << "of 4 sums of 8 random products"; // a sum can cancel to 0, hardly two
}

TEST(Denormals, BenchSaysWhichItRan) {
  for (const char *mode : {"flush", "keep"}) {
    const Result r = runNnc({"examples/seeds/mnist.nn", "--bench", "--random-weights", "1", "--runs", "2", "--format",
                             "json", "--denormals", mode},
                            120);
    ASSERT_EQ(r.exitCode, 0) << r.describe();
    EXPECT_EQ(nlohmann::json::parse(r.out)["denormals"], mode);
  }
  const Result bad = runNnc({"examples/seeds/mnist.nn", "--bench", "--random-weights", "1", "--denormals", "ieee"});
  EXPECT_EQ(bad.exitCode, 2) << bad.describe();
  EXPECT_NE(bad.err.find("--denormals expects flush or keep, found 'ieee'"), std::string::npos) << bad.err;
}

} // namespace
