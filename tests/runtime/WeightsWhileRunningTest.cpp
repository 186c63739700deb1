// CompiledModel::setWeightsWhileRunning: the constants made on the cores the model's
// threads leave free, while it runs, give the same bits as setWeights; a constant that
// cannot be made fails the run that reads it (and waitForWeights) with setWeights'
// error; what is made in the background reaches the weight cache; a model destroyed
// before its constants are all made waits for its builders. Also run under
// ThreadSanitizer (tools/tsan.sh).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CompileHelpers.h"
#include "compiler/support/Error.h"
#include "runtime/io/SafeTensors.h"
#include "runtime/model/CompiledModel.h"
#include "ScopedEnv.h"
#include "WeightFiles.h"

namespace nnc::testing {
namespace {
namespace fs = std::filesystem;

runtime::JitEngine &jit() {
  static auto engine = runtime::JitEngine::create();
  return *engine;
}

// GEMMs packed in four storage dtypes, with a norm and an epilogue between them.
constexpr const char *kSource = "model m { input x: [3, 64]\n"
                                "  a = dense(96, dtype=i4) relu\n"
                                "  b = dense(80, dtype=i8)\n"
                                "  n = layernorm\n"
                                "  c = dense(72) gelu\n"
                                "  d = dense(40, dtype=f16) }";

// Whether this host has a core the model's one thread leaves free (else the call is
// setWeights, and the tests check that instead).
bool coreLeftFree() { return std::thread::hardware_concurrency() > 1; }

std::vector<float> input(const runtime::CompiledModel &model) {
  std::vector<float> x(size_t(model.inputType().elements()));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 13) * 0.15f - 0.9f;
  return x;
}

struct TempDir : test::TempDir {
  TempDir() : test::TempDir("nnc_while_running_") {}
};

TEST(WeightsWhileRunning, SameBitsAsSetWeights) {
  auto c = test::compile(kSource, {}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  runtime::CompiledModel before(c.program(), jit(), 1), during(c.program(), jit(), 1);
  auto weights = std::make_shared<const runtime::WeightStore>(runtime::WeightStore::random(c.program().tensors, 7));
  before.setWeights(*weights);
  const std::vector<float> x = input(before);
  std::vector<float> want(size_t(before.outputType().elements())), got(want.size(), -1.0f);
  before.run(x.data(), want.data());

  EXPECT_EQ(during.setWeightsWhileRunning(weights), coreLeftFree());
  weights.reset(); // the model holds the store until its constants are made
  during.run(x.data(), got.data());
  EXPECT_EQ(got, want);
  // Once they are all made: the same figures as setWeights gives.
  EXPECT_EQ(during.constantBytes(), before.constantBytes());
  EXPECT_EQ(during.packedConstantBytes(), before.packedConstantBytes());
  EXPECT_GE(during.weightsMillis(), 0.0);
  std::fill(got.begin(), got.end(), -1.0f);
  during.run(x.data(), got.data());
  EXPECT_EQ(got, want);
}

// NNC_WEIGHTS_WHILE_RUNNING=off: every constant made before the call returns.
TEST(WeightsWhileRunning, OffInTheEnvironmentIsSetWeights) {
  auto c = test::compile(kSource, {}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  test::ScopedEnv off("NNC_WEIGHTS_WHILE_RUNNING", "off");
  runtime::CompiledModel model(c.program(), jit(), 1);
  EXPECT_FALSE(model.setWeightsWhileRunning(
      std::make_shared<const runtime::WeightStore>(runtime::WeightStore::random(c.program().tensors, 7))));
  EXPECT_GT(model.constantBytes(), 0);
}

// A weight i8 cannot store (inf) in the second layer: setWeights throws; in the
// background the run that reads that layer throws the same error, as does waitForWeights.
TEST(WeightsWhileRunning, AConstantThatCannotBeMadeFailsTheRun) {
  auto c = test::compile(kSource, {}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  TempDir dir;
  std::vector<NamedF32Tensor> tensors = test::randomWeightsFor(c.program(), 1);
  bool planted = false;
  for (auto &t : tensors)
    if (t.name == "b.weight") t.data[5] = std::numeric_limits<float>::infinity(), planted = true;
  ASSERT_TRUE(planted);
  const std::string file = (dir.path / "w.safetensors").string();
  writeSafeTensors(file, tensors);

  std::string expected;
  {
    runtime::CompiledModel model(c.program(), jit(), 1);
    try {
      model.setWeights(runtime::WeightStore::fromSafeTensors(c.program().tensors, file, "m"));
      FAIL() << "setWeights took an inf as i8";
    } catch (const UserError &e) {
      expected = e.what();
    }
  }
  EXPECT_NE(expected.find("b"), std::string::npos) << expected;
  EXPECT_NE(expected.find("inf"), std::string::npos) << expected;

  runtime::CompiledModel model(c.program(), jit(), 1);
  const bool background = model.setWeightsWhileRunning(std::make_shared<const runtime::WeightStore>(
      runtime::WeightStore::fromSafeTensors(c.program().tensors, file, "m")));
  if (!background) GTEST_SKIP() << "one core: setWeights threw above already";
  const std::vector<float> x = input(model);
  std::vector<float> y(size_t(model.outputType().elements()));
  try {
    model.run(x.data(), y.data());
    FAIL() << "the run read a constant that was never made";
  } catch (const UserError &e) {
    EXPECT_EQ(std::string(e.what()), expected);
  }
  try {
    model.waitForWeights();
    FAIL() << "waitForWeights did not report the failed constant";
  } catch (const UserError &e) {
    EXPECT_EQ(std::string(e.what()), expected);
  }
}

// Constants made in the background are stored in the weight cache as setWeights' are:
// the next start maps them and computes the same bits.
TEST(WeightsWhileRunning, WhatIsMadeReachesTheWeightCache) {
  auto c = test::compile(kSource, {}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  TempDir dir;
  const std::string file = (dir.path / "w.safetensors").string();
  writeSafeTensors(file, test::randomWeightsFor(c.program(), 2));
  fs::last_write_time(file, fs::last_write_time(file) - std::chrono::hours(1)); // old enough to identify
  test::ScopedEnv on("NNC_WEIGHT_CACHE", "on"), at("NNC_WEIGHT_CACHE_DIR", (dir.path / "cache").string());
  std::vector<float> first, second;
  {
    runtime::CompiledModel model(c.program(), jit(), 1);
    model.setWeightsWhileRunning(std::make_shared<const runtime::WeightStore>(
        runtime::WeightStore::fromSafeTensors(c.program().tensors, file, "m")));
    const std::vector<float> x = input(model);
    first.resize(size_t(model.outputType().elements()));
    model.run(x.data(), first.data());
    EXPECT_FALSE(model.weightsFromCache());
    model.waitForWeights(); // the store, after the last constant
  }
  runtime::CompiledModel model(c.program(), jit(), 1);
  model.setWeights(runtime::WeightStore::fromSafeTensors(c.program().tensors, file, "m"));
  EXPECT_TRUE(model.weightsFromCache());
  const std::vector<float> x = input(model);
  second.resize(size_t(model.outputType().elements()));
  model.run(x.data(), second.data());
  EXPECT_EQ(second, first);
}

// Destroyed (or given other weights) while its builders run: it waits for them first.
TEST(WeightsWhileRunning, ModelOutlivesItsBuilders) {
  auto c = test::compile("model m { input x: [2, 1024]\n"
                         "  repeat 6 { dense(1024, dtype=i4) relu } }",
                         {}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  auto weights = std::make_shared<const runtime::WeightStore>(runtime::WeightStore::random(c.program().tensors, 3));
  { // destroyed at once
    runtime::CompiledModel model(c.program(), jit(), 1);
    model.setWeightsWhileRunning(weights);
  }
  runtime::CompiledModel reference(c.program(), jit(), 1), model(c.program(), jit(), 1);
  reference.setWeights(*weights);
  model.setWeightsWhileRunning(weights);
  model.setWeights(*weights); // replaces the constants being made
  const std::vector<float> x = input(model);
  std::vector<float> want(size_t(model.outputType().elements())), got(want.size());
  reference.run(x.data(), want.data());
  model.run(x.data(), got.data());
  EXPECT_EQ(got, want);
}

} // namespace
} // namespace nnc::testing
