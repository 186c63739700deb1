// The buffer planner (compiler/lower/BufferPlan.h): buffers live at the same time
// never overlap, views share their base's storage, space is reused after a buffer's
// last use, every buffer is 64-byte aligned and inside the arena.
#include <gtest/gtest.h>

#include "CompileHelpers.h"
#include "compiler/lower/BufferPlan.h"

namespace {
using namespace nnc;
using lower::Buffer;

void expectNoOverlapWhileLive(const lower::KernelProgram &p) {
  const auto &bs = p.buffers;
  for (size_t a = 0; a < bs.size(); ++a) {
    if (bs[a].viewOf >= 0) {
      EXPECT_EQ(bs[a].offset, bs[size_t(bs[a].viewOf)].offset) << "view b" << a;
      continue;
    }
    ASSERT_GE(bs[a].firstStep, 0) << "b" << a << " is never used";
    EXPECT_EQ(bs[a].offset % 16, 0) << "b" << a << " is not 64-byte aligned";
    EXPECT_LE(bs[a].offset + bs[a].elements, p.arenaFloats) << "b" << a;
    for (size_t b = a + 1; b < bs.size(); ++b) {
      if (bs[b].viewOf >= 0) continue;
      const bool bothLive = bs[a].firstStep <= bs[b].lastStep && bs[b].firstStep <= bs[a].lastStep;
      if (!bothLive) continue;
      EXPECT_TRUE(bs[a].offset + bs[a].elements <= bs[b].offset || bs[b].offset + bs[b].elements <= bs[a].offset)
          << "b" << a << " and b" << b << " overlap while both live";
    }
  }
}

TEST(BufferPlan, ChainReusesSpaceAndViewsShare) {
  auto c = test::compile("model m { input x: [100] dense(64) relu flatten dense(64) relu dense(64) dropout(0.1) dense(3) }",
                         {{"batch", 4}}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  const auto &p = c.program();
  expectNoOverlapWhileLive(p);
  int views = 0;
  for (const auto &b : p.buffers) views += b.viewOf >= 0;
  EXPECT_EQ(views, 1); // flatten (the dropout went with the fold of dense(64) · dense(3))
  // Without reuse the arena would hold every output: 400 + 3 × 256 + 12 floats.
  EXPECT_LT(p.arenaFloats, 400 + 3 * 256 + 16);
  EXPECT_LE(p.arenaFloats, 400 + 256 + 256); // at most two live buffers plus the input
}

TEST(BufferPlan, ResidualKeepsItsInputAlive) {
  auto c = test::compile("model m { input x: [32] dense(32) relu residual { dense(32) relu dense(32) } "
                         "residual { dense(32) relu } shortcut { dense(32) } softmax }",
                         {{"batch", 3}}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  expectNoOverlapWhileLive(c.program());
  lower::KernelProgram firstFit = c.program();
  lower::planBuffers(firstFit, /*greedyLimit=*/0); // the path of very large programs
  expectNoOverlapWhileLive(firstFit);
}

TEST(BufferPlan, LargestFirstLeavesNoHoleForTheNextBigBuffer) {
  // A small input, then two larger values. In step order, first fit puts the second
  // after the freed input (its hole is too small); largest-first reuses that space.
  auto c = test::compile("model m { input x: [100] dense(200) softmax dense(10) }", {}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  expectNoOverlapWhileLive(c.program());
  EXPECT_EQ(c.program().arenaFloats, 2 * 208); // sizes padded to 16 floats
  lower::KernelProgram firstFit = c.program();
  lower::planBuffers(firstFit, 0);
  expectNoOverlapWhileLive(firstFit);
  EXPECT_EQ(firstFit.arenaFloats, 112 + 2 * 208);
}

TEST(BufferPlan, EveryExampleIsPlannedWithoutOverlap) {
  auto c = test::compile("model m { input x: [3, 16, 16] conv2d(8, kernel=3, pad=1) relu maxpool(2) flatten "
                         "dense(10) layernorm softmax }",
                         {{"batch", 2}}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  expectNoOverlapWhileLive(c.program());
  EXPECT_EQ(c.program().firstNotRunnable(), nullptr);
  // Attention's q/k/v, heads and score scratch, planned with the rest.
  auto m = test::compile("model m { input x: [4, 8] dense(8) attention(2) layernorm }", {{"batch", 2}}, true);
  ASSERT_TRUE(m.ok) << m.diagnostics;
  expectNoOverlapWhileLive(m.program());
  EXPECT_EQ(m.program().firstNotRunnable(), nullptr);
  // A depthwise conv stored below f32 (its weights a table in the dtype) runs.
  auto h = test::compile("model m { input x: [2, 6, 6] conv2d(4, 3) depthwise(3, dtype=f16) }", {{"batch", 2}}, true);
  ASSERT_TRUE(h.ok) << h.diagnostics;
  expectNoOverlapWhileLive(h.program());
  EXPECT_EQ(h.program().firstNotRunnable(), nullptr);
}

TEST(BufferPlan, MlpScratchIsPlannedWithoutOverlap) {
  // Token ids, gather, positions, an mlp and a gated_mlp (residuals fused into their down
  // GEMMs: the residual stays live until then), a tied head.
  auto c = test::compile("model m { input t: i32[6] tok = embedding(40, 8) pos_embedding(9) "
                         "residual { layernorm mlp(16) } residual { rmsnorm gated_mlp(12) } "
                         "dense(40, bias=false, tie=tok) }",
                         {{"batch", 3}}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  expectNoOverlapWhileLive(c.program());
  EXPECT_EQ(c.program().firstNotRunnable(), nullptr);
  int scratch = 0;
  for (const auto &b : c.program().buffers) scratch += b.role == lower::Buffer::Role::Scratch;
  EXPECT_EQ(scratch, 3); // mlp's hidden; gated_mlp's gate and up
}

TEST(BufferPlan, GroupedConvScratchIsPlannedWithoutOverlap) {
  // Per group: im2col scratch, GEMM scratch, then the planes; a residual read at the end.
  auto c = test::compile("model m { input x: [8, 9, 7] conv2d(8, kernel=3, pad=1) relu "
                         "residual { conv2d(8, kernel=3, pad=1, groups=4) batchnorm relu } depthwise(3, stride=2) }",
                         {{"batch", 3}}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  expectNoOverlapWhileLive(c.program());
  EXPECT_EQ(c.program().firstNotRunnable(), nullptr);
}

} // namespace
