// Checkpoints written by Hugging Face transformers itself: tests/fixtures/hf_llama (made
// by tools/fixtures/make_hf_checkpoint.py: LlamaForCausalLM.save_pretrained in f32 and
// bf16), loaded through examples/llama.weightmap, and tests/fixtures/hf_gpt2
// (tools/fixtures/make_hf_gpt2_checkpoint.py: GPT2LMHeadModel, whose Conv1D weights are
// stored [in, out] and q|k|v joined), through examples/gpt2.weightmap's transposed and
// split rules: the logits match transformers' (run in float64 on the same weights)
// within the fixture's tolerance, and greedy decoding over the KV cache gives the ids
// of transformers' generate().
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "DecoderChecks.h"
#include "compiler/driver/Driver.h"
#include "runtime/io/Npy.h"
#include "runtime/io/WeightMap.h"
#include "runtime/model/Decoder.h"

namespace {
using namespace nnc;
using nnc::testing::readText;

// A fixture: its directory, weight map, and the files of one saved dtype.
struct Checkpoint {
  std::string dir, map, weights, expected, greedy;
};
Checkpoint checkpoint(const std::string &which) {
  const std::string root = std::string(NNC_SOURCE_DIR) + "/";
  if (which == "gpt2")
    return {root + "tests/fixtures/hf_gpt2", root + "examples/gpt2.weightmap", "model.safetensors", "expected.npy",
            "greedy.npy"};
  return {root + "tests/fixtures/hf_llama", root + "examples/llama.weightmap", which + "/model.safetensors",
          "expected_" + which + ".npy", "greedy_" + which + ".npy"};
}

driver::CompileOptions decoderOptions(std::map<std::string, int64_t> sets, int64_t kvContext) {
  driver::CompileOptions o;
  o.sets = std::move(sets);
  o.kvContext = kvContext;
  return o;
}

runtime::JitEngine &jit() {
  static auto engine = runtime::JitEngine::create();
  return *engine;
}

std::vector<int32_t> ids(const NpyArray &a) {
  std::vector<int32_t> v(static_cast<size_t>(a.elementCount()));
  std::memcpy(v.data(), a.data.data(), v.size() * sizeof(int32_t));
  return v;
}

struct Loaded {
  driver::AnalyzedModel analyzed;
  std::unique_ptr<runtime::CompiledModel> model;
};
Loaded load(const Checkpoint &c, int64_t seq, int64_t kvContext, const runtime::CompiledModel *shareWith = nullptr) {
  auto compiler = driver::Compiler::fromSource("model.nn", readText(c.dir + "/model.nn"));
  Loaded l{compiler.analyze(decoderOptions({{"batch", 2}, {"seq", seq}}, kvContext)), nullptr};
  l.model = driver::compileModel(l.analyzed, jit(), 2);
  const auto map = runtime::WeightMap::fromFile(c.map);
  const lower::KernelProgram &p = l.model->program();
  l.model->setWeights(runtime::WeightStore::fromSafeTensors(p.tensors, c.dir + "/" + c.weights, "hf", map, p.tiedTensors),
                      shareWith);
  return l;
}

class HfCheckpoint : public ::testing::TestWithParam<const char *> {};

TEST_P(HfCheckpoint, LogitsMatchTransformers) {
  const std::string dtype = GetParam();
  const Checkpoint c = checkpoint(dtype);
  Loaded l = load(c, 11, 0);
  const std::vector<int32_t> input = ids(readNpy(c.dir + "/input.npy", DType::I32));
  const std::vector<float> want = toFloats(readNpy(c.dir + "/" + c.expected));
  std::vector<float> got(want.size());
  ASSERT_EQ(int64_t(got.size()), l.model->outputType().elements());
  l.model->run(reinterpret_cast<const float *>(input.data()), got.data());
  double worst = 0, worstRelative = 0, scale = 0;
  for (float w : want) scale = std::max(scale, double(std::fabs(w)));
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - want[i]);
    ASSERT_LE(err, 1e-5 + 1e-4 * std::fabs(want[i])) << dtype << " logit " << i << ": " << got[i] << " vs " << want[i];
    worst = std::max(worst, err / (1e-5 + 1e-4 * std::fabs(want[i])));
    worstRelative = std::max(worstRelative, err / scale);
  }
  std::printf("hf %-4s worst error / tolerance %.3f, worst error / largest logit %.3g\n", dtype.c_str(), worst,
              worstRelative);
}

TEST_P(HfCheckpoint, GreedyDecodingGivesGeneratesIds) {
  const std::string dtype = GetParam();
  const Checkpoint c = checkpoint(dtype);
  const std::vector<int32_t> prompt = ids(readNpy(c.dir + "/prompt.npy", DType::I32));
  const std::vector<int32_t> want = ids(readNpy(c.dir + "/" + c.greedy, DType::I32));
  const int64_t promptLength = int64_t(prompt.size()) / 2, fresh = int64_t(want.size()) / 2;
  Loaded pre = load(c, promptLength, promptLength + fresh);
  Loaded step = load(c, 1, promptLength + fresh, pre.model.get());
  runtime::Decoder decoder(*pre.model, *step.model);
  std::vector<int32_t> got(want.size()), next(2);
  auto pick = [&](const std::vector<float> &logits, int64_t i) {
    for (int64_t b = 0; b < 2; ++b) {
      const float *row = &logits[size_t(b * decoder.vocab())];
      got[size_t(b * fresh + i)] = next[size_t(b)] = int32_t(std::max_element(row, row + decoder.vocab()) - row);
    }
  };
  pick(decoder.prefill(prompt.data()), 0);
  for (int64_t i = 1; i < fresh; ++i) pick(decoder.decode(next.data()), i);
  EXPECT_EQ(got, want) << dtype;
}

// hf_llama in f32 and bf16, hf_gpt2 in f32.
INSTANTIATE_TEST_SUITE_P(SavedBy, HfCheckpoint, ::testing::Values("f32", "bf16", "gpt2"));

} // namespace
