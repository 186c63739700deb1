// `--emit plan` and the one liveness: for every example the kernel program prints, its
// arena equals the report's "as nnc runs it" figure (memory.runtime_arena_bytes), and
// for every example that runs, `--bench --format json` reports that same arena_bytes —
// the report, the plan and the runtime use one planner.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "NncProcess.h"

namespace {
using nnc_cli_test::runNnc;

std::vector<std::string> examples() {
  std::vector<std::string> out;
  for (const auto &e : std::filesystem::directory_iterator(std::string(NNC_SOURCE_DIR) + "/examples/seeds"))
    if (e.path().extension() == ".nn") out.push_back("examples/seeds/" + e.path().filename().string());
  out.push_back("examples/digits/digits.nn");
  std::sort(out.begin(), out.end());
  return out;
}

// "arena 266,240 B" in the plan's first line, as a number.
int64_t planArena(const std::string &plan) {
  std::smatch m;
  if (!std::regex_search(plan, m, std::regex("arena ([0-9,]+) B"))) return -1;
  std::string digits = m[1];
  digits.erase(std::remove(digits.begin(), digits.end(), ','), digits.end());
  return std::stoll(digits);
}

TEST(Plan, EveryExampleHasAPlanWhoseArenaIsTheReportsAndTheRuntimes) {
  int ran = 0;
  for (const std::string &ex : examples()) {
    SCOPED_TRACE(ex);
    for (const char *batch : {"1", "3"}) {
      auto report = runNnc({ex, "--format", "json", "--batch", batch});
      ASSERT_EQ(report.exitCode, 0) << report.describe();
      const nlohmann::json json = nlohmann::json::parse(report.out);
      const int64_t reported = json["memory"]["runtime_arena_bytes"];
      auto plan = runNnc({ex, "--emit", "plan", "--batch", batch});
      ASSERT_EQ(plan.exitCode, 0) << plan.describe();
      EXPECT_EQ(planArena(plan.out), reported);
      EXPECT_NE(plan.out.find("steps:"), std::string::npos);
      if (plan.out.find("no kernel:") != std::string::npos) continue; // cannot run yet
      // Random weights for billions of parameters take minutes: the arena of the models
      // that large (page 001's stack, LLaMA 7B) is checked against the plan above only.
      if (json["totals"]["params"].get<int64_t>() > 200'000'000) continue;
      auto bench = runNnc({ex, "--bench", "--random-weights", "1", "--runs", "1", "--format", "json", "--batch", batch},
                          120);
      ASSERT_EQ(bench.exitCode, 0) << bench.describe();
      EXPECT_EQ(nlohmann::json::parse(bench.out)["arena_bytes"].get<int64_t>(), reported);
      ++ran;
    }
  }
  EXPECT_GE(ran, 20); // the MLP examples run at both batches
}

TEST(Plan, MnistAtBatch64IsThreeFusedGemms) {
  auto r = runNnc({"examples/seeds/mnist.nn", "--emit", "plan", "--batch", "64"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_NE(r.out.find("3 steps, 6 constants"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fc1 (dense, line 4): gemm_m64_n256_k784_wf32_bias_relu"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fc3 (dense, line 6): gemm_m64_n10_k128_wf32_bias_"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("packed for gemm_m64_n256_k784"), std::string::npos) << r.out;
}

TEST(Plan, FoldedChainReadsBothLayersAtLoad) {
  nnc_cli_test::TempDir dir;
  std::string path = dir.write("chain.nn", "model m {\n  input x: [8]\n  a = dense(4)\n  b = dense(2)\n}\n");
  auto r = runNnc({path, "--emit", "plan"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_NE(r.out.find(": 1 step, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fold the chain's weights"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("of a, b"), std::string::npos) << r.out;
}

// The lowering per conv shape: a grouped 3×3 conv is im2col → GEMM → back to planes per
// group (one kernel each, shared by the groups) with the batchnorm folded into the
// group's rows at load and the relu in the epilogue; a 1×1 conv one GEMM whose A is its
// input transposed to NHWC, and whose result stays NHWC; a depthwise conv one kernel of
// its own on that NHWC map (weights transposed at load), its output converted to NCHW
// planes as the model's output.
TEST(Plan, ConvShapesAndTheirLowering) {
  nnc_cli_test::TempDir dir;
  std::string path = dir.write("conv.nn", "model m {\n  input x: [8, 9, 9]\n  a = conv2d(6, kernel=3, pad=1, groups=2)\n"
                                          "  bn = batchnorm\n  relu\n  b = conv2d(12, kernel=1)\n"
                                          "  dw = depthwise(3, stride=2, pad=1)\n}\n");
  auto r = runNnc({path, "--emit", "plan", "--batch", "2"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  EXPECT_NE(r.out.find("10 steps, 8 constants"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a (conv2d, line 3): layout_im2col_c8_h9_w9_g4_k3x3_s1x1_p1x1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a (conv2d, line 3): gemm_m162_n3_k36_wf32_bias_relu"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a (conv2d, line 3): layout_toplanes_c6_h9_w9_g3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fold the batchnorm into the weights"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("of a, bn; rows from 3; packed for gemm_m162_n3_k36"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("b (conv2d, line 6): layout_im2col_c6_h9_w9_g6_k1x1_s1x1_p0x0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("b (conv2d, line 6): gemm_m162_n12_k6_wf32_bias"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dw (depthwise, line 7): dw_c12_m1_h9_w9_k3x3_s2x2_p1x1_bias_nhwc"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stored transposed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dw (depthwise, line 7): layout_toplanes_c12_h5_w5_g12"), std::string::npos) << r.out; // the output
}

// An NHWC pool takes full pixels 8 at a time where its map stays in the caches, 2 at a
// time where it streams from memory (more than half the last-level cache): a map of
// 64 KB, and the same at batch 16,384 (1 GB), which is only planned here.
TEST(Plan, NhwcPoolsGroupPixelsByWhereTheMapLies) {
  nnc_cli_test::TempDir dir;
  std::string path = dir.write("pool.nn", "model m {\n  input x: [3, 32, 32]\n  c = conv2d(16, kernel=1)\n"
                                          "  p = maxpool(3, stride=2, pad=1)\n}\n");
  auto cached = runNnc({path, "--emit", "plan"});
  ASSERT_EQ(cached.exitCode, 0) << cached.describe();
  EXPECT_NE(cached.out.find("p (maxpool, line 4): pool_max_h32_w32_k3x3_s2x2_p1x1_nhwc_c16\n"), std::string::npos)
      << cached.out;
  auto streamed = runNnc({path, "--emit", "plan", "--batch", "16384"});
  ASSERT_EQ(streamed.exitCode, 0) << streamed.describe();
  EXPECT_NE(streamed.out.find("p (maxpool, line 4): pool_max_h32_w32_k3x3_s2x2_p1x1_nhwc_c16_g2\n"), std::string::npos)
      << streamed.out;
  // A pool of whole rows folds channel vectors, not pixel groups: no second kernel key.
  std::string whole = dir.write("whole.nn", "model m {\n  input x: [3, 32, 32]\n  c = conv2d(16, kernel=1)\n"
                                            "  p = maxpool(32)\n}\n");
  auto wholeStreamed = runNnc({whole, "--emit", "plan", "--batch", "16384"});
  ASSERT_EQ(wholeStreamed.exitCode, 0) << wholeStreamed.describe();
  EXPECT_NE(wholeStreamed.out.find("p (maxpool, line 4): pool_max_h32_w32_k32x32_s32x32_p0x0_nhwc_c16\n"), std::string::npos)
      << wholeStreamed.out;
}

// A gated_mlp is one GEMM of gate and up whose epilogue makes act(gate) · up (biases
// [gate; up] included), then the down GEMM with the residual, in every activation type
// (docs/lowering.md, "gated_mlp"); with a hidden size that is not a multiple of 16, a
// gate and an up GEMM and the product as its own step.
TEST(Plan, GatedMlpIsOneGemmOfGateAndUpInEveryActivationType) {
  nnc_cli_test::TempDir dir;
  const std::string gated = dir.write("g.nn", "model g {\n  input x: [8, 32]\n  residual { rmsnorm; gated_mlp(64) }\n}\n");
  for (auto [options, kernel] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{}, "gemm_m8_n128_k32_wf32_silu_gated"},
           {{"--activations", "bf16"}, "gemm_m8_n128_k32_wbf16_abf16_silu_gated"},
           {{"--activations", "i8"}, "gemm_m8_n128_k32_wi8_ai8_silu_gated"},
           {{"--dtype", "i4", "--activations", "i8"}, "gemm_m8_n128_k32_wi4_g32_ai8_silu_gated"}}) {
    std::vector<std::string> args{gated, "--emit", "plan"};
    args.insert(args.end(), options.begin(), options.end());
    auto r = runNnc(args);
    ASSERT_EQ(r.exitCode, 0) << r.describe();
    EXPECT_NE(r.out.find(": 3 steps, 3 constants"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("1 (gated_mlp, line 3): " + kernel + "_l1"), std::string::npos) << r.out;
  }
  const std::string biased =
      dir.write("b.nn", "model g {\n  input x: [8, 32]\n  residual { rmsnorm; gated_mlp(64, bias=true) }\n}\n");
  auto b = runNnc({biased, "--emit", "plan", "--activations", "i8"});
  ASSERT_EQ(b.exitCode, 0) << b.describe();
  EXPECT_NE(b.out.find(": 3 steps, 5 constants"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("1 (gated_mlp, line 3): gemm_m8_n128_k32_wi8_ai8_bias_silu_gated_l1"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("1.{gate,up}.bias [128] f32: the tensors' rows, one after another of 1.gate.bias, 1.up.bias"),
            std::string::npos)
      << b.out;
  const std::string odd = dir.write("o.nn", "model g {\n  input x: [8, 32]\n  residual { rmsnorm; gated_mlp(24) }\n}\n");
  auto o = runNnc({odd, "--emit", "plan"});
  ASSERT_EQ(o.exitCode, 0) << o.describe();
  EXPECT_NE(o.out.find(": 5 steps, "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("1 (gated_mlp, line 3): ew_gated_silu"), std::string::npos) << o.out;
}

// Between convs of one group the maps stay NHWC (docs/lowering.md, "Feature-map
// layouts"): a 3×3 conv after a conv is one GEMM reading its windows of the NHWC map in
// place (channels a multiple of 4), its weight's columns reordered at load, with the
// residual add and the relu after it in its epilogue; a 1×1 conv reads the map itself;
// only flatten (a view) needs the planes.
TEST(Plan, ConvChainsStayChannelsLast) {
  nnc_cli_test::TempDir dir;
  std::string path = dir.write("chain.nn", "model m {\n  input x: [3, 8, 8]\n  a = conv2d(8, kernel=3, pad=1) relu\n"
                                           "  residual { b = conv2d(8, kernel=3, pad=1) }\n  relu\n"
                                           "  c = conv2d(16, kernel=1)\n  flatten\n  d = dense(4)\n}\n");
  auto r = runNnc({path, "--emit", "plan"});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  // From the NCHW input: copied to NHWC with its padding, then window rows of 3·3 floats.
  EXPECT_NE(r.out.find("a (conv2d, line 3): layout_im2col_c3_h8_w8_g3_k1x1_s1x1_p1x1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a (conv2d, line 3): gemm_m64_n8_k27_wf32_win_h10_w10_c3_k3x3_s1x1_p0x0_rows_bias_relu"),
            std::string::npos) << r.out;
  // The relu after the residual add runs in b's epilogue.
  EXPECT_NE(r.out.find("b (conv2d, line 4): gemm_m64_n8_k72_wf32_win_h8_w8_c8_k3x3_s1x1_p1x1_bias_res_then_relu"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("columns in (tap, channel) order, 9 taps"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("ew_act_relu_c8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("c (conv2d, line 6): gemm_m64_n16_k8_wf32_bias"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("layout_toplanes_c16_h8_w8_g16"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("layout_toplanes_c8_"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("6 steps"), std::string::npos) << r.out;
}

} // namespace
