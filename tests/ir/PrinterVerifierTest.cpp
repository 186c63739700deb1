#include <gtest/gtest.h>

#include "CompileHelpers.h"
#include "compiler/ir/Printer.h"
#include "compiler/ir/Verifier.h"

using nnc::test::compile;

TEST(Printer, ShowsTypesParamsAndLines) {
  auto c = compile("model m {\n input x: [4]\n fc = dense(3)\n}");
  ASSERT_TRUE(c.ok) << c.diagnostics;
  std::string ir = nnc::ir::printGraph(*c.graph);
  EXPECT_NE(ir.find("%1 = dense \"fc\"(%0) {out=3, in=4, bias=true} : f32[1, 3]"), std::string::npos) << ir;
  EXPECT_NE(ir.find("weight[3, 4]"), std::string::npos) << ir;
  EXPECT_NE(ir.find("# line 3"), std::string::npos) << ir;
}

TEST(Verifier, AcceptsAnalysedGraphsAndCatchesBrokenOnes) {
  auto c = compile("model m { input x: [4] dense(3) relu }");
  ASSERT_TRUE(c.ok) << c.diagnostics;
  EXPECT_TRUE(nnc::ir::verifyGraph(*c.graph).empty());
  auto g = *c.graph;
  g.ops[2].inputs = {5};
  EXPECT_FALSE(nnc::ir::verifyGraph(g).empty());
  g = *c.graph;
  g.ops[1].type.shape[0] = 2;
  EXPECT_FALSE(nnc::ir::verifyGraph(g).empty());
}
