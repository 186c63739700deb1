// The tiny GPT-2, LLaMA and BERT fixtures (tests/fixtures/models, made by
// tools/fixtures/make_model_fixtures.py) run with every weight stored in f16, bf16, i8
// and i4 (--dtype: attention's q/k/v/o, mlp, embedding tables, pos_embedding, norms;
// docs/lowering.md, "Storage dtypes"), against PyTorch's f32 output.
// Error: max |y − y_torch| / max |y_torch| over the whole output (relative to the
// output's magnitude, as --compare-dtypes: docs/cli.md). Measured on these fixtures
// (batch 3, seq 17): f16 ≤ 0.06 %, bf16 ≤ 0.33 %, i8 ≤ 0.88 %, i4 (groups of 32)
// ≤ 14.5 %. The bounds below allow about 3× that, and the error must not be zero
// either (the weights really are stored rounded).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "compiler/codegen/DotGemmEmitter.h"
#include "compiler/driver/Driver.h"
#include "runtime/io/Npy.h"
#include "runtime/model/CompiledModel.h"

namespace {
using namespace nnc;

std::string dir() { return std::string(NNC_SOURCE_DIR) + "/tests/fixtures/models"; }

std::string readText(const std::string &path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

double boundFor(DType t) {
  switch (t) {
  case DType::F16: return 2e-3;
  case DType::BF16: return 1e-2;
  case DType::I8: return 2.5e-2;
  default: return 0.4; // i4
  }
}

const char *const kFixtures[] = {"tiny_gpt2_b3_s17", "tiny_llama_b3_s17", "tiny_bert_b3_s17", "tiny_gpt2_b1_s1"};

// A fixture's token ids (as the f32 words the model's input takes), PyTorch's output and
// its batch.
struct Fixture {
  std::string dir, name;
  std::vector<float> input, expected;
  int64_t batch = 1;
};
Fixture loadFixture(const char *name) {
  Fixture f{dir() + "/" + name, name, {}, {}, std::string(name).find("_b3_") != std::string::npos ? 3 : 1};
  NpyArray ids = readNpy(f.dir + "/input.npy", DType::I32);
  f.input.resize(size_t(ids.elementCount())); // the bits of int32 token ids
  std::memcpy(f.input.data(), ids.data.data(), f.input.size() * sizeof(float));
  f.expected = toFloats(readNpy(f.dir + "/expected.npy"));
  return f;
}

driver::AnalyzedModel analyzeFixture(const Fixture &f, driver::CompileOptions options) {
  options.sets["batch"] = f.batch;
  return driver::Compiler::fromSource(f.name + ".nn", readText(f.dir + "/model.nn")).analyze(options);
}

// Runs the analysed fixture with its weights: max |y − y_torch| / max |y_torch|.
double maxRelErrorAgainstTorch(runtime::JitEngine &jit, const Fixture &f, const driver::AnalyzedModel &analyzed) {
  auto model = driver::compileModel(analyzed, jit, 2);
  model->setWeights(runtime::WeightStore::fromSafeTensors(model->program().tensors, f.dir + "/weights.safetensors", f.name));
  std::vector<float> got(f.expected.size());
  EXPECT_EQ(model->outputType().elements(), int64_t(got.size()));
  if (model->outputType().elements() != int64_t(got.size())) return 1.0;
  model->run(f.input.data(), got.data());
  double maxDiff = 0, maxRef = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    maxDiff = std::max(maxDiff, std::fabs(double(got[i]) - double(f.expected[i])));
    maxRef = std::max(maxRef, std::fabs(double(f.expected[i])));
  }
  return maxDiff / maxRef;
}

TEST(TransformerDTypes, RunInEveryStorageDtypeWithinTheirError) {
  auto jit = runtime::JitEngine::create();
  for (const char *name : kFixtures) {
    const Fixture f = loadFixture(name);
    for (DType t : {DType::F16, DType::BF16, DType::I8, DType::I4}) {
      const std::string dt(dtypeName(t));
      SCOPED_TRACE(std::string(name) + " " + dt);
      driver::CompileOptions options;
      options.dtype = t;
      driver::AnalyzedModel analyzed = analyzeFixture(f, options);
      for (const auto &c : analyzed.program.constants) { // every weight below f32 but GEMM biases
        const bool gemmBias = c.name.find("bias") != std::string::npos && c.name.find("ln") == std::string::npos &&
                              c.name.find("norm") == std::string::npos;
        if (c.source != lower::WeightRecipe::Source::RopeTable && !gemmBias) {
          EXPECT_EQ(c.storage, t) << c.name;
        }
      }
      const double err = maxRelErrorAgainstTorch(*jit, f, analyzed);
      std::printf("%-20s %-5s max rel error %.4f %%\n", name, dt.c_str(), 100 * err);
      EXPECT_LE(err, boundFor(t));
      EXPECT_GT(err, 1e-6);
    }
  }
}

// --activations bf16 / i8 (docs/lowering.md, "Low-precision activations"): every GEMM
// of the fixtures (q/k/v, o, MLP, head) multiplies activations rounded to bf16 or
// quantised per row to i8, where the host's kernel row has vdpbf16ps / vpdpbusd.
// Measured max rel errors against PyTorch f32 (weights and activations both rounded):
// bf16 ≤ 0.37 %, i8 ≤ 1.28 % (tiny_llama). The bounds allow about 3× (4× for bf16).
TEST(TransformerDTypes, LowPrecisionActivationsWithinTheirError) {
  auto jit = runtime::JitEngine::create();
  const auto features = jit->features();
  int modes = 0;
  for (DType t : {DType::BF16, DType::I8}) {
    if (!codegen::missingDotInstructions(t, features, jit->microKernel()).empty()) continue;
    ++modes;
    for (const char *name : kFixtures) {
      const std::string dt(dtypeName(t));
      SCOPED_TRACE(std::string(name) + " " + dt);
      const Fixture f = loadFixture(name);
      driver::CompileOptions options;
      options.dtype = t;
      options.quant.activations = t;
      driver::AnalyzedModel analyzed = analyzeFixture(f, options);
      int gemms = 0;
      for (const auto &s : analyzed.program.steps)
        if (const auto *g = s.kernel ? std::get_if<codegen::GemmSpec>(&*s.kernel) : nullptr) {
          ++gemms;
          EXPECT_EQ(g->activationType, t) << s.layer;
        }
      EXPECT_GE(gemms, 2);
      const double err = maxRelErrorAgainstTorch(*jit, f, analyzed);
      std::printf("%-20s %-5s activations: max rel error %.4f %%\n", name, dt.c_str(), 100 * err);
      EXPECT_LE(err, t == DType::BF16 ? 1.5e-2 : 4e-2);
      EXPECT_GT(err, 1e-6);
    }
  }
  if (modes == 0) GTEST_SKIP() << "the host's kernel row has neither vdpbf16ps nor vpdpbusd";
}

} // namespace
