// Weights in place (GemmSpec::weightRows: B is a table of row pointers, the rows where
// they lie): on each wide FMA row the host can execute, the shape grid of the other
// GEMM tests against the double reference (GemmReference.h: 1 and 2 threads and forced
// splits bit-identical), both paths — dot products along the rows at M <= MR, the
// transposed stack copy above — with tails of rows, columns and K, K blocks, every
// epilogue and gated GEMMs; rows at odd addresses; and, where the blocking is the same,
// bit-identical to the GEMM over packed weights.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "RowEngines.h"

namespace nnc::testing {
namespace {

using codegen::Activation;
using codegen::GemmSpec;

GemmSpec inPlace(GemmSpec s) {
  s.weightRows = true;
  return s;
}

void sweep(const std::string& family, bool halfRate = false) {
  std::string why;
  std::unique_ptr<runtime::JitEngine> jit = rowEngine(family, &why, halfRate);
  if (!jit) GTEST_SKIP() << why;
  const int64_t MR = jit->microKernel().MR, NR = jit->microKernel().NR;
  for (int64_t m : {int64_t(1), int64_t(2), int64_t(3), int64_t(4), MR - 1, MR, MR + 1, 2 * MR + 5})
    for (int64_t n : {int64_t(1), int64_t(17), NR - 1, NR, 2 * NR + 7, 3 * NR + 17})
      for (int64_t k : {1, 9, 16, 97}) ASSERT_TRUE(checkGemm(*jit, inPlace(GemmSpec{m, n, k, (m + n + k) % 2 == 0})));
  std::mt19937 rng(2026);
  std::uniform_int_distribution<int64_t> dim(1, 67);
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(checkGemm(*jit, inPlace(GemmSpec{dim(rng), dim(rng), dim(rng), bool(i % 2)})));
  for (Activation act : codegen::kAllActivations)
    for (bool residual : {false, true})
      for (int64_t m : {int64_t(1), MR + 1})
        ASSERT_TRUE(checkGemm(*jit, inPlace(GemmSpec{m, NR + 5, 53, true, act, residual})));
  // Forced K blocks and chunks; a K whose panel copy outgrows the stack (K blocks of
  // their own); decode- and prefill-shaped layers.
  for (int64_t m : {int64_t(2), 2 * MR + 1}) {
    GemmSpec s = inPlace(GemmSpec{m, NR + 3, 3 * 20 + 5, true, Activation::Relu, true});
    s.kc = 20, s.mc = MR, s.nc = 2 * NR;
    ASSERT_TRUE(checkGemm(*jit, s));
  }
  const GemmSpec large[] = {{MR + 3, 40, 8300, true}, {1, 1000, 784, true}, {1, 2048 + 17, 512},
                            {128, 256, 512, false, Activation::None, true}, {5, 300, 1001, true}};
  for (const GemmSpec& s : large) ASSERT_TRUE(checkGemm(*jit, inPlace(s)));
  // Gated (gate; up as one GEMM): C = act(A·gateᵀ) · (A·upᵀ).
  for (int64_t m : {int64_t(1), int64_t(3), MR, MR + 7})
    for (int64_t n : {int64_t(codegen::kGatedColumnMultiple), 4 * NR}) {
      GemmSpec s = inPlace(GemmSpec{m, n, 77, false, Activation::Silu});
      s.gated = true;
      ASSERT_TRUE(checkGemm(*jit, s));
    }
}

TEST(GemmInPlace, Avx512RowSweep) {
  ASSERT_NO_FATAL_FAILURE(sweep("avx512"));
}
TEST(GemmInPlace, Avx2FmaRowSweep) {
  ASSERT_NO_FATAL_FAILURE(sweep("avx2_fma"));
}
TEST(GemmInPlace, Avx512RowSweepAtHalfRate) {
  ASSERT_NO_FATAL_FAILURE(sweep("avx512", true));
}
TEST(GemmInPlace, HostRowSweep) {
  for (int64_t m : {1, 3, 29})
    ASSERT_TRUE(checkGemm(hostJit(), inPlace(GemmSpec{m, 70, 45, true, Activation::Gelu, true})));
}

// Decode rows over weights in place prefetch them in software only where the host's
// measured choice says so (MicroKernelShape::prefetchesStreamedWeights, shared with
// f16/bf16 weights); the prompt-shaped kernels do not depend on it (GemmEmitter.h:
// prefetchChoiceApplies); the sums are right either way.
TEST(GemmInPlace, DecodeRowsFollowTheHostsPrefetchChoice) {
  const codegen::MicroKernelShape& host = hostJit().microKernel();
  std::array<std::unique_ptr<runtime::JitEngine>, 2> engines = hostRowWithoutAndWithPrefetch();
  for (int64_t m = 1; m <= codegen::kDecodePrefetchRows; ++m) {
    const GemmSpec decode = inPlace(GemmSpec{m, 2 * host.NR + 5, 1000, true});
    EXPECT_TRUE(codegen::prefetchChoiceApplies(decode, hostJit().microKernel()));
    EXPECT_TRUE(emitsPrefetch(*engines[true], decode)) << decode.key();
    EXPECT_FALSE(emitsPrefetch(*engines[false], decode)) << decode.key();
    for (auto& jit : engines) ASSERT_TRUE(checkGemm(*jit, decode));
    // Both can live in one engine (JitEngine::deferWeightPrefetchChoice): two symbols.
    EXPECT_NE(codegen::gemmFunctionName(decode, engines[true]->microKernel()),
              codegen::gemmFunctionName(decode, engines[false]->microKernel()));
  }
  EXPECT_FALSE(codegen::prefetchChoiceApplies(inPlace(GemmSpec{codegen::kDecodePrefetchRows + 1, 64, 1000}), hostJit().microKernel()));
  EXPECT_FALSE(codegen::prefetchChoiceApplies(GemmSpec{1, 64, 1000}, hostJit().microKernel())); // packed f32 keeps its own way
}

// Deferred (JitEngine::deferWeightPrefetchChoice: --generate's prompt program), decode
// rows in place take the row's default without waiting for the measurement; once no
// longer deferred, the next such kernel decides it. (With NNC_PREFETCH_16BIT set the
// decision is the variable's, which makes no difference here.)
TEST(GemmInPlace, DeferredPrefetchChoiceWaitsForTheDecodeProgram) {
  std::unique_ptr<runtime::JitEngine> jit = runtime::JitEngine::create(runtime::KernelCacheOptions{});
  const GemmSpec decode = inPlace(GemmSpec{1, 64, 1000, true});
  jit->deferWeightPrefetchChoice(true);
  ASSERT_TRUE(checkGemm(*jit, decode));
  EXPECT_EQ(jit->weightPrefetch().how, "") << "decided while deferred";
  EXPECT_TRUE(emitsPrefetch(*jit, decode)) << "the default prefetches";
  jit->deferWeightPrefetchChoice(false);
  ASSERT_TRUE(checkGemm(*jit, decode));
  EXPECT_NE(jit->weightPrefetch().how, "");
}

// Rows at any 4-byte alignment (a safetensors file's tensors start wherever its header
// ends) and a K tail that ends exactly at the end of the rows' storage: the masked
// loads read nothing past it (ASan sees the block).
TEST(GemmInPlace, RowsAtOddAddressesEndingTheirStorage) {
  runtime::JitEngine& jit = hostJit();
  for (int64_t m : {int64_t(1), int64_t(40)}) {
    const GemmSpec s = inPlace(GemmSpec{m, 21, 37, true});
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> uni(-1, 1);
    std::vector<float> A(size_t(s.M * s.K)), bias(size_t(s.N));
    for (float& x : A) x = uni(rng);
    for (float& x : bias) x = uni(rng);
    // One float in: rows 4 bytes past a 64-byte boundary; the last row ends the vector.
    std::vector<float> storage(size_t(1 + s.N * s.K));
    for (float& x : storage) x = uni(rng);
    std::vector<const float*> rows(size_t(s.N));
    for (int64_t n = 0; n < s.N; ++n) rows[size_t(n)] = storage.data() + 1 + n * s.K;
    runtime::Gemm gemm(jit, s);
    runtime::PackedWeights table = gemm.referRows(rows.data(), nullptr);
    std::vector<float> C(size_t(s.M * s.N));
    gemm.run(A.data(), table, bias.data(), nullptr, C.data());
    for (int64_t i = 0; i < s.M; ++i)
      for (int64_t n = 0; n < s.N; ++n) {
        double ref = bias[size_t(n)];
        for (int64_t k = 0; k < s.K; ++k) ref += double(A[size_t(i * s.K + k)]) * rows[size_t(n)][k];
        ASSERT_NEAR(C[size_t(i * s.N + n)], ref, 1e-4) << "row " << i << " column " << n;
      }
  }
}

// Above MR rows the kernel runs the packed GEMM's register blocks on a transposed copy:
// where both plan the same K blocks, the results are the same bits. (Not where the
// packed weights have a row tail, PackLayout.h, whose channels are dot products along
// K: none here on any row, the last panel a whole vector of 8 channels or K short.)
TEST(GemmInPlace, ManyRowsMatchPackedWeightsBitForBit) {
  runtime::JitEngine& jit = hostJit();
  const int64_t MR = jit.microKernel().MR;
  for (const GemmSpec& packed : {GemmSpec{2 * MR + 3, 72, 45, true, Activation::Relu, true},
                                 GemmSpec{128, 96, 256}, GemmSpec{MR + 1, 33, 19, true}}) {
    const GemmSpec rows = inPlace(packed);
    const auto plan = [&](const GemmSpec& s) { return codegen::planGemm(s, jit.microKernel(), jit.features()); };
    ASSERT_FALSE(codegen::gemmPanelLayout(packed, jit.microKernel()).hasRowTail()) << packed.key();
    ASSERT_EQ(plan(packed).kBlocks, plan(rows).kBlocks) << packed.key();
    std::mt19937 rng(11);
    auto randomVector = [&](int64_t count) { return testing::randomVector(rng, count); };
    const std::vector<float> A = randomVector(packed.M * packed.K), W = randomVector(packed.N * packed.K),
                             bias = randomVector(packed.N), residual = randomVector(packed.M * packed.N);
    std::vector<float> fromPacked(size_t(packed.M * packed.N)), fromRows(fromPacked.size());
    runtime::Gemm a(jit, packed), b(jit, rows);
    a.run(A.data(), a.pack(W.data()), packed.bias ? bias.data() : nullptr,
          packed.residual ? residual.data() : nullptr, fromPacked.data());
    b.run(A.data(), b.pack(W.data()), packed.bias ? bias.data() : nullptr,
          packed.residual ? residual.data() : nullptr, fromRows.data());
    EXPECT_EQ(std::memcmp(fromPacked.data(), fromRows.data(), fromRows.size() * sizeof(float)), 0) << packed.key();
  }
}

TEST(GemmInPlace, RefusesWhatItCannotReadInPlace) {
  GemmSpec i8 = inPlace(GemmSpec{4, 32, 64});
  i8.weightType = DType::I8;
  EXPECT_FALSE(codegen::weightRowsSupported(i8));
  EXPECT_THROW(codegen::validateGemmSpec(i8), std::invalid_argument);
  GemmSpec gatedLongK = inPlace(GemmSpec{4, 64, 8192, false, Activation::Silu});
  gatedLongK.gated = true;
  EXPECT_FALSE(codegen::weightRowsSupported(gatedLongK));
  EXPECT_TRUE(codegen::weightRowsSupported(inPlace(GemmSpec{4, 64, 8192})));
  EXPECT_FALSE(codegen::weightRowsSupported(inPlace(GemmSpec{4, 64, 8192, true, Activation::Relu, true})));
}

} // namespace
} // namespace nnc::testing
