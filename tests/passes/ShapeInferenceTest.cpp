#include <gtest/gtest.h>

#include "CompileHelpers.h"

using nnc::test::compile;

TEST(ShapeInference, DenseInMismatchPointsAtTheLayerAndItsProducer) {
  auto c = compile("model bad {\n  input x: [784]\n  dense(256) relu\n  dense(128, in=512)\n}\n");
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics.find("test.nn:4:"), std::string::npos) << c.diagnostics;
  EXPECT_NE(c.diagnostics.find("512"), std::string::npos);
  EXPECT_NE(c.diagnostics.find("receives 256"), std::string::npos);
  EXPECT_NE(c.diagnostics.find("line 3"), std::string::npos);
}

TEST(ShapeInference, ConvAndPoolOutputs) {
  auto c = compile("model a { input x: [3, 224, 224] conv2d(96, kernel=11, stride=4, pad=2) maxpool(3, stride=2) "
                   "conv2d(256, kernel=5, pad=2, groups=2) global_avgpool }");
  ASSERT_TRUE(c.ok) << c.diagnostics;
  EXPECT_EQ(c.op("0")->type.shape, (std::vector<int64_t>{1, 96, 55, 55}));
  EXPECT_EQ(c.op("1")->type.shape, (std::vector<int64_t>{1, 96, 27, 27}));
  EXPECT_EQ(c.op("2")->params[0].shape, (std::vector<int64_t>{256, 48, 5, 5}));
  EXPECT_EQ(c.graph->ops.back().type.shape, (std::vector<int64_t>{1, 256}));
}

TEST(ShapeInference, GroupsMustDivideChannels) {
  auto c = compile("model a { input x: [3, 8, 8] conv2d(4, kernel=3, groups=2) }");
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics.find("groups=2 must divide the 3 input channels"), std::string::npos) << c.diagnostics;
}

TEST(ShapeInference, KernelLargerThanInputIsAnError) {
  auto c = compile("model a { input x: [3, 4, 4] conv2d(4, kernel=7) }");
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics.find("larger than the padded"), std::string::npos) << c.diagnostics;
}

TEST(ShapeInference, ResidualShapesMustMatch) {
  auto c = compile("model a { input x: [8] residual { dense(4) } }");
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics.find("[4]"), std::string::npos) << c.diagnostics;
  EXPECT_NE(c.diagnostics.find("[8]"), std::string::npos) << c.diagnostics;
}

TEST(ShapeInference, AttentionDivisibility) {
  EXPECT_FALSE(compile("model a { input x: [4, 10] attention(3) }").ok);
  EXPECT_FALSE(compile("model a { input x: [4, 12] attention(6, kv_heads=4) }").ok);
  EXPECT_FALSE(compile("model a { input x: [4, 6] attention(2, rope=true) }").ok);
  EXPECT_TRUE(compile("model a { input x: [4, 12] attention(6, kv_heads=3) }").ok);
}

TEST(ShapeInference, PosEmbeddingLimitsSequence) {
  auto c = compile("model a { input x: [9, 4] pos_embedding(8) }");
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics.find("the sequence has 9"), std::string::npos) << c.diagnostics;
}

TEST(ShapeInference, TieNeedsMatchingEmbedding) {
  EXPECT_TRUE(compile("model a { input t: i32[5] emb = embedding(100, 16) dense(100, tie=emb, bias=false) }").ok);
  auto bad = compile("model a { input t: i32[5] emb = embedding(100, 16) dense(99, tie=emb) }");
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.diagnostics.find("[100, 16]"), std::string::npos) << bad.diagnostics;
}

TEST(ShapeInference, CountsBeyond64BitsAreErrors) {
  auto c = compile("model a { input x: [4_000_000_000] dense(4_000_000_000) dense(4_000_000_000) }");
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics.find("64 bits"), std::string::npos) << c.diagnostics;
}

TEST(ShapeInference, IndependentShapeErrorsAreAllReported) {
  auto c = compile("model a { input x: [8] dense(4, in=3) residual { dense(5) } }");
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.diagnostics.find("in=3"), std::string::npos) << c.diagnostics;
  EXPECT_NE(c.diagnostics.find("residual"), std::string::npos) << c.diagnostics;
}
