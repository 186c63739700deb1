// Reports that read well for big models: repeated blocks collapse (torchinfo's depth),
// --expand lists every layer, and attention models get their KV cache and the
// attention scores in the as-written activation peak.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "NncProcess.h"

namespace {
using nnc_cli_test::runNnc;

TEST(BigModelReport, Llama7bCollapsesItsThirtyTwoBlocks) {
  auto r = runNnc({"examples/seeds/llama_7b.nn"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_NE(r.out.find("layers.0–31 (×32), per block     block      [1, 2048, 4096]     202,383,360"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  layers.*.feed_forward"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  all 32 blocks                  block      [1, 2048, 4096]   6,476,267,520"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("layers.5.attention"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("6,738,415,616  100.00 %"), std::string::npos) << r.out; // the total is unchanged

  auto all = runNnc({"examples/seeds/llama_7b.nn", "--expand"});
  ASSERT_EQ(all.exitCode, 0) << all.describe();
  EXPECT_NE(all.out.find("layers.31.feed_forward"), std::string::npos);
  EXPECT_EQ(all.out.find("(×32)"), std::string::npos);
}

TEST(BigModelReport, DifferentBlocksDoNotCollapse) {
  nnc_cli_test::TempDir dir;
  // Two stages whose blocks differ in width: only identical neighbours collapse.
  std::string path = dir.write("m.nn", "model m {\n  input x: [8]\n  repeat 3 as a { dense(8) relu }\n"
                                       "  repeat 2 as b { dense(8) dense(8) }\n  dense(2)\n}\n");
  auto r = runNnc({path});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_NE(r.out.find("a.0–2 (×3), per block"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("b.0–1 (×2), per block"), std::string::npos) << r.out;
}

TEST(BigModelReport, KvCacheAndAttentionScores) {
  auto r = runNnc({"examples/seeds/llama_7b.nn", "--format", "json"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  auto mem = nlohmann::json::parse(r.out)["memory"];
  // 32 layers × (key + value) × 4096 × 4 B per token; × 2048 tokens at f16.
  EXPECT_EQ(mem["kv_cache"]["bytes_per_token"]["f32"], 32 * 2 * 4096 * 4);
  EXPECT_EQ(mem["kv_cache"]["bytes_at_context"]["f16"], 32LL * 2 * 4096 * 2 * 2048);
  EXPECT_EQ(mem["kv_cache"]["context"], 2048);
  // One layer's scores live at the peak: 32 heads × 2048 × 2048 × 4 B.
  EXPECT_EQ(mem["attention_scores_at_peak_bytes"], 32LL * 2048 * 2048 * 4);
  auto mlp = runNnc({"examples/seeds/mnist.nn", "--format", "json"});
  EXPECT_EQ(nlohmann::json::parse(mlp.out)["memory"]["kv_cache"]["elements_per_token"], 0);
}

// The KV cache's "--generate allocates" only for a model --generate runs (it said so for
// a non-causal encoder); MACs per token divided, not truncated (77 / 3 gave 25); a
// training estimate past 64 bits is named as such (it was "activation memory").
TEST(BigModelReport, SmallPrintsSayWhatTheFiguresAre) {
  nnc_cli_test::TempDir dir;
  const std::string lm = dir.write("lm.nn", "model lm(seq = 8) {\n  input t: i32[seq]\n  e = embedding(23, 8)\n"
                                            "  a = attention(2)\n  head = dense(23)\n}\n");
  auto decoder = runNnc({lm});
  ASSERT_EQ(decoder.exitCode, 0) << decoder.describe();
  EXPECT_NE(decoder.out.find("; --generate allocates the f32 one (--kv-dtype)"), std::string::npos) << decoder.out;
  const std::string bert = dir.write("b.nn", "model b(seq = 8) {\n  input t: i32[seq]\n  e = embedding(23, 8)\n"
                                             "  a = attention(2, causal=false)\n  head = dense(23)\n}\n");
  auto encoder = runNnc({bert});
  ASSERT_EQ(encoder.exitCode, 0) << encoder.describe();
  EXPECT_EQ(encoder.out.find("--generate allocates"), std::string::npos) << encoder.out;
  EXPECT_NE(encoder.out.find("; --generate does not run this model (it needs token ids in, logits out and causal "
                             "attention)"),
            std::string::npos)
      << encoder.out;
  const std::string tokens = dir.write("t.nn", "model t {\n  input t: i32[3]\n  e = embedding(10, 2)\n  flatten\n"
                                               "  dense(7) relu\n  dense(5)\n}\n");
  auto perToken = runNnc({tokens});
  ASSERT_EQ(perToken.exitCode, 0) << perToken.describe();
  EXPECT_NE(perToken.out.find("25.7 per token (3 tokens per example)"), std::string::npos) << perToken.out;
  const std::string huge = dir.write("h.nn", "model m {\n  input x: [1000000000]\n  dense(600000000, bias=false)\n}\n");
  auto overflow = runNnc({huge, "--check"});
  EXPECT_EQ(overflow.exitCode, 1) << overflow.describe();
  EXPECT_NE(overflow.err.find("the memory to train model 'm' with Adam does not fit in 64 bits"), std::string::npos)
      << overflow.err;
  EXPECT_EQ(overflow.err.find("activation memory"), std::string::npos) << overflow.err;
  // No parameters: the Total row's share is blank, as each layer's is, not 100 % of nothing.
  const std::string none = dir.write("n.nn", "model n {\n  input x: [8]\n  relu\n}\n");
  auto empty = runNnc({none});
  ASSERT_EQ(empty.exitCode, 0) << empty.describe();
  EXPECT_EQ(empty.out.find("%"), empty.out.find("% of all operations")) << empty.out;
  auto emptyMarkdown = runNnc({none, "--format", "markdown"});
  EXPECT_NE(emptyMarkdown.out.find("| **Total** | | | **0** |  | **0** | **0** |"), std::string::npos)
      << emptyMarkdown.out;
}

} // namespace
