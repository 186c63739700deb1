// Greedy decoding's Argmax step (docs/lowering.md, "Greedy decoding"): a decoder
// program lowered with argmax ends with one ArgmaxSpec step over its logits, and only
// then; its ids equal the host's argmax of the same logits after the prompt and at
// every decode step (random weights, both fixtures, batch 3, 1 and 2 threads); the
// logits are those of the program without it; and mixing the two kinds is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "DecoderChecks.h"
#include "compiler/driver/Driver.h"
#include "runtime/model/Decoder.h"

namespace {
using namespace nnc;
using nnc::testing::readText;
using nnc::testing::withSeqParameter;

constexpr int64_t kContext = 12, kPrompt = 5, kBatch = 3;

runtime::JitEngine &jit() {
  static auto engine = runtime::JitEngine::create();
  return *engine;
}

std::string fixtureSource(const char *fixture) {
  return withSeqParameter(
      readText(std::string(NNC_SOURCE_DIR) + "/tests/fixtures/models/" + fixture + "_b1_s17/model.nn"));
}

driver::AnalyzedModel lowered(const std::string &source, int64_t seq, bool argmax, int64_t kvContext = kContext) {
  driver::CompileOptions o;
  o.sets = {{"batch", kBatch}, {"seq", seq}};
  o.kvContext = kvContext;
  o.argmax = argmax;
  return driver::Compiler::fromSource("decoder.nn", source).analyze(o);
}

int argmaxSteps(const lower::KernelProgram &p) {
  return int(std::count_if(p.steps.begin(), p.steps.end(),
                           [](const lower::Step &s) { return std::holds_alternative<codegen::ArgmaxSpec>(*s.kernel); }));
}

TEST(GreedyDecoder, TheArgmaxStepIsThereOnlyWhenGreedy) {
  for (const char *fixture : {"tiny_llama", "tiny_gpt2"}) {
    const std::string source = fixtureSource(fixture);
    for (int64_t seq : {kPrompt, int64_t(1)}) {
      const auto greedy = lowered(source, seq, true), plain = lowered(source, seq, false);
      EXPECT_EQ(argmaxSteps(plain.program), 0) << fixture;
      EXPECT_EQ(plain.program.argmax, -1) << fixture;
      ASSERT_EQ(argmaxSteps(greedy.program), 1) << fixture;
      const lower::KernelProgram &p = greedy.program;
      const auto &spec = std::get<codegen::ArgmaxSpec>(*p.steps.back().kernel); // the last step
      EXPECT_EQ(spec.cols, p.outputType.shape[2]) << fixture;
      EXPECT_EQ(spec.rows, kBatch) << fixture << ": the head's rows (the last position only)";
      EXPECT_EQ(p.steps.back().operands[0].id, p.output) << fixture << ": it reads the logits";
      EXPECT_EQ(p.steps.back().operands[1].id, p.argmax) << fixture;
      EXPECT_EQ(p.buffers[size_t(p.argmax)].elements, kBatch) << fixture;
      EXPECT_EQ(p.steps.size(), plain.program.steps.size() + 1) << fixture;
      EXPECT_EQ(p.outputType.shape, plain.program.outputType.shape) << fixture << ": the logits stay the output";
    }
    EXPECT_THROW(lowered(source, kPrompt, true, 0), std::invalid_argument) << fixture << ": not a decoder's program";
  }
}

class GreedyIdsEqualTheHostArgmax : public ::testing::TestWithParam<std::tuple<const char *, int>> {};

TEST_P(GreedyIdsEqualTheHostArgmax, AfterThePromptAndEveryStep) {
  const auto &[fixture, threads] = GetParam();
  const std::string source = fixtureSource(fixture);
  auto compile = [&](int64_t seq, bool argmax) { return driver::compileModel(lowered(source, seq, argmax), jit(), threads); };
  auto greedyPrefill = compile(kPrompt, true), greedyStep = compile(1, true);
  auto plainPrefill = compile(kPrompt, false), plainStep = compile(1, false);
  const auto w = runtime::WeightStore::random(greedyPrefill->program().tensors, 5);
  greedyPrefill->setWeights(w);
  greedyStep->setWeights(w, greedyPrefill.get());
  plainPrefill->setWeights(w, greedyPrefill.get());
  plainStep->setWeights(w, greedyPrefill.get());
  runtime::Decoder greedy(*greedyPrefill, *greedyStep), plain(*plainPrefill, *plainStep);
  ASSERT_TRUE(greedy.greedy());
  ASSERT_FALSE(plain.greedy());
  EXPECT_THROW(plain.nextIds(), std::logic_error);
  const int64_t vocab = greedy.vocab();

  std::mt19937 rng(9);
  std::vector<int32_t> prompt(size_t(kBatch * kPrompt));
  for (auto &id : prompt) id = int32_t(rng() % uint32_t(vocab));
  auto check = [&](const std::vector<float> &logits, const std::vector<float> &plainLogits, const std::string &when) {
    ASSERT_EQ(logits, plainLogits) << when << ": the Argmax step leaves the logits as they were";
    for (int64_t b = 0; b < kBatch; ++b) {
      const float *row = &logits[size_t(b * vocab)];
      EXPECT_EQ(greedy.nextIds()[size_t(b)], int32_t(std::max_element(row, row + vocab) - row))
          << fixture << " " << when << " batch row " << b;
    }
  };
  check(greedy.prefill(prompt.data()), plain.prefill(prompt.data()), "after the prompt");
  for (int64_t i = kPrompt; i < kContext; ++i) {
    std::vector<int32_t> next = greedy.nextIds();
    next[0] = int32_t(rng() % uint32_t(vocab)); // a row not fed its own id: other logits too
    check(greedy.decode(next.data()), plain.decode(next.data()), "step " + std::to_string(i));
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GreedyIdsEqualTheHostArgmax,
                         ::testing::Combine(::testing::Values("tiny_llama", "tiny_gpt2"), ::testing::Values(1, 2)));

TEST(GreedyDecoder, BothProgramsOrNeither) {
  const std::string source = fixtureSource("tiny_llama");
  auto prefill = driver::compileModel(lowered(source, kPrompt, true), jit(), 1);
  auto step = driver::compileModel(lowered(source, 1, false), jit(), 1);
  EXPECT_THROW(runtime::Decoder(*prefill, *step), std::invalid_argument);
}

} // namespace
