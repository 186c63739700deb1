// Every epilogue (each activation × bias on/off × residual on/off) on shapes with M,
// N and K tails, and every CpuTable row (SSE2 baseline, AVX without FMA, the host),
// all against the double reference (GemmReference.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>

#include "RowEngines.h"

namespace nnc::testing {
namespace {

using codegen::Activation;
using codegen::GemmSpec;

TEST(GemmEpilogue, EveryActivationBiasAndResidual) {
  for (Activation act : codegen::kAllActivations)
    for (bool bias : {false, true})
      for (bool residual : {false, true}) {
        ASSERT_TRUE(checkGemm(hostJit(), GemmSpec{13, 37, 19, bias, act, residual}));
        ASSERT_TRUE(checkGemm(hostJit(), GemmSpec{6, 16, 64, bias, act, residual}));
      }
}

// An activation after the residual (a relu after a ResNet block's add): with and
// without an activation before it, on the narrow-tail path (N = 37), with K blocks
// (where the residual may start the sum), on panel pairs (M = 2), in every weight dtype.
TEST(GemmEpilogue, ActivationAfterTheResidual) {
  for (Activation after : {Activation::Relu, Activation::Silu})
    for (Activation act : {Activation::None, Activation::Tanh}) {
      GemmSpec s{13, 37, 19, true, act, true};
      s.actAfterResidual = after;
      ASSERT_TRUE(checkGemm(hostJit(), s));
      GemmSpec blocked{40, 48, 100, true, act, true};
      blocked.actAfterResidual = after, blocked.kc = 32, blocked.mc = 24;
      ASSERT_TRUE(checkGemm(hostJit(), blocked));
      GemmSpec pairs{2, 96, 64, false, act, true};
      pairs.actAfterResidual = after;
      ASSERT_TRUE(checkGemm(hostJit(), pairs));
      for (DType dt : {DType::F16, DType::BF16, DType::I8, DType::I4}) {
        GemmSpec low{13, 48, 64, true, act, true};
        low.actAfterResidual = after, low.weightType = dt, low.quantGroup = dt == DType::I4 ? 32 : 0;
        ASSERT_TRUE(checkGemm(hostJit(), low));
      }
    }
}

// A C larger than L2: each block asks for its C tile with write intent, and for its
// residual tile, before its FMAs (GemmEmitter.cpp, prefetchTile). Rows enough to pass
// the host's L2, with N and K tails; with and without the residual, an activation after
// it, and K blocks (which prefetch their partial sums instead).
TEST(GemmEpilogue, OutputBeyondL2) {
  const int64_t l2 = std::max<int64_t>(codegen::hostCacheSizes().l2, 0);
  const int64_t n = 37, rows = l2 / (4 * n) + 13;
  for (bool residual : {false, true}) {
    GemmSpec s{rows, n, 19, true, Activation::Relu, residual};
    ASSERT_TRUE(checkGemm(hostJit(), s));
    GemmSpec after{rows, n, 19, true, Activation::None, residual};
    after.actAfterResidual = Activation::Relu;
    ASSERT_TRUE(checkGemm(hostJit(), after));
    GemmSpec blocked{rows, n, 100, true, Activation::None, residual};
    blocked.kc = 32;
    ASSERT_TRUE(checkGemm(hostJit(), blocked));
  }
}

// A gated MLP's gate and up as one GEMM (GemmSpec::gated): C = act(A·gateᵀ + b_gate) ·
// (A·upᵀ + b_up) on every row the host runs — row tails, panel pairs (M <= 3), the
// two-panel blocks of many rows (N = 64, M = 300), several panels, K tails, with and
// without the bias [b_gate; b_up], the splits of checkGemm, every weight dtype (their
// scales follow the interleaved columns) — and the specs it refuses.
TEST(GemmEpilogue, GatedGateTimesUp) {
  for (const RowEngine& row : executableRows()) {
    SCOPED_TRACE(row.family);
    for (Activation act : {Activation::Silu, Activation::GeluTanh, Activation::None})
      for (auto [m, n, k] : {std::array<int64_t, 3>{1, 96, 64}, {2, 64, 37}, {3, 32, 5}, {13, 96, 100},
                             {37, 64, 19}, {300, 64, 33}}) {
        GemmSpec s{m, n, k, m % 2 == 1, act}; // odd M with a bias [gate; up]
        s.gated = true;
        ASSERT_TRUE(checkGemm(*row.jit, s));
      }
    for (DType dt : {DType::F16, DType::BF16, DType::I8, DType::I4}) {
      GemmSpec low{13, 96, 64, dt == DType::I8, Activation::Silu};
      low.gated = true, low.weightType = dt, low.quantGroup = dt == DType::I4 ? 32 : 0;
      ASSERT_TRUE(checkGemm(*row.jit, low));
    }
    // i4 at one row: full panels four at a time (blockPanels; 10 panels of 32 on the
    // AVX-512 row: two blocks, then two panels alone).
    GemmSpec decode{1, 320, 96, false, Activation::Silu};
    decode.gated = true, decode.weightType = DType::I4, decode.quantGroup = 32;
    ASSERT_TRUE(checkGemm(*row.jit, decode));
  }
  for (GemmSpec bad : {GemmSpec{4, 48, 8}, GemmSpec{4, 64, 8, false, Activation::None, true}}) {
    bad.gated = true;
    EXPECT_THROW(runtime::Gemm(hostJit(), bad), std::invalid_argument) << bad.key();
  }
}

TEST(GemmEpilogue, EveryActivationOnA67Cube) {
  for (Activation act : codegen::kAllActivations)
    ASSERT_TRUE(checkGemm(hostJit(), GemmSpec{67, 67, 67, true, act, true}));
}

// The table rows other than the host's, run on this host (it can execute them).
void checkRowOnShapes(const runtime::JitTarget& target, const char* expectedFamily) {
  auto jit = runtime::JitEngine::create(target);
  ASSERT_STREQ(jit->microKernel().family, expectedFamily);
  for (int64_t m : {1, 3, 4, 5, 9})
    for (int64_t n : {1, 4, 7, 8, 9, 15, 16, 17, 33})
      for (int64_t k : {1, 5, 8}) ASSERT_TRUE(checkGemm(*jit, GemmSpec{m, n, k, true}));
  for (Activation act : codegen::kAllActivations) ASSERT_TRUE(checkGemm(*jit, GemmSpec{11, 21, 13, true, act, true}));
  ASSERT_TRUE(checkGemm(*jit, GemmSpec{97, 128, 255, true, Activation::Relu}));
}

TEST(GemmEpilogue, Sse2BaselineRow) {
  ASSERT_NO_FATAL_FAILURE(checkRowOnShapes({"x86-64", ""}, "sse2"));
}

TEST(GemmEpilogue, AvxWithoutFmaRow) {
  if (hostJit().cpuFeatures().find("+avx,") == std::string::npos &&
      hostJit().cpuFeatures().find("+avx2") == std::string::npos)
    GTEST_SKIP() << "host has no AVX";
  ASSERT_NO_FATAL_FAILURE(checkRowOnShapes({"x86-64", "+avx"}, "avx"));
}

TEST(GemmEpilogue, WideFmaRows) {
  for (const char* family : {"avx512", "avx2_fma"}) {
    if (!codegen::canExecute(hostCpuFeatures(), *codegen::findMicroKernel(family))) {
      std::printf("skipped: this host cannot execute the %s row\n", family);
      continue;
    }
    ASSERT_NO_FATAL_FAILURE(checkRowOnShapes({hostJit().cpuName(), "", family}, family));
  }
}

} // namespace
} // namespace nnc::testing
