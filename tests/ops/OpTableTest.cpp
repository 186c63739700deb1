// The op table (compiler/ops/OpTable.h): one complete row per OpKind, and the rows'
// options bind, default and print as the table says.
#include <gtest/gtest.h>

#include "CompileHelpers.h"
#include "compiler/ir/Printer.h"
#include "compiler/ops/OpTable.h"

namespace {
using namespace nnc;
using test::compile;

TEST(OpTable, EveryOpKindHasACompleteRowInOrder) {
  ASSERT_EQ(ops::opTableSize(), size_t(ir::OpKind::Add) + 1);
  for (size_t k = 0; k < ops::opTableSize(); ++k) {
    const auto kind = ir::OpKind(k);
    const ops::OpInfo &row = ops::opInfo(kind);
    SCOPED_TRACE(ir::opKindName(kind));
    EXPECT_EQ(row.kind, kind);
    EXPECT_NE(row.shape, nullptr);
    EXPECT_NE(row.cost, nullptr);
    // A view has no step; everything else lowers (perhaps to "no kernel yet").
    if (kind != ir::OpKind::Input) {
      EXPECT_EQ(row.isView, row.lower == nullptr);
    }
    for (const auto &o : row.options) {
      const bool stored = o.kind == ops::OptionSpec::Kind::DType || o.intField || o.boolField || o.floatField ||
                          o.actField || o.nameField;
      EXPECT_TRUE(stored) << o.name << " has no storage";
      if (o.kind == ops::OptionSpec::Kind::Pair) {
        EXPECT_NE(o.intField2, nullptr) << o.name;
      }
    }
  }
}

TEST(OpTable, DefaultsComeFromTheTable) {
  auto c = compile("model m { input x: [3, 9, 9] p = maxpool(3) q = avgpool(2, stride=1) flatten d = dropout "
                   "n = layernorm }");
  ASSERT_TRUE(c.ok) << c.diagnostics;
  EXPECT_EQ(c.op("p")->attrs.sh, 3); // stride = kernel
  EXPECT_EQ(c.op("q")->attrs.sh, 1);
  EXPECT_EQ(c.op("d")->attrs.p, 0.5);
  EXPECT_EQ(c.op("n")->attrs.eps, 1e-5);
  EXPECT_TRUE(c.op("n")->attrs.bias);
  auto a = compile("model a { input x: [4, 16] att = attention(4) g = gated_mlp(8) r = rmsnorm }");
  ASSERT_TRUE(a.ok) << a.diagnostics;
  EXPECT_EQ(a.op("att")->attrs.kvHeads, 4); // kv_heads = heads
  EXPECT_FALSE(a.op("att")->attrs.bias);
  EXPECT_EQ(a.op("g")->attrs.act, ir::OpKind::Silu);
  EXPECT_EQ(a.op("r")->attrs.eps, 1e-6);
}

TEST(OpTable, SignatureAndPrintedOptions) {
  EXPECT_EQ(ops::layerSignature(ir::OpKind::MaxPool), "maxpool(kernel, stride=..., pad=...)");
  auto c = compile("model m { input x: [3, 8, 8] c = conv2d(4, kernel=(3, 1), pad=1, bias=false) }");
  ASSERT_TRUE(c.ok) << c.diagnostics;
  std::string ir = ir::printGraph(*c.graph);
  EXPECT_NE(ir.find("{out=4, kernel=(3, 1), stride=1, pad=1, groups=1, bias=false}"), std::string::npos) << ir;
}

} // namespace
