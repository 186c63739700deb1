#include <gtest/gtest.h>

#include "CompileHelpers.h"
#include "compiler/ir/Printer.h"

using nnc::test::compile;
using nnc::ir::OpKind;

TEST(FoldLinearChains, FoldsTwoAffineLayers) {
  auto c = compile("model m { input x: [2] fc1 = dense(2) dropout(0.5) fc2 = dense(1) }", {}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  ASSERT_EQ(c.graph->ops.size(), 2u) << nnc::ir::printGraph(*c.graph);
  const auto &op = c.graph->ops[1];
  EXPECT_EQ(op.foldedFrom, (std::vector<std::string>{"fc1", "fc2"}));
  EXPECT_EQ(op.attrs.in, 2);
  EXPECT_EQ(op.attrs.out, 1);
  EXPECT_NE(nnc::ir::printGraph(*c.graph).find("folded=[fc1, fc2]"), std::string::npos);
}

TEST(FoldLinearChains, KeepsLayersWhenFoldingAddsWork) {
  auto c = compile("model m { input x: [100] dense(2) dense(100) }", {}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  EXPECT_EQ(c.graph->ops.size(), 3u);
}

TEST(FuseEpilogues, ActivationAndResidualMoveIntoTheDense) {
  auto c = compile("model m { input x: [8] residual { dense(8) relu } dense(3) sigmoid }", {}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  ASSERT_EQ(c.graph->ops.size(), 3u) << nnc::ir::printGraph(*c.graph);
  EXPECT_EQ(c.graph->ops[1].epilogue, OpKind::Relu);
  EXPECT_EQ(c.graph->ops[1].residualInput, 0);
  EXPECT_EQ(c.graph->ops[2].epilogue, OpKind::Sigmoid);
}
