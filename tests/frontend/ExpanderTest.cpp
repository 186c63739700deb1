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

// ---- Weight names of repeats and block uses (LANGUAGE.md §3, docs/language-notes.md) ----
using Names = std::vector<std::string>;

TEST(ExpanderNames, UnnamedRepeatIsNamedLayers) {
  auto c = compile("model m { input x: [4] repeat 2 { dense(4) relu } dense(1) }");
  ASSERT_TRUE(c.ok) << c.diagnostics;
  EXPECT_EQ(paramNames(c), (Names{"layers.0.0.weight", "layers.0.0.bias", "layers.1.0.weight",
                                  "layers.1.0.bias", "0.weight", "0.bias"}));
}

// Issue 8, part 5: two unnamed uses of a block holding an unnamed repeat used to collide
// on `layers.0.0`. The unnamed repeats of one path now append to one `layers` list.
TEST(ExpanderNames, UnnamedRepeatsInUnnamedBlockUsesAppendToOneList) {
  auto c = compile(R"(
    block stage(w, n, out) { repeat n { dense(w) relu } dense(out) relu }
    model m { input x: [24]  stage(16, 2, 12)  stage(8, 1, 5) })");
  ASSERT_TRUE(c.ok) << c.diagnostics;
  Names ops;
  for (const auto &op : c.graph->ops) ops.push_back(op.name);
  EXPECT_EQ(ops, (Names{"x", "layers.0.0", "layers.0.1", "layers.1.0", "layers.1.1", "0", "1", "layers.2.0",
                        "layers.2.1", "2", "3"}));
  EXPECT_EQ(paramNames(c), (Names{"layers.0.0.weight", "layers.0.0.bias", "layers.1.0.weight", "layers.1.0.bias",
                                  "0.weight", "0.bias", "layers.2.0.weight", "layers.2.0.bias", "2.weight",
                                  "2.bias"}));
  EXPECT_EQ(c.op("layers.2.0")->params[0].shape, (std::vector<int64_t>{8, 12}));
}

TEST(ExpanderNames, TwoUnnamedRepeatsInOneBodyContinueTheIndex) {
  auto c = compile("model m { input x: [4] repeat 2 { dense(4) } relu repeat 1 { dense(4) } repeat 0 { dense(9) }"
                   " repeat 1 { dense(2) } }");
  ASSERT_TRUE(c.ok) << c.diagnostics;
  EXPECT_EQ(paramNames(c), (Names{"layers.0.0.weight", "layers.0.0.bias", "layers.1.0.weight", "layers.1.0.bias",
                                  "layers.2.0.weight", "layers.2.0.bias", "layers.3.0.weight", "layers.3.0.bias"}));
}

TEST(ExpanderNames, NestedRepeatsAndBlockUses) {
  // named repeat > unnamed block use > unnamed repeat; unnamed repeat > unnamed repeat;
  // unnamed repeat > named block use > unnamed repeat.
  auto c = compile(R"(
    block inner() { dense(4) repeat 2 { dense(4) relu } }
    model m {
      input x: [4]
      repeat 2 as blocks { inner() inner() }
      repeat 1 { repeat 2 { dense(4) } dense(4) }
      repeat 1 { sub = inner() }
    })");
  ASSERT_TRUE(c.ok) << c.diagnostics;
  Names weights;
  for (const auto &n : paramNames(c))
    if (n.size() > 7 && n.compare(n.size() - 7, 7, ".weight") == 0) weights.push_back(n);
  EXPECT_EQ(weights, (Names{"blocks.0.0.weight", "blocks.0.layers.0.0.weight", "blocks.0.layers.1.0.weight",
                            "blocks.0.1.weight", "blocks.0.layers.2.0.weight", "blocks.0.layers.3.0.weight",
                            "blocks.1.0.weight", "blocks.1.layers.0.0.weight", "blocks.1.layers.1.0.weight",
                            "blocks.1.1.weight", "blocks.1.layers.2.0.weight", "blocks.1.layers.3.0.weight",
                            "layers.0.layers.0.0.weight", "layers.0.layers.1.0.weight", "layers.0.0.weight",
                            "layers.1.sub.0.weight", "layers.1.sub.layers.0.0.weight",
                            "layers.1.sub.layers.1.0.weight"}));
}

TEST(ExpanderNames, ResidualInsideRepeatContinuesTheIterationNumbering) {
  auto c = compile(R"(
    model m { input x: [4]
      repeat 2 { residual { dense(4) relu } shortcut { proj = dense(4) } relu dense(4) } })");
  ASSERT_TRUE(c.ok) << c.diagnostics;
  EXPECT_EQ(paramNames(c), (Names{"layers.0.0.weight", "layers.0.0.bias", "layers.0.proj.weight", "layers.0.proj.bias",
                                  "layers.0.4.weight", "layers.0.4.bias", "layers.1.0.weight", "layers.1.0.bias",
                                  "layers.1.proj.weight", "layers.1.proj.bias", "layers.1.4.weight",
                                  "layers.1.4.bias"}));
}

TEST(ExpanderNames, UnnamedRepeatContinuesAfterAWrittenLayers) {
  auto c = compile("model m { input x: [4] repeat 1 as layers { dense(4) } repeat 1 { dense(4) } }");
  ASSERT_TRUE(c.ok) << c.diagnostics;
  EXPECT_EQ(paramNames(c), (Names{"layers.0.0.weight", "layers.0.0.bias", "layers.1.0.weight", "layers.1.0.bias"}));
}

// Names the user wrote may still collide; that stays an error.
TEST(ExpanderNames, WrittenNamesThatCollideAreErrors) {
  for (const char *src : {"model m { input x: [4] fc = dense(4) fc = dense(4) }",
                          "model m { input x: [4] repeat 1 as b { dense(4) } repeat 1 as b { dense(4) } }",
                          "model m { input x: [4] repeat 1 { dense(4) } repeat 1 as layers { dense(4) } }",
                          "block k() { fc = dense(4) } model m { input x: [4] k() k() }"}) {
    auto c = compile(src);
    EXPECT_FALSE(c.ok) << src;
    EXPECT_NE(c.diagnostics.find("is already used"), std::string::npos) << src << "\n" << c.diagnostics;
  }
}

// A block named like a layer kind takes the kind's uses in its file: allowed, but said.
TEST(Expander, BlockNamedLikeALayerKindIsAWarning) {
  auto c = compile("block dense(n) { relu }\nmodel m { input x: [4] dense(3) }");
  ASSERT_TRUE(c.ok) << c.diagnostics;
  EXPECT_NE(c.diagnostics.find("warning: block 'dense' has the name of a layer kind"), std::string::npos)
      << c.diagnostics;
  EXPECT_EQ(c.graph->ops.back().kind, nnc::ir::OpKind::Relu);
}
