// A GEMM kernel keeps its large buffers in the scratch its plan asks for
// (GemmPlan::scratchBytes, the aPack argument; docs/lowering.md, "Kernel scratch"), not on
// its stack: on every row this host executes and for every kind of kernel that takes
// scratch (packed A blocks, f16 panels widened once, weights in place transposed, dot
// kernels' converted rows, digit products, AMX tiles where the host has them), a call
// given exactly that much, flush against an inaccessible page, writes nothing past it,
// gives the bits runtime::Gemm gives, and takes a few KiB of stack.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "RowEngines.h"

namespace nnc::testing {
namespace {

using codegen::GemmSpec;

struct ScratchCase {
  const char* what;
  GemmSpec spec;
};

std::vector<ScratchCase> scratchCases() {
  std::vector<ScratchCase> out;
  GemmSpec blocked{96, 80, 1100};
  blocked.kc = 256; // K blocks: each MC×KC block of A packed
  out.push_back({"f32 in K blocks", blocked});
  GemmSpec wide{96, 64, 700};
  wide.weightType = DType::F16;
  out.push_back({"f16 weights", wide});
  GemmSpec rows{40, 64, 300};
  rows.weightRows = true;
  out.push_back({"f32 weights in place", rows});
  GemmSpec i8{40, 70, 1000};
  i8.weightType = DType::I8;
  out.push_back({"i8 weights", i8});
  GemmSpec i4{40, 70, 1024};
  i4.weightType = DType::I4, i4.quantGroup = 32;
  out.push_back({"i4 weights", i4});
  GemmSpec bytes{33, 64, 512};
  bytes.weightType = bytes.activationType = DType::I8;
  out.push_back({"i8 × i8", bytes});
  GemmSpec nibbles{40, 64, 1024};
  nibbles.weightType = DType::I4, nibbles.activationType = DType::I8, nibbles.quantGroup = 32;
  out.push_back({"i4 × i8", nibbles});
  GemmSpec halves{33, 64, 512};
  halves.weightType = halves.activationType = DType::BF16;
  out.push_back({"bf16 × bf16", halves});
  return out;
}

TEST(GemmScratch, KernelsWriteOnlyTheScratchTheirPlanAsksFor) {
  constexpr size_t kMaxFrameBytes = size_t(64) << 10;
  int withScratch = 0;
  for (const RowEngine& row : executableRows())
    for (const ScratchCase& c : scratchCases()) {
      SCOPED_TRACE(std::string(row.family) + " row, " + c.what + ", " + c.spec.key());
      const GemmSpec& s = c.spec;
      if (std::string missing = codegen::missingDotInstructions(s.activationType, row.jit->features(),
                                                                row.jit->microKernel());
          s.activationType != DType::F32 && !missing.empty()) {
        std::printf("[ skipped  ] %s on the %s row: the row lacks %s\n", c.what, row.family, missing.c_str());
        continue;
      }
      std::mt19937 rng(11);
      const std::vector<float> A = randomVector(rng, s.M * s.K), W = randomVector(rng, s.N * s.K);
      std::vector<const float*> weightRows(size_t(s.N));
      for (int64_t n = 0; n < s.N; ++n) weightRows[size_t(n)] = W.data() + n * s.K;
      runtime::Gemm gemm(*row.jit, s);
      const runtime::PackedWeights packed = s.weightRows ? gemm.referRows(weightRows.data(), nullptr) : gemm.pack(W.data());
      std::vector<float> want(size_t(s.M * s.N)), got(want.size(), NAN);
      gemm.run(A.data(), packed, nullptr, nullptr, want.data());

      const codegen::GemmPlan& plan = gemm.plan();
      withScratch += plan.scratchBytes > 0;
      // 64-byte aligned at its start, as the kernels assume, and ending within 64 bytes
      // of the guard page.
      GuardedBuffer scratch(size_t(std::max<int64_t>(plan.scratchBytes, 1) + 63) / 64 * 16, true);
      auto kernel = reinterpret_cast<codegen::GemmKernelFn>(row.jit->kernel(s));
      kernel(A.data(), packed.data(), nullptr, nullptr, got.data(), plan.scratchBytes > 0 ? scratch.data() : nullptr,
             0, plan.panels, 0, plan.rowBlocks);
      EXPECT_EQ(got, want);
      EXPECT_LT(row.jit->stackBytes(s), kMaxFrameBytes);
    }
  EXPECT_GT(withScratch, 0) << "no case took scratch: this tested nothing";
}

} // namespace
} // namespace nnc::testing
