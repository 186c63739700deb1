// Cache blocking of the GEMM loop nest (GemmEmitter.h, ResolvedBlocking): K blocks
// with K not a multiple of KC, MC chunks of row blocks, NC chunks of panels, with tails
// everywhere, the epilogue applied once (on the last K block), residuals with and
// without an activation (also in place, residual == C), against the double reference
// on 1 and 2 threads and several splits, bit-identical across them (GemmReference.h).
// Blocks are forced small (spec.kc/mc/nc) so that small shapes cross many of them.
#include <gtest/gtest.h>

#include "RowEngines.h"

namespace nnc::testing {
namespace {

using codegen::Activation;
using codegen::GemmSpec;

GemmSpec blocked(int64_t m, int64_t n, int64_t k, int64_t kc, int64_t mc, int64_t nc,
                 bool bias = true, Activation act = Activation::None, bool residual = false) {
  GemmSpec s{m, n, k, bias, act, residual};
  s.kc = kc, s.mc = mc, s.nc = nc;
  return s;
}

// Two panels of columns over many rows take (MR/2)×(2·NR) blocks on a row with 32
// registers (kernelShapeFor), on every row this host runs: the plan says so, fewer rows
// keep the row's block, and the results hold against the reference, with K blocks too.
TEST(GemmBlocking, WideBlocksForTwoPanelsOfManyRows) {
  for (const RowEngine& row : executableRows()) {
    const codegen::MicroKernelShape& shape = row.jit->microKernel();
    SCOPED_TRACE(row.family);
    const int64_t N = 2 * shape.NR;
    const bool wide = shape.registers >= 32 && shape.NR == 2 * shape.vectorFloats;
    const codegen::GemmPlan many = runtime::Gemm(*row.jit, GemmSpec{codegen::kWideBlockMinRows, N, 70}).plan();
    EXPECT_EQ(many.NR, wide ? 2 * shape.NR : shape.NR);
    EXPECT_EQ(many.rowBlockRows, wide ? shape.MR / 2 : shape.MR);
    const codegen::GemmPlan few = runtime::Gemm(*row.jit, GemmSpec{codegen::kWideBlockMinRows - 1, N, 70}).plan();
    EXPECT_EQ(few.NR, shape.NR);
    ASSERT_TRUE(checkGemm(*row.jit, GemmSpec{300, N, 70, true, Activation::Relu, true}));
    ASSERT_TRUE(checkGemm(*row.jit, blocked(301, N, 100, 32, 2 * shape.MR, 0, true, Activation::None, true)));
  }
}

TEST(GemmBlocking, ChosenFromCacheSizes) {
  codegen::MicroKernelShape avx2{"avx2_fma", 8, 6, 16, 256, 144, 4080, true};
  codegen::GemmBlocking b = codegen::chooseBlocking(avx2, {32 << 10, 1 << 20, 32 << 20});
  EXPECT_EQ(b.KC, 256); // 16 KiB of B in L1
  EXPECT_EQ(b.MC, 510); // ~512 KiB of A in L2, a multiple of MR
  EXPECT_EQ(b.NC, 8192);
  codegen::GemmBlocking unknown = codegen::chooseBlocking(avx2, {});
  EXPECT_EQ(unknown.KC, 256);
  EXPECT_EQ(unknown.MC, 144);
  EXPECT_EQ(unknown.NC, 4080);
  codegen::GemmBlocking small = codegen::chooseBlocking(avx2, {16 << 10, 256 << 10, 0});
  EXPECT_EQ(small.KC, 128);
  EXPECT_EQ(small.MC % 6, 0);
  EXPECT_EQ(small.NC, 4080);
}

TEST(GemmBlocking, KeyNamesTheBlocking) {
  GemmSpec a{64, 64, 64};
  EXPECT_NE(a.key().find(codegen::cacheSizesTag(codegen::hostCacheSizes())), std::string::npos);
  EXPECT_NE(a.key(), blocked(64, 64, 64, 32, 0, 0, false).key());
  EXPECT_NE(blocked(64, 64, 64, 32, 12, 0, false).key(), blocked(64, 64, 64, 32, 0, 0, false).key());
  EXPECT_NE(blocked(64, 64, 64, 32, 0, 16, false).key(), blocked(64, 64, 64, 32, 0, 0, false).key());
}

TEST(GemmBlocking, HostBlockingOnLargeK) {
  // K blocks by default once a K×NR panel of B passes half of L2.
  const int64_t l2 = codegen::hostL2BytesOr(1 << 20);
  const int64_t NR = hostJit().microKernel().NR, MR = hostJit().microKernel().MR;
  GemmSpec s{MR + 7, 20, l2 / 2 / (NR * 4) + 37, true, Activation::Relu, true}; // > 1 row block
  runtime::Gemm gemm(hostJit(), s);
  EXPECT_GT(gemm.plan().kBlocks, 1);
  EXPECT_TRUE(checkGemm(hostJit(), s));
  EXPECT_EQ(runtime::Gemm(hostJit(), GemmSpec{97, 70, 1000}).plan().kBlocks, 1);
  // Rows of one row block keep K whole (nothing reuses the weights).
  EXPECT_EQ(runtime::Gemm(hostJit(), GemmSpec{1, 256, 784}).plan().kBlocks, 1);
}

// Weights larger than half of L2 (read from L3/DRAM at every call in a model): a
// whole-K chunk takes every row and the row blocks prefetch the next panel; when that
// chunk's A outgrows half of L2 too, K blocks with packed A instead (GemmEmitter.cpp),
// unless the host runs the row at half rate (MicroKernelShape::halfRate): K stays whole.
TEST(GemmBlocking, HostBlockingOnColdWeights) {
  const int64_t l2 = codegen::hostCacheSizes().l2;
  if (l2 <= 0) GTEST_SKIP() << "no L2 size on this host";
  const int64_t NR = hostJit().microKernel().NR, MR = hostJit().microKernel().MR;
  // Whole K: B of K = 1000 and l2/2/4000 + 3 panels, 5 row blocks + a tail.
  GemmSpec wide{5 * MR + 3, (l2 / 2 / 4000 / NR + 3) * NR + 5, 1000, true, Activation::Relu, true};
  runtime::Gemm wholeK(hostJit(), wide);
  EXPECT_EQ(wholeK.plan().kBlocks, 1);
  EXPECT_TRUE(checkGemm(hostJit(), wide));
  // A of 3 row blocks + a tail over K floats passes l2/2 as well.
  const int64_t k = l2 / 2 / (4 * (3 * MR + 5)) + 97;
  GemmSpec deep{3 * MR + 5, l2 / 2 / (4 * k) + 2 * NR + 3, k, true, Activation::None, true};
  runtime::Gemm blocked(hostJit(), deep);
  if (hostJit().microKernel().halfRate)
    EXPECT_EQ(blocked.plan().kBlocks, 1);
  else
    EXPECT_GT(blocked.plan().kBlocks, 1);
  EXPECT_TRUE(checkGemm(hostJit(), deep));
  // The rule itself, on the row at full and at half rate.
  codegen::MicroKernelShape fullRate = hostJit().microKernel(), halfRate = fullRate;
  fullRate.halfRate = false, halfRate.halfRate = true;
  EXPECT_GT(codegen::gemmBlocking(deep, fullRate).kBlocks, 1);
  EXPECT_EQ(codegen::gemmBlocking(deep, halfRate).kBlocks, 1);
  // The few-row-blocks rule (a long K over at most 8 row blocks) likewise, where a
  // whole-K panel fits half of L2 (else K blocks anyway).
  const int64_t longK = 8 * codegen::chooseBlocking(fullRate, codegen::hostCacheSizes()).KC + 3;
  if (longK * NR * 4 > l2 / 2) {
    std::printf("few-row-blocks rule not checked: a %ld-deep panel outgrows half of L2\n", long(longK));
    return;
  }
  GemmSpec few{4 * MR + 1, l2 / (4 * longK) + NR, longK};
  EXPECT_GT(codegen::gemmBlocking(few, fullRate).kBlocks, 1);
  EXPECT_EQ(codegen::gemmBlocking(few, halfRate).kBlocks, 1);
}

// Whole K with A's rows 4 KiB apart and weights beyond L2/2: the kernel packs the
// chunk's rows into the caller's buffer (GemmPlan::packedAFloats) — on every row the
// host runs, with an M tail, a narrow N tail (dot products from A where it lies), a
// residual, the splits of checkGemm (each task packs its own rows), f16 weights; K =
// 1024 + 1 and a chunk of one row block do not pack. Nine row blocks: with eight or
// fewer, a host whose L1 makes KC 128 (32 KiB: Zen 4) blocks K = 1024 instead
// (gemmBlocking's few-row-blocks rule).
TEST(GemmBlocking, WholeKPacksRowsFourKiBApart) {
  const int64_t l2 = codegen::hostCacheSizes().l2;
  if (l2 <= 0) GTEST_SKIP() << "no L2 size on this host";
  const int64_t K = 1024, N = l2 / 2 / (4 * K) + 45; // B just over half of L2, N % 16 = 13
  for (const RowEngine& row : executableRows()) {
    SCOPED_TRACE(row.family);
    const int64_t MR = row.jit->microKernel().MR;
    GemmSpec s{8 * MR + 5, N, K, true, Activation::Relu, true};
    const codegen::GemmPlan plan = runtime::Gemm(*row.jit, s).plan();
    EXPECT_EQ(plan.kBlocks, 1);
    EXPECT_EQ(plan.packedAFloats, plan.rowBlocks * MR * K + row.jit->microKernel().vectorFloats);
    ASSERT_TRUE(checkGemm(*row.jit, s));
    GemmSpec f16 = s;
    f16.weightType = DType::F16;
    ASSERT_TRUE(checkGemm(*row.jit, f16));
    EXPECT_EQ(runtime::Gemm(*row.jit, GemmSpec{8 * MR + 5, N, K + 1}).plan().packedAFloats, 0);
    EXPECT_EQ(runtime::Gemm(*row.jit, GemmSpec{MR, N, K}).plan().packedAFloats, 0);
  }
}

// K not a multiple of KC, K blocks 2..5, with M/N tails, MC and NC chunks.
TEST(GemmBlocking, KBlocksWithTails) {
  for (int64_t kc : {8, 12, 20})
    for (int64_t k : {kc + 1, 2 * kc, 3 * kc + 5, 5 * kc - 3})
      for (int64_t m : {1, 3, 7, 13})
        ASSERT_TRUE(checkGemm(hostJit(), blocked(m, 37, k, kc, 0, 0)));
}

TEST(GemmBlocking, RowAndPanelChunks) {
  for (int64_t mc : {6, 12, 18})
    for (int64_t nc : {16, 32, 48})
      for (int64_t n : {10, 16, 70})
        ASSERT_TRUE(checkGemm(hostJit(), blocked(41, n, 45, 16, mc, nc)));
}

// Bias and every activation applied once: with 3+ K blocks, an epilogue run per block
// would add the bias several times or clip partial sums.
TEST(GemmBlocking, EpilogueOnlyOnTheLastKBlock) {
  for (Activation act : codegen::kAllActivations)
    for (bool residual : {false, true})
      ASSERT_TRUE(checkGemm(hostJit(), blocked(13, 21, 50, 16, 6, 16, true, act, residual)));
  ASSERT_TRUE(checkGemm(hostJit(), blocked(64, 10, 128, 32, 0, 0, true, Activation::Relu, true)));
}

// residual == C: the caller's buffer holds the residual and receives the result; the
// first mismatch against the double reference is the failure's message.
::testing::AssertionResult inPlaceResidualMatches(const GemmSpec& s) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> A(size_t(s.M * s.K)), W(size_t(s.N * s.K)), bias(size_t(s.N)),
      res(size_t(s.M * s.N));
  for (auto* v : {&A, &W, &bias, &res})
    for (float& x : *v) x = uni(rng);
  runtime::Gemm gemm(hostJit(), s);
  runtime::PackedWeights packed = gemm.pack(W.data());
  std::vector<float> separate(res.size());
  gemm.run(A.data(), packed, bias.data(), res.data(), separate.data());
  for (int threads : {1, 2}) {
    std::vector<float> C = res;
    gemm.run(A.data(), packed, bias.data(), C.data(), C.data(), threads == 2 ? &twoThreads() : nullptr);
    for (int64_t i = 0; i < s.M * s.N; ++i) {
      double dot = bias[size_t(i % s.N)];
      for (int64_t k = 0; k < s.K; ++k)
        dot += double(A[size_t(i / s.N * s.K + k)]) * W[size_t(i % s.N * s.K + k)];
      double ref = referenceActivation(s.act, dot) + res[size_t(i)];
      if (!(std::fabs(C[size_t(i)] - ref) <= 1e-4 * (1 + std::fabs(ref))))
        return ::testing::AssertionFailure() << s.key() << " threads " << threads << " i=" << i << ": got "
                                             << C[size_t(i)] << ", want " << ref;
    }
    if (s.act == Activation::None && std::memcmp(C.data(), separate.data(), C.size() * sizeof(float)) != 0)
      return ::testing::AssertionFailure() << s.key() << " threads " << threads
                                           << ": in place differs from a separate C (same kernel, same bits)";
  }
  return ::testing::AssertionSuccess();
}

TEST(GemmBlocking, ResidualInPlaceWithKBlocks) {
  EXPECT_TRUE(inPlaceResidualMatches(blocked(13, 21, 50, 16, 6, 16, true, Activation::None, true)));
  EXPECT_TRUE(inPlaceResidualMatches(blocked(13, 21, 50, 16, 6, 16, true, Activation::Gelu, true)));
  EXPECT_TRUE(inPlaceResidualMatches(blocked(20, 33, 600, 256, 0, 0, true, Activation::Relu, true)));
}

// The baseline row (SSE2, 4×8) must block the same way on any x86-64.
TEST(GemmBlocking, Sse2BaselineRow) {
  auto jit = runtime::JitEngine::create({"x86-64", ""});
  ASSERT_STREQ(jit->microKernel().family, "sse2");
  for (int64_t m : {1, 5, 11})
    for (int64_t n : {3, 8, 21})
      ASSERT_TRUE(checkGemm(*jit, blocked(m, n, 45, 16, 4, 8, true, Activation::Relu, true)));
}

} // namespace
} // namespace nnc::testing
