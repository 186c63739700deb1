// Every epilogue (each activation × bias on/off × residual on/off) on shapes with M,
// N and K tails, and every CpuTable row (SSE2 baseline, AVX without FMA, the host),
// all against the double reference (GemmReference.h).
#include <gtest/gtest.h>

#include "RowEngines.h"

namespace nnc::testing {
namespace {

using codegen::Activation;
using codegen::GemmSpec;

TEST(GemmEpilogue, EveryActivationBiasAndResidual) {
  for (Activation act : codegen::kAllActivations)
    for (bool bias : {false, true})
      for (bool residual : {false, true}) {
        if (!checkGemm(hostJit(), GemmSpec{13, 37, 19, bias, act, residual})) return;
        if (!checkGemm(hostJit(), GemmSpec{6, 16, 64, bias, act, residual})) return;
      }
}

TEST(GemmEpilogue, EveryActivationOnA67Cube) {
  for (Activation act : codegen::kAllActivations)
    if (!checkGemm(hostJit(), GemmSpec{67, 67, 67, true, act, true})) return;
}

// The table rows other than the host's, run on this host (it can execute them).
void checkRowOnShapes(const runtime::JitTarget& target, const char* expectedFamily) {
  auto jit = runtime::JitEngine::create(target);
  ASSERT_STREQ(jit->microKernel().family, expectedFamily);
  for (int64_t m : {1, 3, 4, 5, 9})
    for (int64_t n : {1, 4, 7, 8, 9, 15, 16, 17, 33})
      for (int64_t k : {1, 5, 8})
        if (!checkGemm(*jit, GemmSpec{m, n, k, true})) return;
  for (Activation act : codegen::kAllActivations)
    if (!checkGemm(*jit, GemmSpec{11, 21, 13, true, act, true})) return;
  checkGemm(*jit, GemmSpec{97, 128, 255, true, Activation::Relu});
}

TEST(GemmEpilogue, Sse2BaselineRow) { checkRowOnShapes({"x86-64", ""}, "sse2"); }

TEST(GemmEpilogue, AvxWithoutFmaRow) {
  if (hostJit().cpuFeatures().find("+avx,") == std::string::npos &&
      hostJit().cpuFeatures().find("+avx2") == std::string::npos)
    GTEST_SKIP() << "host has no AVX";
  checkRowOnShapes({"x86-64", "+avx"}, "avx");
}

TEST(GemmEpilogue, WideFmaRows) {
  for (const char* family : {"avx512", "avx2_fma"}) {
    if (!codegen::canExecute(hostCpuFeatures(), *codegen::findMicroKernel(family))) {
      std::printf("skipped: this host cannot execute the %s row\n", family);
      continue;
    }
    checkRowOnShapes({hostJit().cpuName(), "", family}, family);
  }
}

} // namespace
} // namespace nnc::testing
