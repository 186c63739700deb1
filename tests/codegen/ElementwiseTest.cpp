// Standalone elementwise kernels against double-precision std:: references.
// Tolerances (per element), with the reason for each:
//   relu, relu6, add           exact (no rounding involved beyond the one f32 add)
//   sigmoid, tanh, silu, gelu  |err| <= 1e-6 |ref| + 1e-38   (relative; the absolute
//                              floor only matters for denormal results)
//   gelu_tanh                  |err| <= 1e-6 |ref| + 1e-7 |x|  (PyTorch's f32 formula
//                              cancels in 1 + tanh(u) for x << 0; the bound is on the
//                              absolute error that cancellation leaves, same as PyTorch's)
//   softmax                    |err| <= (2e-6 + 6e-8 |x - max|) |ref| + 1e-38  (x - max
//                              is rounded to f32 first, as in PyTorch; exp turns that
//                              absolute rounding into this relative error)
// sigmoid over [-100, 100] also pins exp's relative accuracy over its whole range
// (sigmoid(x) ≈ exp(x) for x << 0), including denormal and overflowing exp.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>
#include <vector>

#include "GemmReference.h"

namespace nnc::testing {
namespace {

using codegen::Activation;
using codegen::ElementwiseSpec;

// Inputs: a fine grid over [-20, 20], magnitudes 1e-30..1e3 of both signs, and extremes.
std::vector<float> activationInputs() {
  std::vector<float> x;
  for (int i = -200000; i <= 200000; i += 7) x.push_back(float(i) * 1e-4f);
  for (double mag = 1e-30; mag < 1e3; mag *= 1.01) {
    x.push_back(float(mag));
    x.push_back(float(-mag));
  }
  for (float v : {0.0f, -0.0f, 88.0f, 89.5f, -87.5f, -103.0f, -104.5f, 1e30f, -1e30f})
    x.push_back(v);
  return x;
}

// Every activation on `jit` against the double reference, with the tolerances above.
::testing::AssertionResult activationsMatch(runtime::JitEngine& jit, const char* row) {
  std::vector<float> x = activationInputs();
  const int64_t cols = 997; // prime: exercises the masked tail of every row
  x.resize((x.size() + cols - 1) / cols * cols, 0.5f);
  const int64_t rows = int64_t(x.size()) / cols;
  for (Activation act : codegen::kAllActivations) {
    runtime::Elementwise kernel(jit, ElementwiseSpec{ElementwiseSpec::Activation, act, rows, cols});
    std::vector<float> out(x.size());
    kernel.run(x.data(), nullptr, out.data(), &twoThreads());
    double worstRelative = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      double ref = referenceActivation(act, x[i]);
      double err = std::fabs(double(out[i]) - ref);
      double tol = act == Activation::Relu || act == Activation::Relu6 || act == Activation::None
                       ? 0.0
                   : act == Activation::GeluTanh ? 1e-6 * std::fabs(ref) + 1e-7 * std::fabs(x[i])
                                                 : 1e-6 * std::fabs(ref) + 1e-38;
      if (std::fabs(ref) > 1e-30) worstRelative = std::max(worstRelative, err / std::fabs(ref));
      if (!(err <= tol))
        return ::testing::AssertionFailure() << row << ": " << activationName(act) << "(" << x[i] << "): got "
                                             << out[i] << ", want " << ref;
    }
    std::ostringstream worst;
    worst << std::scientific << worstRelative;
    ::testing::Test::RecordProperty(std::string(row) + "_" + std::string(activationName(act)) +
                                        "_worst_relative",
                                    worst.str());
  }
  return ::testing::AssertionSuccess();
}

TEST(Elementwise, ActivationsMatchDoubleReference) {
  EXPECT_TRUE(activationsMatch(hostJit(), "host"));
}

// The SSE2 baseline row has no FMA: mulAdd is a rounded multiply then add, which the
// polynomials and GELU's split of x² must tolerate.
TEST(Elementwise, ActivationsMatchDoubleReferenceWithoutFma) {
  auto jit = runtime::JitEngine::create({"x86-64", ""});
  EXPECT_TRUE(activationsMatch(*jit, "sse2"));
}

TEST(Elementwise, NaNPropagatesThroughEveryActivation) {
  std::vector<float> x(9, std::nanf(""));
  for (Activation act : codegen::kAllActivations) {
    if (act == Activation::None) continue;
    runtime::Elementwise kernel(hostJit(), ElementwiseSpec{ElementwiseSpec::Activation, act, 1, 9});
    std::vector<float> out(9, 0.0f);
    kernel.run(x.data(), nullptr, out.data());
    for (float v : out) EXPECT_TRUE(std::isnan(v)) << activationName(act);
  }
}

TEST(Elementwise, SoftmaxOverLastAxis) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uni(-30.0f, 30.0f);
  std::vector<int64_t> widths;
  for (int64_t c = 1; c <= 67; ++c) widths.push_back(c);
  for (int64_t c : {97, 255, 1000}) widths.push_back(c);
  for (int64_t cols : widths) {
    const int64_t rows = 5;
    std::vector<float> x(size_t(rows * cols)), out(x.size());
    for (float& v : x) v = uni(rng);
    x[0] = 80.0f; // exp(80 - max) must not overflow: the max is subtracted
    runtime::Elementwise(hostJit(), ElementwiseSpec{ElementwiseSpec::Softmax, Activation::None, rows, cols})
        .run(x.data(), nullptr, out.data(), &twoThreads());
    for (int64_t r = 0; r < rows; ++r) {
      double mx = -INFINITY, sum = 0;
      for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, double(x[size_t(r * cols + c)]));
      for (int64_t c = 0; c < cols; ++c) sum += std::exp(double(x[size_t(r * cols + c)]) - mx);
      for (int64_t c = 0; c < cols; ++c) {
        double shifted = double(x[size_t(r * cols + c)]) - mx;
        double ref = std::exp(shifted) / sum;
        ASSERT_LE(std::fabs(out[size_t(r * cols + c)] - ref),
                  (2e-6 + 6e-8 * std::fabs(shifted)) * ref + 1e-38)
            << "softmax cols=" << cols << " row " << r << " col " << c;
      }
    }
  }
}

