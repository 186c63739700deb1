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

// 12→5→12 alone would add work; 5→12→3 folds first, then 12→5 into that fold: the
// chain must keep all three layers, in order.
TEST(FoldLinearChains, FoldsIntoAnEarlierFoldKeepingEveryLayer) {
  auto c = compile("model m { input x: [12] dense(5) dense(12, bias=false) dense(3) }", {}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  ASSERT_EQ(c.graph->ops.size(), 2u) << nnc::ir::printGraph(*c.graph);
  const auto &op = c.graph->ops[1];
  EXPECT_EQ(op.foldedFrom, (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(op.attrs.in, 12);
  EXPECT_EQ(op.attrs.out, 3);
  EXPECT_TRUE(op.attrs.bias);
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

TEST(FuseEpilogues, ResidualAndActivationMoveIntoMlpsButNoBatchnorm) {
  auto c = compile("model m { input x: [4, 8] residual { mlp(16) } residual { gated_mlp(12) } relu "
                   "mlp(16) batchnorm }",
                   {}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  const auto &ops = c.graph->ops;
  ASSERT_EQ(ops.size(), 6u) << nnc::ir::printGraph(*c.graph);
  EXPECT_EQ(ops[1].kind, OpKind::Mlp);
  EXPECT_EQ(ops[1].residualInput, 0);
  EXPECT_EQ(ops[2].kind, OpKind::GatedMlp);
  EXPECT_EQ(ops[2].residualInput, 1);
  EXPECT_EQ(ops[2].epilogue, OpKind::Identity); // the relu comes after the add: not fusable
  EXPECT_EQ(ops[3].kind, OpKind::Relu);
  EXPECT_EQ(ops[4].kind, OpKind::Mlp); // the batchnorm after it stays, as its own op
  EXPECT_TRUE(ops[4].foldedNorm.empty());
  EXPECT_EQ(ops[5].kind, OpKind::BatchNorm);
}

// ResNet's downsampling block: the add's later operand (the shortcut's conv) takes the
// residual branch's output as its residual (a + b is b + a), and the relu after the add
// follows into the same epilogue; a relu after a grouped conv's add stays apart.
TEST(FuseEpilogues, AddGoesToItsLaterOperandAndTheReluAfterIt) {
  auto c = compile("model m { input x: [8, 6, 6]\n"
                   "  residual { a = conv2d(8, kernel=3, pad=1) bn = batchnorm } shortcut { s = conv2d(8, kernel=1) }\n"
                   "  relu\n"
                   "  residual { g = conv2d(8, kernel=3, pad=1, groups=2) } relu }",
                   {}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  const std::string printed = nnc::ir::printGraph(*c.graph);
  ASSERT_EQ(c.graph->ops.size(), 5u) << printed;
  const auto &a = c.graph->ops[1], &s = c.graph->ops[2], &g = c.graph->ops[3];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.foldedNorm, "bn");
  EXPECT_EQ(a.residualInput, -1);
  EXPECT_EQ(s.name, "s");
  EXPECT_EQ(s.residualInput, 1) << printed;
  EXPECT_EQ(s.afterResidual, OpKind::Relu);
  EXPECT_EQ(g.residualInput, 2);
  EXPECT_EQ(g.afterResidual, OpKind::Identity);
  EXPECT_EQ(c.graph->ops[4].kind, OpKind::Relu);
  EXPECT_NE(printed.find("then=relu"), std::string::npos) << printed;
}

TEST(FuseEpilogues, BatchnormActivationAndResidualMoveIntoTheConv) {
  auto c = compile("model m { input x: [4, 6, 6] residual { c = conv2d(4, kernel=3, pad=1) bn = batchnorm relu } }", {},
                   true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  ASSERT_EQ(c.graph->ops.size(), 2u) << nnc::ir::printGraph(*c.graph);
  const auto &conv = c.graph->ops[1];
  EXPECT_EQ(conv.foldedNorm, "bn");
  EXPECT_EQ(conv.foldedNormEps, 1e-5);
  EXPECT_EQ(conv.epilogue, OpKind::Relu);
  EXPECT_EQ(conv.residualInput, 0);
  // The batchnorm's tensors are still read (by the fold at load).
  std::vector<std::string> names;
  for (const auto &p : conv.params) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"c.weight", "c.bias", "bn.weight", "bn.bias", "bn.running_mean",
                                             "bn.running_var"}));
  EXPECT_NE(nnc::ir::printGraph(*c.graph).find("norm=bn"), std::string::npos);
}

TEST(FuseEpilogues, BatchnormFoldsIntoADenseButNotAfterAnActivation) {
  auto c = compile("model m { input x: [8] fc = dense(8) bn = batchnorm relu bn2 = batchnorm(eps=1e-3) }", {}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  ASSERT_EQ(c.graph->ops.size(), 3u) << nnc::ir::printGraph(*c.graph);
  EXPECT_EQ(c.graph->ops[1].foldedNorm, "bn");
  EXPECT_EQ(c.graph->ops[1].epilogue, OpKind::Relu);
  EXPECT_EQ(c.graph->ops[2].kind, OpKind::BatchNorm); // after the relu: a scale and shift of its own
}

TEST(FuseEpilogues, BatchnormOfASharedConvOutputStaysApart) {
  // The conv's output has two readers: folding would change what the other one sees.
  auto c = compile("model m { input x: [4, 6, 6] c = conv2d(4, kernel=1) residual { batchnorm } }", {}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  EXPECT_TRUE(c.graph->ops[1].foldedNorm.empty()) << nnc::ir::printGraph(*c.graph);
}
