// CompiledModel::run reads the caller's input and writes the caller's output in place;
// the results must not depend on that: same outputs when the buffers are separate,
// when they are one buffer (copied through the arena), when the output is a view of the
// input, and with a residual that reads the input.
#include <gtest/gtest.h>

#include <vector>

#include "CompileHelpers.h"
#include "runtime/model/CompiledModel.h"

namespace nnc::testing {
namespace {

runtime::JitEngine &jit() {
  static auto engine = runtime::JitEngine::create();
  return *engine;
}

struct Ran {
  std::vector<float> separate, shared;
};

// Runs `source` (input and output of n floats each) on x twice: into a separate
// output buffer, and with input and output the same buffer.
Ran runBoth(const std::string &source, const std::vector<float> &x, int threads) {
  auto c = test::compile(source, {}, true);
  EXPECT_TRUE(c.ok) << c.diagnostics;
  runtime::CompiledModel model(c.program(), jit(), threads);
  model.setWeights(runtime::WeightStore::random(model.program().tensors, 3));
  const size_t n = size_t(model.outputType().elements());
  EXPECT_EQ(size_t(model.inputType().elements()), x.size());
  Ran r;
  r.separate.assign(n, -1.0f);
  model.run(x.data(), r.separate.data());
  r.shared = x;
  model.run(r.shared.data(), r.shared.data());
  return r;
}

std::vector<float> ramp(size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = float(i % 7) * 0.25f - 0.7f;
  return x;
}

TEST(ModelBuffers, SameResultsWhetherInputAndOutputAreSeparateOrOneBuffer) {
  for (int threads : {1, 2}) {
    // One layer: computed in place, its later panels would read inputs that its first
    // panels had already overwritten.
    for (const char *source : {"model m { input x: [40]\n a = dense(40) }",
                               "model m { input x: [40]\n a = dense(40) relu\n b = dense(40) }"}) {
      auto r = runBoth(source, ramp(40), threads);
      EXPECT_EQ(r.separate, r.shared) << source;
      EXPECT_NE(r.separate, std::vector<float>(40, -1.0f));
    }
  }
}

TEST(ModelBuffers, ResidualThatReadsTheInput) {
  auto r = runBoth("model m { input x: [24]\n residual { a = dense(24) relu } }", ramp(24), 2);
  EXPECT_EQ(r.separate, r.shared);
}

TEST(ModelBuffers, OutputThatIsAViewOfTheInputIsCopied) {
  auto x = ramp(12);
  auto r = runBoth("model m { input x: [12]\n d = dropout(0.1) }", x, 1);
  EXPECT_EQ(r.separate, x);
  EXPECT_EQ(r.shared, x);
}

TEST(ModelBuffers, InputIsNotModified) {
  auto c = test::compile("model m { input x: [32]\n a = dense(16) relu\n b = dense(32) }", {}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  runtime::CompiledModel model(c.program(), jit(), 2);
  model.setWeights(runtime::WeightStore::random(model.program().tensors, 5));
  auto x = ramp(32), before = x;
  std::vector<float> y(32);
  model.run(x.data(), y.data());
  EXPECT_EQ(x, before);
}

} // namespace
} // namespace nnc::testing
