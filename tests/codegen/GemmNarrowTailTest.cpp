// The narrow N tail (GemmEmitter.h: useRowTail, emitDotBlock): the N % NR tail channels
// stored as [n][k] rows and computed as dot products along K. Against the double
// reference (GemmReference.h: 1 and 2 threads, forced splits along M and N, all
// bit-identical): N = 1..15 (one tail, no panel) and N % 16 = 1..15 after full panels,
// M = 1..9 (every row sub-block and M tail of MR = 6 and 4), K odd, prime, a multiple
// of the vector and not; every epilogue with and without residual; K blocks; the
// SSE2 and AVX rows.
#include <gtest/gtest.h>

#include "RowEngines.h"

namespace nnc::testing {
namespace {

using codegen::Activation;
using codegen::GemmSpec;

TEST(GemmNarrowTail, ChosenForPartialVectorTailsOnLongK) {
  const codegen::MicroKernelShape& shape = hostJit().microKernel();
  const int W = shape.vectorFloats;
  EXPECT_TRUE(codegen::useRowTail(GemmSpec{64, 10, 128}, shape));
  EXPECT_TRUE(codegen::useRowTail(GemmSpec{1, shape.NR + 1, 4 * W}, shape));
  EXPECT_FALSE(codegen::useRowTail(GemmSpec{64, 10, 4 * W - 1}, shape)); // short K
  EXPECT_FALSE(codegen::useRowTail(GemmSpec{64, 2 * shape.NR, 128}, shape)); // no tail
  EXPECT_FALSE(codegen::useRowTail(GemmSpec{64, shape.NR + W, 128}, shape)); // whole vectors
  EXPECT_TRUE(codegen::gemmPanelLayout(GemmSpec{64, 10, 128}, shape).hasRowTail());
  EXPECT_EQ(codegen::dotTailRows(shape) * codegen::kDotColumns <= 12, true);
  EXPECT_EQ(shape.MR % codegen::dotTailRows(shape), 0);
}

TEST(GemmNarrowTail, PackedRowsAreKContiguousAndZeroPadded) {
  codegen::PanelLayout layout{19, 5, 8, true}; // 2 panels of 8, then 3 rows of 16
  ASSERT_TRUE(layout.hasRowTail());
  std::vector<float> W(19 * 5);
  for (int n = 0; n < 19; ++n)
    for (int k = 0; k < 5; ++k) W[size_t(n * 5 + k)] = float(100 * n + k + 1);
  std::vector<float> packed(size_t(layout.totalElements()), -1.0f);
  codegen::packWeightsPanelF32(layout, W.data(), packed.data());
  EXPECT_EQ(packed.size(), size_t(2 * 40 + 3 * 16));
  for (int n = 0; n < 19; ++n)
    for (int k = 0; k < 5; ++k) EXPECT_EQ(packed[size_t(layout.offset(n, k))], W[size_t(n * 5 + k)]);
  EXPECT_EQ(packed[80], 1601.0f); // (n16, k0) starts the rows
  for (int j = 0; j < 3; ++j)
    for (int k = 5; k < 16; ++k) EXPECT_EQ(packed[size_t(80 + 16 * j + k)], 0.0f);
}

TEST(GemmNarrowTail, NarrowerThanOnePanel) {
  const int64_t ks[] = {32, 37, 64, 97, 131, 33, 40};
  int i = 0;
  for (int64_t n = 1; n <= 15; ++n)
    for (int64_t m = 1; m <= 9; ++m, ++i)
      ASSERT_TRUE(checkGemm(hostJit(), GemmSpec{m, n, ks[i % 7], (m + n) % 2 == 0}));
}

TEST(GemmNarrowTail, TailAfterFullPanels) {
  const int64_t ks[] = {33, 71, 128, 257, 39};
  int i = 0;
  for (int64_t t = 1; t <= 15; ++t)
    for (int64_t m : {1, 2, 3, 6, 7, 9}) {
      int64_t n = (i % 3 == 2 ? 48 : 16) + t;
      ASSERT_TRUE(checkGemm(hostJit(), GemmSpec{m, n, ks[i++ % 5], t % 2 == 1}));
    }
  ASSERT_TRUE(checkGemm(hostJit(), GemmSpec{64, 10, 128, true, Activation::Relu}));
  ASSERT_TRUE(checkGemm(hostJit(), GemmSpec{97, 1000, 784, true}));
  ASSERT_TRUE(checkGemm(hostJit(), GemmSpec{1, 1001, 1531, true, Activation::Tanh, true}));
}

TEST(GemmNarrowTail, EveryEpilogue) {
  for (Activation act : codegen::kAllActivations)
    for (bool residual : {false, true}) {
      ASSERT_TRUE(checkGemm(hostJit(), GemmSpec{7, 10, 53, true, act, residual}));
      ASSERT_TRUE(checkGemm(hostJit(), GemmSpec{8, 29, 64, !residual, act, residual}));
    }
}

TEST(GemmNarrowTail, WithKBlocksAndChunks) {
  for (int64_t m : {1, 5, 13})
    for (bool residual : {false, true}) {
      GemmSpec s{m, 26, 100, true, residual ? Activation::Gelu : Activation::None, residual};
      s.kc = 32, s.mc = 6, s.nc = 16;
      ASSERT_TRUE(checkGemm(hostJit(), s));
    }
}

// residual == C with the narrow tail and an activation: the same bits as a separate C.
TEST(GemmNarrowTail, ResidualInPlace) {
  GemmSpec s{9, 21, 77, true, Activation::Relu, true};
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> A(size_t(s.M * s.K)), W(size_t(s.N * s.K)), bias(size_t(s.N)), res(size_t(s.M * s.N));
  for (auto* v : {&A, &W, &bias, &res})
    for (float& x : *v) x = uni(rng);
  runtime::Gemm gemm(hostJit(), s);
  auto packed = gemm.pack(W.data());
  std::vector<float> separate(res.size()), C = res;
  gemm.run(A.data(), packed, bias.data(), res.data(), separate.data());
  gemm.run(A.data(), packed, bias.data(), C.data(), C.data());
  EXPECT_EQ(0, std::memcmp(C.data(), separate.data(), C.size() * sizeof(float)));
}

void checkRow(const runtime::JitTarget& target, const char* family) {
  auto jit = runtime::JitEngine::create(target);
  ASSERT_STREQ(jit->microKernel().family, family);
  const int64_t NR = jit->microKernel().NR;
  for (int64_t m : {1, 2, 5, 9})
    for (int64_t n : {int64_t(1), int64_t(3), NR - 1, NR + 1, NR + 5, 3 * NR + 3})
      for (int64_t k : {17, 31, 64, 101})
        ASSERT_TRUE(checkGemm(*jit, GemmSpec{m, n, k, true, Activation::Relu, m % 2 == 1}));
}

TEST(GemmNarrowTail, Sse2BaselineRow) {
  ASSERT_NO_FATAL_FAILURE(checkRow({"x86-64", ""}, "sse2"));
}

TEST(GemmNarrowTail, AvxWithoutFmaRow) {
  if (hostJit().cpuFeatures().find("+avx,") == std::string::npos &&
      hostJit().cpuFeatures().find("+avx2") == std::string::npos)
    GTEST_SKIP() << "host has no AVX";
  ASSERT_NO_FATAL_FAILURE(checkRow({"x86-64", "+avx"}, "avx"));
}

TEST(GemmNarrowTail, WideFmaRows) {
  for (const char* family : {"avx512", "avx2_fma"}) {
    const codegen::MicroKernelShape& row = *codegen::findMicroKernel(family);
    if (!codegen::canExecute(hostCpuFeatures(), row)) {
      std::printf("skipped: this host cannot execute the %s row\n", family);
      continue;
    }
    ASSERT_NO_FATAL_FAILURE(checkRow({hostJit().cpuName(), "", family}, family));
  }
}

} // namespace
} // namespace nnc::testing
