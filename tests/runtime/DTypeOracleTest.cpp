// Models with GEMM weights stored in f16, bf16, i8, i4 (whole model, per layer mixed,
// per-tensor i8, another i4 group) against PyTorch run on the same stored values:
// every fixture under tests/fixtures/dtypes (tools/fixtures/make_dtype_fixtures.py),
// on 1 and 2 threads.
// Tolerances, per element, |got − expected| ≤ tol · max(|expected|, 1):
//   f16, bf16: 1e-5 — the stored values are exactly PyTorch's, so only the f32
//              arithmetic differs (as for f32 weights in ModelOracleTest);
//   i8, i4:    2e-5 — the same stored values q · s, but the i8 kernel applies s to the
//              sum (s · Σ a·q), and i4 rounds q · s to f32 before its FMA: one or two
//              more f32 roundings per output.
// And the run must be far closer to expected.npy than storage moved the output from
// the f32 model (the manifest's moved_from_f32): mean relative error below a tenth of it.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

#include "compiler/driver/Driver.h"
#include "runtime/io/Npy.h"
#include "runtime/model/CompiledModel.h"

namespace {
using namespace nnc;

std::string dir() { return std::string(NNC_SOURCE_DIR) + "/tests/fixtures/dtypes"; }

std::string readText(const std::string &path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

double toleranceFor(const std::vector<std::string> &dtypes) {
  double tol = 1e-5;
  for (const auto &d : dtypes)
    if (d == "i8" || d == "i4") tol = 2e-5;
  return tol;
}

TEST(DTypeOracle, MatchesPyTorchOnTheStoredValues) {
  auto manifest = nlohmann::json::parse(readText(dir() + "/manifest.json"));
  auto jit = runtime::JitEngine::create();
  ASSERT_GE(manifest["models"].size(), 10u);
  for (const auto &m : manifest["models"]) {
    const std::string name = m["name"], family = m["family"];
    SCOPED_TRACE(name);
    driver::CompileOptions options;
    options.sets["batch"] = m["batch"].get<int64_t>();
    options.quant.group = m["quant_group"];
    options.quant.perTensor = m["quant_per_tensor"];
    auto compiler = driver::Compiler::fromSource(name + ".nn", readText(dir() + "/" + name + "/model.nn"));
    driver::AnalyzedModel analyzed = compiler.analyze(options);
    const auto input = toFloats(readNpy(dir() + "/" + family + "/input.npy"));
    const auto expected = toFloats(readNpy(dir() + "/" + name + "/expected.npy"));
    const double tol = toleranceFor(m["dtypes"].get<std::vector<std::string>>());
    for (int threads : {1, 2}) {
      auto model = driver::compileModel(analyzed, *jit, threads);
      model->setWeights(runtime::WeightStore::fromSafeTensors(model->program().tensors,
                                                              dir() + "/" + family + "/weights.safetensors", name));
      std::vector<float> got(expected.size());
      ASSERT_EQ(model->outputType().elements(), int64_t(got.size()));
      model->run(input.data(), got.data());
      double worst = 0, sumDiff = 0, sumRef = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        const double diff = std::fabs(double(got[i]) - double(expected[i]));
        worst = std::max(worst, diff / std::max(1.0, double(std::fabs(expected[i]))));
        sumDiff += diff, sumRef += std::fabs(double(expected[i]));
      }
      EXPECT_LE(worst, tol) << "threads " << threads;
      EXPECT_LT(sumDiff / sumRef, 0.1 * m["moved_from_f32"].get<double>()) << "threads " << threads;
    }
  }
}

// An f16 weight beyond ±65504 is an error naming the tensor and the element.
TEST(DTypeOracle, F16OverflowNamesTheTensor) {
  auto compiler = driver::Compiler::fromSource(
      "big.nn", "model big {\n  input x: [3]\n  fc = dense(2, dtype=f16)\n}\n");
  driver::AnalyzedModel analyzed = compiler.analyze(driver::CompileOptions{});
  auto jit = runtime::JitEngine::create();
  auto model = driver::compileModel(analyzed, *jit, 1);
  const std::string path = ::testing::TempDir() + "/nnc_big_f16.safetensors";
  const std::vector<float> w = {1, 2, 3, 4, -70000, 6}, b = {0, 0};
  {
    std::string header = R"({"fc.bias":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("fc.weight":{"dtype":"F32","shape":[2,3],"data_offsets":[8,32]}})";
    while (header.size() % 8) header += ' ';
    std::ofstream out(path, std::ios::binary);
    uint64_t n = header.size();
    out.write(reinterpret_cast<const char *>(&n), 8);
    out << header;
    out.write(reinterpret_cast<const char *>(b.data()), 8);
    out.write(reinterpret_cast<const char *>(w.data()), 24);
  }
  try {
    model->setWeights(runtime::WeightStore::fromSafeTensors(model->program().tensors, path, "big"));
    FAIL() << "f16 accepted -70000";
  } catch (const UserError &e) {
    EXPECT_NE(std::string(e.what()).find("fc.weight: weight [1, 1] = -70000 is beyond f16's range"), std::string::npos)
        << e.what();
  }
}

} // namespace
