// Whole models against PyTorch: every fixture under tests/fixtures/models (written by
// tools/fixtures/make_model_fixtures.py from Debian's python3-torch) is compiled, run
// with the fixture's weights and input (f32 data, or int32 token ids), and compared
// with PyTorch's output.
// Tolerance (f32 weights): |got − expected| ≤ 1e-5 · max(|expected|, 1) per element —
// a relative error of 1e-5 for values of magnitude ≥ 1, absolute 1e-5 below.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>

#include "CompileHelpers.h"
#include "runtime/io/Npy.h"
#include "runtime/model/CompiledModel.h"

namespace {
using namespace nnc;

std::string fixtureDir() { return std::string(NNC_SOURCE_DIR) + "/tests/fixtures"; }

std::string readText(const std::string &path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

runtime::JitEngine &jit() {
  static auto engine = runtime::JitEngine::create();
  return *engine;
}

// Compiles the program at `batch`, runs it on `input` with the weights file.
std::vector<float> runProgram(const std::string &source, int64_t batch, const std::string &weightsPath,
                              const std::vector<float> &input, int threads) {
  auto c = test::compile(source, {{"batch", batch}}, /*lower=*/true);
  EXPECT_TRUE(c.ok) << c.diagnostics;
  if (!c.ok) return {};
  runtime::CompiledModel model(c.program(), jit(), threads);
  model.setWeights(runtime::WeightStore::fromSafeTensors(model.program().tensors, weightsPath, "test"));
  EXPECT_EQ(int64_t(input.size()), model.inputType().elements());
  std::vector<float> out(size_t(model.outputType().elements()));
  model.run(input.data(), out.data());
  return out;
}

struct Fixture {
  std::string name;
  int64_t batch;
  bool tokens = false; // input.npy holds int32 token ids
};

std::vector<Fixture> fixtures() {
  auto manifest = nlohmann::json::parse(readText(fixtureDir() + "/models/manifest.json"));
  std::vector<Fixture> out;
  for (const auto &m : manifest["models"])
    out.push_back({m["name"], m["batch"], m.value("input_dtype", std::string("float32")) == "int32"});
  return out;
}

class ModelOracle : public ::testing::TestWithParam<std::tuple<Fixture, int>> {};

TEST_P(ModelOracle, MatchesPyTorch) {
  const auto &[fx, threads] = GetParam();
  std::string dir = fixtureDir() + "/models/" + fx.name;
  std::vector<float> input; // 4-byte elements: f32 values, or the bits of int32 token ids
  if (fx.tokens) {
    NpyArray ids = readNpy(dir + "/input.npy", DType::I32);
    input.resize(size_t(ids.elementCount()));
    std::memcpy(input.data(), ids.data.data(), input.size() * sizeof(float));
  } else {
    input = toFloats(readNpy(dir + "/input.npy"));
  }
  auto expected = toFloats(readNpy(dir + "/expected.npy"));
  auto got = runProgram(readText(dir + "/model.nn"), fx.batch, dir + "/weights.safetensors", input, threads);
  ASSERT_EQ(got.size(), expected.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double scale = std::max(1.0, double(std::fabs(expected[i])));
    double err = std::fabs(double(got[i]) - double(expected[i])) / scale;
    worst = std::max(worst, err);
    ASSERT_LE(err, 1e-5) << fx.name << " element " << i << ": got " << got[i] << ", PyTorch " << expected[i];
  }
  RecordProperty("worst_relative_error", std::to_string(worst));
  std::printf("%-24s threads %d  worst relative error %.3g\n", fx.name.c_str(), threads, worst);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ModelOracle, ::testing::Combine(::testing::ValuesIn(fixtures()), ::testing::Values(1, 2)),
                         [](const auto &info) {
                           return std::get<0>(info.param).name + "_t" + std::to_string(std::get<1>(info.param));
                         });

TEST(Page000, WorkedExampleWithAndWithoutRelu) {
  std::string dir = fixtureDir() + "/page000";
  std::vector<float> x{0, 2};
  auto withRelu = runProgram(readText(dir + "/with_relu.nn"), 1, dir + "/weights.safetensors", x, 1);
  auto without = runProgram(readText(dir + "/without_relu.nn"), 1, dir + "/weights.safetensors", x, 1);
  ASSERT_EQ(withRelu.size(), 1u);
  ASSERT_EQ(without.size(), 1u);
  EXPECT_FLOAT_EQ(withRelu[0], 2.0f);
  EXPECT_FLOAT_EQ(without[0], -2.0f);
}

TEST(Page000, FoldedLayerIsW4Minus1BiasZero) {
  std::string dir = fixtureDir() + "/page000";
  auto c = test::compile(readText(dir + "/without_relu.nn"), {}, true);
  ASSERT_TRUE(c.ok) << c.diagnostics;
  ASSERT_EQ(c.graph->ops.size(), 2u);
  runtime::CompiledModel model(c.program(), jit(), 1);
  model.setWeights(runtime::WeightStore::fromSafeTensors(model.program().tensors, dir + "/weights.safetensors", "test"));
  // Probe the folded layer with unit vectors: y(e_i) − y(0) = W_i, y(0) = b.
  float y0, y1, y2;
  std::vector<float> zero{0, 0}, e1{1, 0}, e2{0, 1};
  model.run(zero.data(), &y0);
  model.run(e1.data(), &y1);
  model.run(e2.data(), &y2);
  EXPECT_FLOAT_EQ(y0, 0.0f);
  EXPECT_FLOAT_EQ(y1 - y0, 4.0f);
  EXPECT_FLOAT_EQ(y2 - y0, -1.0f);
}

TEST(Digits, SameAccuracyAsPyTorchOnHeldOutSet) {
  std::string dir = std::string(NNC_SOURCE_DIR) + "/examples/digits";
  auto images = readNpy(dir + "/test_images.npy");
  auto labels = readNpy(dir + "/test_labels.npy", DType::I32);
  auto torchPred = readNpy(dir + "/pytorch_predictions.npy", DType::I32);
  int64_t n = images.shape[0];
  auto logits = runProgram(readText(dir + "/digits.nn"), n, dir + "/digits.safetensors", toFloats(images), 2);
  ASSERT_EQ(int64_t(logits.size()), n * 10);
  const int32_t *lab = reinterpret_cast<const int32_t *>(labels.data.data());
  const int32_t *tp = reinterpret_cast<const int32_t *>(torchPred.data.data());
  int64_t correct = 0, torchCorrect = 0, agree = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float *row = logits.data() + i * 10;
    int pred = int(std::max_element(row, row + 10) - row);
    correct += pred == lab[i];
    torchCorrect += tp[i] == lab[i];
    agree += pred == tp[i];
  }
  std::printf("digits: nnc %lld/%lld correct, PyTorch %lld/%lld, agreement %lld/%lld\n", (long long)correct,
              (long long)n, (long long)torchCorrect, (long long)n, (long long)agree, (long long)n);
  EXPECT_EQ(correct, torchCorrect);
  EXPECT_EQ(agree, n);
}

} // namespace
