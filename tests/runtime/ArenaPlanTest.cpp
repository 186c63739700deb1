// The arena planner: live buffers never overlap, views share their input's buffer,
// space is reused after a buffer's last reader, and every buffer is 64-byte aligned.
#include <gtest/gtest.h>

#include "CompileHelpers.h"
#include "runtime/model/ArenaPlan.h"

namespace {
using namespace nnc;

void expectNoOverlapWhileLive(const ir::Graph &g, const runtime::ArenaPlan &plan) {
  const size_t n = g.ops.size();
  std::vector<size_t> lastUse(n);
  std::vector<size_t> root(n);
  for (size_t i = 0; i < n; ++i) {
    root[i] = plan.isView[i] ? root[size_t(g.ops[i].inputs[0])] : i;
    lastUse[root[i]] = std::max(lastUse[root[i]], i);
    for (auto v : g.ops[i].inputs) lastUse[root[size_t(v)]] = std::max(lastUse[root[size_t(v)]], i);
    if (g.ops[i].residualInput >= 0) lastUse[root[size_t(g.ops[i].residualInput)]] = i;
  }
  lastUse[root[size_t(g.output)]] = n;
  for (size_t a = 0; a < n; ++a)
    for (size_t b = a + 1; b < n; ++b) {
      if (root[a] != a || root[b] != b) continue;
      bool bothLive = b <= lastUse[a]; // b is defined while a is still needed
      if (!bothLive) continue;
      int64_t aEnd = plan.offset[a] + g.ops[a].type.elements(), bEnd = plan.offset[b] + g.ops[b].type.elements();
      EXPECT_TRUE(aEnd <= plan.offset[b] || bEnd <= plan.offset[a])
          << "ops " << a << " and " << b << " overlap while both live";
    }
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(plan.offset[i] % 16, 0) << "op " << i << " is not 64-byte aligned";
    EXPECT_LE(plan.offset[i] + g.ops[i].type.elements(), plan.sizeFloats);
  }
}

TEST(ArenaPlan, ChainReusesSpaceAndViewsShare) {
  auto c = test::compile("model m { input x: [100] dense(64) relu flatten dense(64) relu dense(64) dropout(0.1) dense(3) }",
                         {{"batch", 4}}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  auto plan = runtime::planArena(*c.graph);
  expectNoOverlapWhileLive(*c.graph, plan);
  for (size_t i = 0; i < c.graph->ops.size(); ++i)
    if (plan.isView[i]) {
      EXPECT_EQ(plan.offset[i], plan.offset[size_t(c.graph->ops[i].inputs[0])]);
    }
  // Without reuse the arena would hold every output: 400 + 3 × 256 + 12 floats.
  EXPECT_LT(plan.sizeFloats, 400 + 3 * 256 + 16);
  EXPECT_LE(plan.sizeFloats, 400 + 256 + 256); // at most two live buffers plus the input
}

TEST(ArenaPlan, ResidualKeepsItsInputAlive) {
  auto c = test::compile("model m { input x: [32] dense(32) relu residual { dense(32) relu dense(32) } "
                         "residual { dense(32) relu } shortcut { dense(32) } softmax }",
                         {{"batch", 3}}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  expectNoOverlapWhileLive(*c.graph, runtime::planArena(*c.graph));
}

} // namespace