TEST(Elementwise, SoftmaxInPlace) {
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  runtime::Elementwise(hostJit(), ElementwiseSpec{ElementwiseSpec::Softmax, Activation::None, 1, 11})
      .run(x.data(), nullptr, x.data());
  double sum = 0;
  for (float v : x) sum += v;
  EXPECT_NEAR(sum, 1.0, 1e-6);
  EXPECT_NEAR(x[10], std::exp(0.0) / (std::exp(-10.0) * (1 - std::exp(11.0)) / (1 - std::exp(1.0))), 1e-6);
}

TEST(Elementwise, AddIsExact) {
  for (int64_t cols : {1, 7, 8, 9, 33, 1000}) {
    const int64_t rows = 3;
    std::vector<float> a(size_t(rows * cols)), b(a.size()), out(a.size() + 8, -1.0f);
    for (size_t i = 0; i < a.size(); ++i) a[i] = float(i) * 0.37f, b[i] = 1.0f / float(i + 1);
    runtime::Elementwise(hostJit(), ElementwiseSpec{ElementwiseSpec::Add, Activation::None, rows, cols})
        .run(a.data(), b.data(), out.data(), &twoThreads());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(out[i], a[i] + b[i]) << "cols=" << cols;
    for (size_t i = a.size(); i < out.size(); ++i) ASSERT_EQ(out[i], -1.0f) << "overrun, cols=" << cols;
  }
}

// gated_mlp's product: out = act(gate) · up, against the double reference of the
// activation times up (one more rounding than the activation alone), also in place.
TEST(Elementwise, GatedProductIsActivationTimesUp) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uni(-8.0f, 8.0f);
  for (Activation act : {Activation::Silu, Activation::Gelu, Activation::GeluTanh, Activation::Relu}) {
    for (int64_t cols : {1, 7, 8, 9, 33, 100}) {
      const int64_t rows = 4;
      std::vector<float> g(size_t(rows * cols)), u(g.size()), out(g.size() + 8, -1.0f);
      for (size_t i = 0; i < g.size(); ++i) g[i] = uni(rng), u[i] = uni(rng);
      runtime::Elementwise kernel(hostJit(), ElementwiseSpec{ElementwiseSpec::GatedProduct, act, rows, cols});
      kernel.run(g.data(), u.data(), out.data(), &twoThreads());
      for (size_t i = 0; i < g.size(); ++i) {
        double ref = referenceActivation(act, g[i]) * double(u[i]);
        ASSERT_LE(std::fabs(out[i] - ref), 2e-6 * std::fabs(ref) + 1e-7 * std::fabs(g[i]) * std::fabs(u[i]) + 1e-30)
            << activationName(act) << " cols=" << cols << " i=" << i;
      }
      for (size_t i = g.size(); i < out.size(); ++i) ASSERT_EQ(out[i], -1.0f) << "overrun, cols=" << cols;
      std::vector<float> inPlace = g;
      kernel.run(inPlace.data(), u.data(), inPlace.data());
      for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(inPlace[i], out[i]);
    }
  }
  EXPECT_NE((ElementwiseSpec{ElementwiseSpec::GatedProduct, Activation::Silu, 1, 8}.key()),
            (ElementwiseSpec{ElementwiseSpec::GatedProduct, Activation::Gelu, 1, 8}.key()));
}

// pos_embedding: row r adds the table's row r mod period (batch · seq rows, seq = period).
TEST(Elementwise, AddPositionsAddsTheTableRowOfEachPosition) {
  for (int64_t cols : {1, 5, 8, 17}) {
    const int64_t seq = 3, batch = 4, rows = batch * seq, maxLen = 7;
    std::vector<float> x(size_t(rows * cols)), table(size_t(maxLen * cols)), out(x.size() + 8, -1.0f);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(i) * 0.5f;
    for (size_t i = 0; i < table.size(); ++i) table[i] = 1.0f / float(i + 1);
    ElementwiseSpec s{ElementwiseSpec::AddPositions, Activation::None, rows, cols};
    s.period = seq;
    runtime::Elementwise(hostJit(), s).run(x.data(), table.data(), out.data(), &twoThreads());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        ASSERT_EQ(out[size_t(r * cols + c)], x[size_t(r * cols + c)] + table[size_t((r % seq) * cols + c)])
            << "cols=" << cols << " row " << r;
    for (size_t i = x.size(); i < out.size(); ++i) ASSERT_EQ(out[i], -1.0f) << "overrun, cols=" << cols;
  }
  ElementwiseSpec a{ElementwiseSpec::AddPositions, Activation::None, 6, 8}, b = a;
  a.period = 3, b.period = 2;
  EXPECT_NE(a.key(), b.key());
  a.period = 0;
  EXPECT_THROW(codegen::validateElementwiseSpec(a), std::invalid_argument);
}

} // namespace
} // namespace nnc::testing
