// The library's memory bill (Options::maxMemory, Model::memoryBill) and weight maps
// (nnc::WeightMap, loadWeights with a map), through libnnc.so as a host links it: the
// bill is the CLI's (docs/cli.md --max-memory), its refusal an nnc::Error with the
// figures per part and the largest layer before anything is allocated; a renamed
// checkpoint loads through a map to the very output of the original.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>

#include "DecoderChecks.h"
#include "SafeTensorsEdit.h"
#include "nnc/nnc.h"

namespace {

#define EXPECT_CONTAINS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

std::string source(const std::string &relative) { return std::string(NNC_SOURCE_DIR) + "/" + relative; }

std::string slurp(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

nnc::Options digitsOptions(int64_t maxMemory = 0) {
  nnc::Options o;
  o.kernelCacheDir = "";
  o.batch = 5;
  o.maxMemory = maxMemory;
  return o;
}

// The message of the Error `fn` throws (empty when it does not throw).
template <typename Fn> std::string errorOf(Fn fn) {
  try {
    fn();
  } catch (const nnc::Error &e) {
    return e.what();
  }
  return {};
}

int64_t part(const nnc::MemoryBill &b, const std::string &what) {
  for (const auto &p : b.parts)
    if (p.what == what) return p.bytes;
  ADD_FAILURE() << "no part " << what;
  return -1;
}

TEST(ApiMemory, TheBillHasEveryPartAndTheLargestLayer) {
  nnc::Model m = nnc::Model::fromFile(source("examples/digits/digits.nn"), digitsOptions());
  nnc::MemoryBill b = m.memoryBill();
  EXPECT_EQ(part(b, "weights as f32"), 6570 * 4);           // every parameter as f32
  EXPECT_EQ(part(b, "other constants (biases, norms, RoPE tables)"), (64 + 32 + 10) * 4);
  EXPECT_GE(part(b, "packed GEMM panels"), (64 * 64 + 64 * 32 + 32 * 10) * 4); // padded to the micro-kernel
  EXPECT_EQ(part(b, "packing scratch (the largest packed weight as f32)"), 64 * 64 * 4);
  EXPECT_EQ(part(b, "activation arena"), m.report().runtime_arena_bytes);
  EXPECT_EQ(part(b, "input"), 5 * 64 * 4);
  EXPECT_EQ(part(b, "output"), 5 * 10 * 4);
  EXPECT_EQ(part(b, "weight file, read whole"), 0); // loadWeights adds the file's size
  int64_t sum = 0;
  for (const auto &p : b.parts) sum += p.bytes;
  EXPECT_EQ(b.total, sum);
  EXPECT_EQ(b.largestLayer, "fc1");
  EXPECT_EQ(b.largestLayerBytes, (64 * 64 + 64) * 4);
  EXPECT_EQ(b.largestLayerWhere, "dense, line 8");
}

TEST(ApiMemory, OverTheLimitNothingIsLoadedAndTheErrorGivesTheFigures) {
  nnc::Model m = nnc::Model::fromFile(source("examples/digits/digits.nn"), digitsOptions(50'000));
  const std::string e = errorOf([&] { m.loadWeights(source("examples/digits/digits.safetensors")); });
  for (const char *s : {"model 'digits' at batch 5 needs up to", "more than the limit given (Options::maxMemory) "
                        "(50,000 bytes (48.83 KiB)); nothing was allocated:",
                        "weight file, read whole:", "26,712 bytes", "weights as f32:", "packed GEMM panels:",
                        "activation arena:", "input:", "the largest layer is 'fc1' (dense, line 8) with 16,640 bytes"})
    EXPECT_CONTAINS(e, s);
  EXPECT_EQ(e.find("--max-memory"), std::string::npos) << "the library never names a flag";
  EXPECT_CONTAINS(errorOf([&] { m.randomWeights(1); }), "more than the limit given (Options::maxMemory)");
  const std::string bytes = slurp(source("examples/digits/digits.safetensors"));
  EXPECT_CONTAINS(errorOf([&] { m.loadWeights(bytes.data(), bytes.size()); }), "weight file, read whole:");
  std::vector<float> x(size_t(m.inputElements())), y(size_t(m.outputElements()));
  EXPECT_CONTAINS(errorOf([&] { m.run(x.data(), y.data()); }), "before the weights were loaded");

  // Just enough: the bill with the file's bytes.
  const int64_t need = m.memoryBill().total + int64_t(bytes.size());
  nnc::Model fits = nnc::Model::fromFile(source("examples/digits/digits.nn"), digitsOptions(need));
  EXPECT_EQ(errorOf([&] { fits.loadWeights(source("examples/digits/digits.safetensors")); }), "");
  EXPECT_EQ(errorOf([&] { fits.run(x.data(), y.data()); }), "");
  nnc::Model tight = nnc::Model::fromFile(source("examples/digits/digits.nn"), digitsOptions(need - 1));
  EXPECT_CONTAINS(errorOf([&] { tight.loadWeights(source("examples/digits/digits.safetensors")); }), "needs up to");
  EXPECT_EQ(errorOf([&] { tight.randomWeights(3); }), "") << "random weights read no file";
  nnc::Model off = nnc::Model::fromFile(source("examples/digits/digits.nn"), digitsOptions(-1));
  EXPECT_EQ(errorOf([&] { off.loadWeights(source("examples/digits/digits.safetensors")); }), "");
}

TEST(ApiMemory, WeightsBeyondTheMachineAreRefusedBeforeTheyAreTaken) {
  // 10^12 weights (4 TB as f32): over any machine's available memory, the default limit.
  nnc::Options o;
  o.kernelCacheDir = "";
  nnc::Model m = nnc::Model::fromSource("model huge {\n  input x: [1_000_000]\n  fc = dense(1_000_000)\n}\n", o);
  EXPECT_GT(m.memoryBill().total, int64_t(8'000'000'000'000));
  const auto start = std::chrono::steady_clock::now();
  const std::string e = errorOf([&] { m.randomWeights(5); });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  EXPECT_CONTAINS(e, "model 'huge' at batch 1 needs up to");
  EXPECT_CONTAINS(e, "more than the memory this machine has available");
  EXPECT_CONTAINS(e, "weights as f32:");
  EXPECT_CONTAINS(e, "4,000,004,000,000 bytes");
  EXPECT_CONTAINS(e, "the largest layer is 'fc' (dense, line 3)");
}

// A batch whose arena no machine holds (4 TB): making the model allocates nothing (its
// workspace waited for the first run; it took ~2 GiB at batch 2^22 before the bill said
// "nothing was allocated"), and loading refuses with the bill, not a failed allocation.
TEST(ApiMemory, MakingAModelTakesNoArenaBeforeTheBill) {
  nnc::Options o = digitsOptions(1000);
  o.batch = int64_t(1) << 33;
  nnc::Model m = nnc::Model::fromFile(source("examples/digits/digits.nn"), o);
  const std::string e = errorOf([&] { m.loadWeights(source("examples/digits/digits.safetensors")); });
  EXPECT_CONTAINS(e, "model 'digits' at batch 8589934592 needs up to");
  EXPECT_CONTAINS(e, "nothing was allocated");
  EXPECT_CONTAINS(e, "activation arena:");
}

// A decoder's bill counts one Decoder's KV cache and the one-position program (the
// model run whole keeps no cache: the bill had neither).
TEST(ApiMemory, ADecoderModelsBillCountsItsKvCache) {
  nnc::Options o;
  o.kernelCacheDir = "";
  o.set["seq"] = 2048;
  o.maxMemory = 1000;
  nnc::DecoderModel lm = nnc::DecoderModel::fromSource(
      "model lm(seq = 16) {\n  input tokens: i32[seq]\n  tok = embedding(50, 32)\n"
      "  repeat 2 { residual { rmsnorm; attention(4, kv_heads=2, rope=true) } residual { rmsnorm; gated_mlp(64) } }\n"
      "  rmsnorm\n  head = dense(50, bias=false)\n}\n",
      o);
  const std::string e = errorOf([&] { lm.randomWeights(1); });
  // 2 layers × 2048 positions × (key + value: 2 kv heads × 8) × 4 bytes
  EXPECT_CONTAINS(e, "KV cache:                                            524,288 bytes");
  EXPECT_CONTAINS(e, "decode step's activation arena:");
}

// Options::batch and Options::set["batch"] that disagree (5 won silently).
TEST(ApiMemory, TwoBatchesThatDisagreeAreAnError) {
  nnc::Options o = digitsOptions();
  o.set["batch"] = 3;
  EXPECT_CONTAINS(errorOf([&] { nnc::Model::fromFile(source("examples/digits/digits.nn"), o); }),
                  "Options::batch is 5 and Options::set[\"batch\"] is 3: give one of them");
  o.set["batch"] = 5; // the same value twice agrees
  EXPECT_EQ(errorOf([&] { nnc::Model::fromFile(source("examples/digits/digits.nn"), o); }), "");
}


TEST(ApiWeightMap, ParsesAppliesAndReportsMistakes) {
  nnc::WeightMap none;
  EXPECT_EQ(none.size(), 0u);
  EXPECT_EQ(none.apply("fc1.weight"), "fc1.weight");
  nnc::WeightMap m = nnc::WeightMap::fromText("model.* -> *  # strip\n*.w -> *.weight\n");
  EXPECT_EQ(m.size(), 2u);
  EXPECT_EQ(m.apply("model.fc1.w"), "fc1.weight");
  nnc::WeightMap copy = m; // cheap, shares the rules
  EXPECT_EQ(copy.apply("model.x"), "x");
  EXPECT_CONTAINS(errorOf([] { nnc::WeightMap::fromText("a b\n", "my.map"); }),
                  "my.map:1:3: expected '->' after 'a', found 'b'");
  EXPECT_CONTAINS(errorOf([] { nnc::WeightMap::fromText("a -> *\n"); }), "<weight map>:1:6: '*' has 1 '*' but 'a' has 0");
  EXPECT_CONTAINS(errorOf([] { nnc::WeightMap::fromFile("/nonexistent/x.map"); }),
                  "/nonexistent/x.map: cannot open weight map");
  nnc::WeightMap llama = nnc::WeightMap::fromFile(source("examples/llama.weightmap"));
  EXPECT_EQ(llama.apply("model.layers.7.self_attn.k_proj.weight"), "layers.7.self_attn.k.weight");
}

TEST(ApiWeightMap, ARenamedCheckpointLoadsThroughTheMap) {
  const std::map<std::string, std::string> foreign = {{"fc1.weight", "model.fc1.w"}, {"fc2.weight", "model.fc2.w"},
                                                      {"fc3.weight", "model.fc3.w"}, {"fc1.bias", "model.fc1.b"},
                                                      {"fc2.bias", "model.fc2.b"},   {"fc3.bias", "model.fc3.b"}};
  const std::string bytes = nnc::testing::renamed(source("examples/digits/digits.safetensors"), foreign);
  const nnc::WeightMap map = nnc::WeightMap::fromText("model.* -> *\n*.w -> *.weight\n*.b -> *.bias\n", "digits.map");
  nnc::Model original = nnc::Model::fromFile(source("examples/digits/digits.nn"), digitsOptions());
  original.loadWeights(source("examples/digits/digits.safetensors"));
  nnc::Model mapped = nnc::Model::fromFile(source("examples/digits/digits.nn"), digitsOptions());
  mapped.loadWeights(bytes.data(), bytes.size(), map);
  std::vector<float> x(size_t(original.inputElements()));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 17) / 16.0f;
  std::vector<float> a(size_t(original.outputElements())), b(a.size());
  original.run(x.data(), a.data());
  mapped.run(x.data(), b.data());
  EXPECT_EQ(a, b);

  const std::string path = ::testing::TempDir() + "/nnc_api_renamed.safetensors";
  std::ofstream(path, std::ios::binary) << bytes;
  nnc::Model fromFile = nnc::Model::fromFile(source("examples/digits/digits.nn"), digitsOptions());
  fromFile.loadWeights(path, map);
  std::vector<float> c(a.size());
  fromFile.run(x.data(), c.data());
  EXPECT_EQ(a, c);
  // Without the map, or with a map that misses the biases: an Error naming both names.
  EXPECT_CONTAINS(errorOf([&] { fromFile.loadWeights(path); }), "missing tensor 'fc1.weight'");
  const std::string e = errorOf([&] { fromFile.loadWeights(path, nnc::WeightMap::fromText("model.* -> *\n*.w -> *.weight\n", "half.map")); });
  EXPECT_CONTAINS(e, "weights do not match model 'digits' (names renamed by half.map)");
  EXPECT_CONTAINS(e, "'fc1.b' (the file's 'model.fc1.b')");
  std::remove(path.c_str());
}

// A tied head (tiny_gpt2's head = dense(tie=wte)) through the library: a file that holds
// the table as the head's weight only, or under both names, loads into a Model and a
// DecoderModel, from a path and from bytes, and gives the original file's outputs; copies
// that differ are an Error naming the element.
TEST(ApiWeights, ATiedHeadsWeightLoadsBesideOrInsteadOfTheTable) {
  const std::string dir = source("tests/fixtures/models/tiny_gpt2_b1_s1/"), weights = dir + "weights.safetensors";
  const std::string headOnly = nnc::testing::renamed(weights, {{"wte.weight", "head.weight"}});
  const std::string both = nnc::testing::withCopy(weights, "wte.weight", "head.weight");
  const std::string differ = nnc::testing::withCopy(weights, "wte.weight", "head.weight", 7);
  const std::string path = ::testing::TempDir() + "/nnc_api_tied.safetensors";
  std::ofstream(path, std::ios::binary) << headOnly;
  nnc::Options o;
  o.kernelCacheDir = "";
  const int32_t token = 5;
  auto outputs = [&](const std::function<void(nnc::Model &)> &load) {
    nnc::Model m = nnc::Model::fromFile(dir + "model.nn", o);
    load(m);
    std::vector<float> out(size_t(m.outputElements()));
    m.run(&token, out.data());
    return out;
  };
  const std::vector<float> original = outputs([&](nnc::Model &m) { m.loadWeights(weights); });
  EXPECT_EQ(outputs([&](nnc::Model &m) { m.loadWeights(path); }), original);
  EXPECT_EQ(outputs([&](nnc::Model &m) { m.loadWeights(both.data(), both.size()); }), original);
  EXPECT_CONTAINS(errorOf([&] { outputs([&](nnc::Model &m) { m.loadWeights(differ.data(), differ.size()); }); }),
                  "tensor 'head.weight' differs from 'wte.weight' at [0, 7]");

  auto logits = [&](const std::function<void(nnc::DecoderModel &)> &load) {
    nnc::DecoderModel lm = nnc::DecoderModel::fromSource(nnc::testing::withSeqParameter(slurp(dir + "model.nn")), o);
    load(lm);
    nnc::Decoder d = lm.newDecoder();
    const int32_t prompt[3] = {1, 2, 3};
    return d.prefill(prompt, 3);
  };
  const std::vector<float> decoded = logits([&](nnc::DecoderModel &lm) { lm.loadWeights(weights); });
  EXPECT_EQ(logits([&](nnc::DecoderModel &lm) { lm.loadWeights(path); }), decoded);
  EXPECT_EQ(logits([&](nnc::DecoderModel &lm) { lm.loadWeights(both.data(), both.size()); }), decoded);
  EXPECT_CONTAINS(errorOf([&] { logits([&](nnc::DecoderModel &lm) { lm.loadWeights(differ.data(), differ.size()); }); }),
                  "tensor 'head.weight' differs from 'wte.weight' at [0, 7]");
  std::remove(path.c_str());
}

} // namespace
