// The thread-splitting policy of Gemm::run (chooseGemmSplit): at most kTasksPerThread
// tasks per thread and a multiple of the threads, none below kMinMacsPerTask, small
// shapes inline, one task per thread for K-blocked kernels, the split along the
// dimension that balances best. (That every split computes the same bits is checked
// by checkGemm, GemmReference.h, for every kernel test.)
#include <gtest/gtest.h>

#include "GemmReference.h"

namespace nnc::testing {
namespace {

using codegen::GemmSpec;
using runtime::chooseGemmSplit;
using runtime::GemmSplit;

// The policy on the AVX2 row's plan (6×16 blocks), whatever row the host chose.
GemmSplit splitFor(int64_t m, int64_t n, int64_t k, int threads) {
  GemmSpec s{m, n, k};
  return chooseGemmSplit(s, codegen::planGemm(s, *codegen::findMicroKernel("avx2_fma")), threads);
}

TEST(GemmSplit, SmallShapesRunInline) {
  for (int threads : {1, 2, 4})
    for (int64_t s : {1, 16, 23, 32, 48})
      EXPECT_EQ(splitFor(s, s, s, threads).tasks(), 1) << s << "^3 threads=" << threads;
  EXPECT_EQ(splitFor(7, 7, 64, 2).tasks(), 1);
  EXPECT_EQ(splitFor(64, 10, 128, 2).tasks(), 1);
}

TEST(GemmSplit, NoTaskBelowTheMinimumWork) {
  for (int64_t m : {1, 2, 7, 64, 100, 1000})
    for (int64_t n : {1, 10, 64, 256, 4096})
      for (int64_t k : {1, 64, 784, 4096})
        for (int threads : {2, 3, 8}) {
          GemmSplit split = splitFor(m, n, k, threads);
          EXPECT_LE(split.tasks(), threads * runtime::kTasksPerThread);
          if (split.tasks() > 1) {
            EXPECT_GE(m * n * k / split.tasks(), runtime::kMinMacsPerTask);
          }
          if (split.tasks() > threads) {
            EXPECT_EQ(split.tasks() % threads, 0);
          }
        }
}

// Whole-K plans only: a K-blocked one (KernelBlocking below) gets one task per thread.
GemmSplit wholeKSplitFor(int64_t m, int64_t n, int64_t k, int threads) {
  GemmSpec s{m, n, k};
  s.kc = k;
  return chooseGemmSplit(s, codegen::planGemm(s, *codegen::findMicroKernel("avx2_fma")), threads);
}

TEST(GemmSplit, LargeShapesGiveEveryThreadSeveralTasks) {
  EXPECT_EQ(wholeKSplitFor(1000, 1000, 1000, 2).tasks(), 2 * runtime::kTasksPerThread);
  EXPECT_EQ(wholeKSplitFor(256, 3072, 768, 4).tasks(), 4 * runtime::kTasksPerThread);
  GemmSplit batch1 = splitFor(1, 4096, 4096, 2); // batch 1: split the weights
  EXPECT_EQ(batch1.rowParts, 1);
  EXPECT_EQ(batch1.panelParts, 2 * runtime::kTasksPerThread);
  EXPECT_EQ(splitFor(4096, 16, 512, 2).panelParts, 1); // one panel: split the rows
  EXPECT_EQ(splitFor(1, 256, 784, 2).tasks(), 2);      // 200 K MACs: two tasks of 100 K
}

// A K-blocked kernel packs each task's rows of A per K block: panel splits would repeat
// the copy, so such a GEMM gets one task per thread.
TEST(GemmSplit, KBlockedKernelsGetOneTaskPerThread) {
  GemmSpec s{49, 512, 4608};
  s.kc = 768;
  const codegen::GemmPlan plan = codegen::planGemm(s, *codegen::findMicroKernel("avx2_fma"));
  ASSERT_GT(plan.kBlocks, 1);
  for (int threads : {2, 3, 4}) EXPECT_EQ(chooseGemmSplit(s, plan, threads).tasks(), threads) << threads;
}

// So does a whole-K kernel that packs its chunk of A (K a multiple of 1024 floats,
// weights beyond L2): tasks that share rows would pack them again.
TEST(GemmSplit, WholeKKernelsThatPackAGetOneTaskPerThread) {
  GemmSpec s{1024, 1024, 1024};
  s.kc = 1024;
  const codegen::GemmPlan plan = codegen::planGemm(s, *codegen::findMicroKernel("avx2_fma"));
  ASSERT_EQ(plan.kBlocks, 1);
  ASSERT_GT(plan.packedAFloats, 0);
  for (int threads : {2, 3, 4}) EXPECT_EQ(chooseGemmSplit(s, plan, threads).tasks(), threads) << threads;
}

// Dot-product kernels (low-precision activations) multiply several times faster than
// f32 FMAs while their weights arrive no faster: tasks split the panels, so each weight
// is streamed once, rather than the rows (64×4096×4096 bf16 on AMX tiles, 2 threads:
// rows split 4 ways took 2.0 ms, panels 1.05 ms); and here one task per thread, since
// every task repeats the conversion of its rows of A (i8 on tiles: 8 tasks 730-781 us,
// 2 tasks 566).
TEST(GemmSplit, DotKernelsSplitTheWeights) {
  GemmSpec s{64, 4096, 4096};
  s.weightType = s.activationType = DType::BF16;
  codegen::CpuFeatures amx;
  amx.avx = amx.avx2 = amx.fma = amx.avx512f = amx.avx512bf16 = amx.amxBf16 = true;
  for (const codegen::CpuFeatures& f : {codegen::CpuFeatures{}, amx}) {
    const codegen::GemmPlan plan = codegen::planGemm(s, *codegen::findMicroKernel("avx512"), f);
    const GemmSplit split = chooseGemmSplit(s, plan, 2);
    EXPECT_EQ(split.rowParts, 1) << "rows per block " << plan.rowBlockRows;
    EXPECT_EQ(split.tasks(), 2) << "tiles " << plan.tiles;
  }
}

TEST(GemmSplit, SplitsTheDimensionThatBalances) {
  // 2 threads × 4 tasks over 3 panels cannot balance; 16 row blocks of 6 rows can.
  GemmSplit s = wholeKSplitFor(96, 48, 1024, 2);
  EXPECT_EQ(s.rowParts, 8);
  EXPECT_EQ(s.panelParts, 1);
}

} // namespace
} // namespace nnc::testing
