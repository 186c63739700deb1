// Blocks of few rows (M = 1..8, and the M tails of larger M) accumulate over K in
// 2 or 4 independent accumulator sets (GemmEmitter.h, accumulatorSets). Every M in
// 1..8 against the double reference (GemmReference.h) on N and K chosen to hit each
// K remainder of the ×4 unroll and of every set count, the N tails and panel counts,
// and primes; plus the set counts themselves.
#include <gtest/gtest.h>

#include "GemmReference.h"

namespace nnc::testing {
namespace {

using codegen::Activation;
using codegen::GemmSpec;

TEST(GemmSmallM, AccumulatorSetsKeepEnoughChainsInRegisters) {
  const codegen::MicroKernelShape& shape = hostJit().microKernel();
  const int64_t vectorsPerRow = shape.NR / shape.vectorFloats;
  for (int64_t rows = 1; rows <= shape.MR; ++rows) {
    int sets = codegen::accumulatorSets(rows, shape);
    EXPECT_TRUE(sets == 1 || sets == 2 || sets == 4) << rows;
    EXPECT_LE(rows * vectorsPerRow * sets, std::max<int64_t>(12, rows * vectorsPerRow)) << rows;
    if (rows * vectorsPerRow * 2 <= 12) {
      EXPECT_GE(rows * vectorsPerRow * sets, codegen::kMinFmaChains) << rows;
    }
  }
  EXPECT_EQ(codegen::accumulatorSets(1, shape), 4);
}

TEST(GemmSmallM, EveryMFrom1To8OnTailsAndPrimes) {
  const std::pair<int64_t, int64_t> nk[] = {
      {1, 1},  {1, 7},   {3, 2},   {8, 3},    {9, 5},    {15, 6},   {16, 9},
      {17, 13}, {31, 4}, {33, 31}, {47, 64},  {67, 97},  {16, 257}, {256, 784},
  };
  for (int64_t m = 1; m <= 8; ++m)
    for (auto [n, k] : nk) ASSERT_TRUE(checkGemm(hostJit(), GemmSpec{m, n, k, (n + k) % 2 == 0}));
}

TEST(GemmSmallM, EpiloguesOnOneAndTwoRows) {
  for (Activation act : codegen::kAllActivations)
    for (int64_t m : {1, 2}) ASSERT_TRUE(checkGemm(hostJit(), GemmSpec{m, 37, 61, true, act, true}));
}

TEST(GemmSmallM, LongKBatchOne) {
  for (const GemmSpec& s : {GemmSpec{1, 1000, 2048, true}, GemmSpec{2, 129, 4099},
                            GemmSpec{3, 64, 1531, true, Activation::Relu}})
    ASSERT_TRUE(checkGemm(hostJit(), s));
}

} // namespace
} // namespace nnc::testing
