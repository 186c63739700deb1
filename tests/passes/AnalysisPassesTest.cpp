#include <gtest/gtest.h>

#include "CompileHelpers.h"

using nnc::test::compile;
using nnc::DType;

TEST(ParamCount, SeedMlp) {
  auto c = compile("model m { input x: [784] fc1 = dense(256) relu fc2 = dense(128) relu fc3 = dense(10) }");
  ASSERT_TRUE(c.ok) << c.diagnostics;
  EXPECT_EQ(c.analysis.totals.params, 235146);
  EXPECT_EQ(c.analysis.totals.weights, 234752);
  EXPECT_EQ(c.costs("fc1").params, 200960);
  EXPECT_EQ(c.analysis.totals.weightBytes.at(DType::I4), 117573);
}

TEST(ParamCount, StoredBytesFollowLayerDtypes) {
  auto c = compile("model m { input x: [10] dense(10, dtype=i8) dense(10) }");
  ASSERT_TRUE(c.ok) << c.diagnostics;
  EXPECT_EQ(c.analysis.totals.weightBytesStored, 110 + 110 * 4);
}

TEST(MacCount, BatchScalesMacs) {
  auto c = compile("model m { input x: [784] dense(128) relu dense(10) }", {{"batch", 64}});
  ASSERT_TRUE(c.ok) << c.diagnostics;
  EXPECT_EQ(c.analysis.totals.macsPerExample, 101632);
  EXPECT_EQ(c.analysis.totals.macs, 6504448);
}

TEST(MacCount, GroupedConvAndAttentionScores) {
  auto c = compile("model a { input x: [256, 13, 13] conv3 = conv2d(384, kernel=3, pad=1, bias=false) }");
  ASSERT_TRUE(c.ok) << c.diagnostics;
  EXPECT_EQ(c.costs("conv3").params, 884736);
  EXPECT_EQ(c.costs("conv3").macs, 884736LL * 169);
  auto t = compile("model a { input x: [16, 64] att = attention(4) }");
  ASSERT_TRUE(t.ok) << t.diagnostics;
  EXPECT_EQ(t.costs("att").macs, 16LL * 4 * 64 * 64);
  EXPECT_EQ(t.costs("att").attentionMacs, 2LL * 16 * 16 * 64);
}

TEST(MacCount, EveryLayerKindHasACostRule) {
  // A model using every layer kind must analyse without error (no op is skipped).
  auto c = compile(R"(model all {
    input x: [3, 16, 16]
    conv2d(8, kernel=3, pad=1) batchnorm relu6 depthwise(3, pad=1) lrn(3) maxpool(2) avgpool(2, stride=1)
    sigmoid tanh gelu gelu_tanh silu identity dropout(0.1) global_avgpool flatten dense(12) softmax
  })");
  ASSERT_TRUE(c.ok) << c.diagnostics;
  auto s = compile(R"(model seq { input t: i32[6] embedding(50, 16) pos_embedding(8) layernorm rmsnorm
                       attention(4, rope=true) mlp(32) gated_mlp(24) })");
  ASSERT_TRUE(s.ok) << s.diagnostics;
  EXPECT_GT(s.analysis.totals.macs, 0);
}

TEST(Memory, PeakReusesBuffersAndTrainingKeepsAll) {
  auto c = compile("model m { input x: [100] dense(50) relu dense(10) }");
  ASSERT_TRUE(c.ok) << c.diagnostics;
  const auto &m = c.analysis.memory;
  EXPECT_EQ(m.activationBytesAll, (50 + 50 + 10) * 4);
  EXPECT_EQ(m.activationPeakBytes, (100 + 50) * 4); // input and first output live together
  EXPECT_EQ(m.activationTrainingBytes, (100 + 50 + 50 + 10) * 4);
  ASSERT_EQ(m.training.size(), 3u);
  EXPECT_EQ(m.training[2].optimizerBytes, 2 * c.analysis.totals.params * 4);
}

TEST(Traffic, Page001Layer768To3072) {
  auto c = compile("model l { input x: [768] fc = dense(3072) }");
  ASSERT_TRUE(c.ok) << c.diagnostics;
  EXPECT_EQ(c.costs("fc").trafficNumbers, 2363136);
  auto b = compile("model l { input x: [768] fc = dense(3072) }", {{"batch", 256}});
  EXPECT_EQ(b.costs("fc").trafficNumbers / 256, 13056);
  EXPECT_NEAR(b.costs("fc").intensity, 180.7, 0.05);
}

TEST(Lint, AffineLayersWithoutNonlinearityWarn) {
  auto c = compile("model m { input x: [2] fc1 = dense(2) fc2 = dense(1) }");
  ASSERT_TRUE(c.ok) << c.diagnostics;
  ASSERT_EQ(c.analysis.lints.size(), 1u);
  EXPECT_NE(c.analysis.lints[0].message.find("one dense layer 2 → 1 with 3 parameters"), std::string::npos)
      << c.analysis.lints[0].message;
  EXPECT_NE(c.analysis.lints[0].message.find("nnc runs them as that one layer"), std::string::npos);
  auto ok = compile("model m { input x: [2] fc1 = dense(2) relu fc2 = dense(1) }");
  EXPECT_TRUE(ok.analysis.lints.empty());
  // Stored in two dtypes the pair is not folded: the warning must not say it is.
  auto mixed = compile("model m { input x: [64] dense(32, dtype=i4) dense(8) }");
  ASSERT_EQ(mixed.analysis.lints.size(), 1u);
  EXPECT_EQ(mixed.analysis.lints[0].message.find("runs them as"), std::string::npos) << mixed.analysis.lints[0].message;
}

// The warning says what the fold does with each pair: 100→10→10→100 folds 100→10→10
// (no added work) and keeps 10→100 apart (100→100 would multiply 10,000 weights, not
// 2,000), so only the first pair says "runs them as".
TEST(Lint, AffineChainWarningFollowsTheFold) {
  auto c = compile("model m { input x: [100] a = dense(10) b = dense(10) c = dense(100) }");
  ASSERT_TRUE(c.ok) << c.diagnostics;
  ASSERT_EQ(c.analysis.lints.size(), 2u);
  EXPECT_NE(c.analysis.lints[0].message.find("'a' (dense 100 → 10) and 'b'"), std::string::npos)
      << c.analysis.lints[0].message;
  EXPECT_NE(c.analysis.lints[0].message.find("nnc runs them as that one layer"), std::string::npos)
      << c.analysis.lints[0].message;
  EXPECT_NE(c.analysis.lints[1].message.find("'b' (dense 10 → 10) and 'c'"), std::string::npos)
      << c.analysis.lints[1].message;
  EXPECT_EQ(c.analysis.lints[1].message.find("runs them"), std::string::npos) << c.analysis.lints[1].message;
  // 12→5→12→3 folds whole: each pair is part of a three-layer fold.
  auto three = compile("model m { input x: [12] a = dense(5) b = dense(12) c = dense(3) }");
  ASSERT_EQ(three.analysis.lints.size(), 2u);
  for (const auto& lint : three.analysis.lints)
    EXPECT_NE(lint.message.find("folded into one layer with 1 more of the chain"), std::string::npos) << lint.message;
}
