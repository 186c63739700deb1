#include <gtest/gtest.h>

#include "CompileHelpers.h"

using nnc::test::compile;

std::vector<std::string> paramNames(const nnc::test::Compiled &c) {
  std::vector<std::string> out;
  for (const auto &op : c.graph->ops)
    for (const auto &p : op.params) out.push_back(p.name);
  return out;
}

TEST(Expander, UnnamedLayersGetSequentialIndices) {
  auto c = compile("model t { input x: [20] dense(64) relu dense(64) relu dense(1) sigmoid }");
  ASSERT_TRUE(c.ok) << c.diagnostics;
  EXPECT_EQ(paramNames(c), (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"}));
}

TEST(Expander, RepeatAndBlocksNameLikePyTorch) {
  auto c = compile(R"(
    block decoder(ffn) {
      residual { attention_norm = rmsnorm; attention = attention(2) }
      residual { ffn_norm = rmsnorm; feed_forward = gated_mlp(ffn) }
    }
    model m { input t: i32[4] tok = embedding(10, 8) repeat 2 as layers { decoder(ffn=16) } enc = decoder(16) })");
  ASSERT_TRUE(c.ok) << c.diagnostics;
  auto names = paramNames(c);
  for (const char *n : {"tok.weight", "layers.0.attention_norm.weight", "layers.1.attention.q.weight",
                        "layers.1.feed_forward.gate.weight", "enc.attention.o.weight", "enc.ffn_norm.weight"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
}

TEST(Expander, ResidualBodyContinuesEnclosingNumbering) {
  auto c = compile("model m { input x: [8] dense(8) relu residual { dense(8) relu } dense(2) }");
  ASSERT_TRUE(c.ok) << c.diagnostics;
  EXPECT_NE(c.op("2"), nullptr);
  EXPECT_NE(c.op("4"), nullptr);
  EXPECT_EQ(c.op("4")->kind, nnc::ir::OpKind::Dense);
}

TEST(Expander, SetAndBatchOverrideParameters) {
  auto c = compile("model m(hidden = 4) { input x: [3] dense(hidden) }", {{"hidden", 7}, {"batch", 5}});
  ASSERT_TRUE(c.ok) << c.diagnostics;
  EXPECT_EQ(c.graph->ops.back().type.shape, (std::vector<int64_t>{5, 7}));
}

TEST(Expander, UnknownSetNameSuggests) {
  auto c = compile("model m(hidden = 4) { input x: [3] dense(hidden) }", {{"hiden", 7}});
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics.find("did you mean 'hidden'"), std::string::npos) << c.diagnostics;
}

TEST(Expander, InexactDivisionNamesBothNumbers) {
  auto c = compile("model m { input x: [3] dense(10 / 3) }");
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics.find("10 / 3"), std::string::npos) << c.diagnostics;
}

TEST(Expander, RecursionThroughBlocksIsAnError) {
  auto c = compile("block a() { b() } block b() { a() } model m { input x: [3] a() }");
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics.find("cannot recurse"), std::string::npos) << c.diagnostics;
}

TEST(Expander, HugeRepeatIsRejectedQuickly) {
  auto c = compile("model m { input x: [3] repeat 1_000_000_000_000 { relu } }");
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics.find("repeat count too large"), std::string::npos) << c.diagnostics;
}

TEST(Expander, SeveralModelsNeedModelOption) {
  const char *src = "model a { input x: [3] relu } model b { input x: [4] relu }";
  EXPECT_FALSE(compile(src).ok);
  auto b = compile(src, {}, false, "b");
  ASSERT_TRUE(b.ok) << b.diagnostics;
  EXPECT_EQ(b.graph->ops[0].type.shape[1], 4);
}
