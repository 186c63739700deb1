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

} // namespace
