// Every GEMM code path against the double reference (GemmReference.h): each sweep
// walks one dimension through 1..67 (all M tails and row-block counts, all N tails and
// panel counts, all K remainders), a cross product of the boundary values, random
// shapes, and large/prime shapes. Each distinct shape is its own compiled kernel, so
// the covering is chosen to keep the binary near a minute on 2 cores.
#include <gtest/gtest.h>

#include <random>

#include "GemmReference.h"

namespace nnc::testing {
namespace {

using codegen::Activation;
using codegen::GemmSpec;

TEST(GemmShapes, EveryMFrom1To67) {
  for (int64_t m = 1; m <= 67; ++m) ASSERT_TRUE(checkGemm(hostJit(), GemmSpec{m, 19, 7, true}));
}

TEST(GemmShapes, EveryNFrom1To67) {
  for (int64_t n = 1; n <= 67; ++n) ASSERT_TRUE(checkGemm(hostJit(), GemmSpec{7, n, 5, true}));
}

TEST(GemmShapes, EveryKFrom1To67) {
  for (int64_t k = 1; k <= 67; ++k) ASSERT_TRUE(checkGemm(hostJit(), GemmSpec{7, 19, k}));
}

// Boundaries of every blocking parameter, all combined: row blocks (MR = 4 or 6),
// panels (NR = 8 or 16) and the ×4 K unroll.
TEST(GemmShapes, CrossOfBoundaryValues) {
  for (int64_t m : {1, 4, 5, 6, 7, 13})
    for (int64_t n : {1, 8, 15, 16, 17, 32, 33, 49})
      for (int64_t k : {1, 3, 4, 5, 8, 9}) ASSERT_TRUE(checkGemm(hostJit(), GemmSpec{m, n, k}));
}

TEST(GemmShapes, RandomShapesUpTo67) {
  std::mt19937 rng(2024);
  std::uniform_int_distribution<int64_t> dim(1, 67);
  for (int i = 0; i < 120; ++i) {
    GemmSpec s{dim(rng), dim(rng), dim(rng), bool(i % 2)};
    ASSERT_TRUE(checkGemm(hostJit(), s));
  }
}

TEST(GemmShapes, LargeAndPrimeShapes) {
  const GemmSpec shapes[] = {
      {97, 128, 255, true}, {255, 257, 97, true, Activation::Relu}, {64, 784, 256, true, Activation::Relu},
      {1, 1000, 784, true}, {128, 97, 1000}, {257, 255, 128, false, Activation::None, true},
      {784, 67, 97, true, Activation::Gelu}, {1, 257, 1000, true, Activation::Tanh, true},
  };
  for (const GemmSpec& s : shapes) ASSERT_TRUE(checkGemm(hostJit(), s));
}

} // namespace
} // namespace nnc::testing
