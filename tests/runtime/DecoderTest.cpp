// Incremental decoding over the KV cache against full forward passes: after a prompt
// and after every decode step, the decoder's logits equal the last row of the whole
// model run (without a cache) over the same prefix, for the LLaMA-style (GQA, RoPE)
// and GPT-2-style (learned positions, biases, tied head) fixtures' weights, at batch
// 1 and 3, 1 and 2 threads, and with the weights stored in each dtype (the GPT-2
// fixture's pos_embedding table too); positions past the context are refused before
// any work.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <optional>
#include <random>
#include <regex>
#include <set>

#include "DecoderChecks.h"
#include "compiler/driver/Driver.h"
#include "runtime/model/Decoder.h"

namespace {
using namespace nnc;
using nnc::testing::lastPositions;
using nnc::testing::readText;
using nnc::testing::withSeqParameter;

driver::CompileOptions decoderOptions(std::map<std::string, int64_t> sets, int64_t kvContext,
                                      DType kvType = DType::F32, std::optional<DType> dtype = {},
                                      bool weightsInPlace = false) {
  driver::CompileOptions o;
  o.sets = std::move(sets);
  o.kvContext = kvContext;
  o.kvType = kvType;
  o.dtype = dtype;
  o.quant.weightsInPlace = weightsInPlace;
  return o;
}

runtime::JitEngine &jit() {
  static auto engine = runtime::JitEngine::create();
  return *engine;
}

struct Built {
  driver::AnalyzedModel analyzed;
  std::unique_ptr<runtime::CompiledModel> model;
};
Built build(const std::string &source, int64_t batch, int64_t seq, int64_t kvContext, int threads,
            const runtime::WeightStore *weights, const runtime::CompiledModel *shareWith = nullptr,
            DType kvType = DType::F32, std::optional<DType> dtype = {}, bool weightsInPlace = false) {
  auto compiler = driver::Compiler::fromSource("decoder.nn", source);
  Built b{compiler.analyze(decoderOptions({{"batch", batch}, {"seq", seq}}, kvContext, kvType, dtype, weightsInPlace)),
          nullptr};
  b.model = driver::compileModel(b.analyzed, jit(), threads);
  b.model->setWeights(*weights, shareWith);
  return b;
}

// The logits of the last position of `ids` (batch × len), from a full forward pass.
std::vector<float> lastRowLogits(const std::string &source, const runtime::WeightStore &w, int64_t batch,
                                 const std::vector<int32_t> &ids, int64_t len, std::optional<DType> dtype = {}) {
  Built full = build(source, batch, len, 0, 1, &w, nullptr, DType::F32, dtype);
  std::vector<float> out(size_t(full.model->outputType().elements()));
  full.model->run(reinterpret_cast<const float *>(ids.data()), out.data());
  const int64_t vocab = full.model->outputType().shape[2];
  return lastPositions(out, batch, len, vocab);
}

// The prompt, then a step at a time to the context, each against the full pass in the
// same storage dtype; then a full context, a reset and the prompt again.
// weightsInPlace: the decoder's GEMMs read the fixture file's rows where they lie (the
// full passes keep packed weights).
void expectDecoderMatchesFullPasses(const char *fixture, int64_t batch, int threads, std::optional<DType> dtype = {},
                                    bool weightsInPlace = false) {
  const std::string dir = std::string(NNC_SOURCE_DIR) + "/tests/fixtures/models/" + fixture + "_b1_s17";
  const std::string source = withSeqParameter(readText(dir + "/model.nn"));
  const int64_t context = 12, prompt = 5, steps = context - prompt;
  auto compiler = driver::Compiler::fromSource("decoder.nn", source);
  auto probe = compiler.analyze(decoderOptions({{"batch", batch}, {"seq", context}}, 0));
  const auto w = runtime::WeightStore::fromSafeTensors(probe.program.tensors, dir + "/weights.safetensors", fixture);

  Built pre = build(source, batch, prompt, context, threads, &w, nullptr, DType::F32, dtype, weightsInPlace);
  Built step = build(source, batch, 1, context, threads, &w, pre.model.get(), DType::F32, dtype, weightsInPlace);
  if (weightsInPlace) { // tables of row pointers (8 bytes a row), not copies of the rows
    Built packed = build(source, batch, prompt, context, threads, &w);
    const int64_t rows = pre.model->packedConstantBytes(); // what the GEMMs read: the rows
    EXPECT_LT(pre.model->constantBytes(), packed.model->constantBytes() - rows / 2);
    EXPECT_EQ(step.model->packedConstantBytes(), rows);
  }
  for (const runtime::CompiledModel *m : {pre.model.get(), step.model.get()}) { // where the GEMMs read
    size_t spanBytes = 0;
    for (const runtime::MemorySpan &s : m->packedConstantSpans()) {
      EXPECT_NE(s.data, nullptr);
      spanBytes += s.bytes;
    }
    EXPECT_EQ(int64_t(spanBytes), m->packedConstantBytes());
  }
  runtime::Decoder decoder(*pre.model, *step.model);
  const int64_t vocab = decoder.vocab();

  std::mt19937 rng(3);
  std::vector<std::vector<int32_t>> rows(static_cast<size_t>(batch)); // each batch row's ids so far
  for (auto &r : rows)
    for (int64_t i = 0; i < prompt; ++i) r.push_back(int32_t(rng() % uint32_t(vocab)));
  auto flat = [&](int64_t len) {
    std::vector<int32_t> ids;
    for (const auto &r : rows) ids.insert(ids.end(), r.begin(), r.begin() + len);
    return ids;
  };
  std::vector<float> logits = decoder.prefill(flat(prompt).data());
  nnc::testing::expectLogitsClose(logits, lastRowLogits(source, w, batch, flat(prompt), prompt, dtype), "after the prompt");
  for (int64_t s = 0; s < steps; ++s) {
    std::vector<int32_t> next;
    for (auto &r : rows) { // half the rows take the argmax, the others a random id
      const float *row = &logits[size_t((&r - &rows[0]) * vocab)];
      r.push_back((&r - &rows[0]) % 2 ? int32_t(rng() % uint32_t(vocab))
                                      : int32_t(std::max_element(row, row + vocab) - row));
      next.push_back(r.back());
    }
    logits = decoder.decode(next.data());
    const int64_t len = prompt + s + 1;
    nnc::testing::expectLogitsClose(logits, lastRowLogits(source, w, batch, flat(len), len, dtype), "after step " + std::to_string(s + 1));
  }
  EXPECT_EQ(decoder.past(), context);
  const std::vector<int32_t> one(size_t(batch), 0);
  EXPECT_THROW(decoder.decode(one.data()), UserError); // the context is full
  decoder.reset();
  EXPECT_EQ(decoder.past(), 0);
  nnc::testing::expectLogitsClose(decoder.prefill(flat(prompt).data()), lastRowLogits(source, w, batch, flat(prompt), prompt, dtype),
              "after reset");
}

class DecoderMatchesFullPasses : public ::testing::TestWithParam<std::tuple<const char *, int64_t, int>> {};

TEST_P(DecoderMatchesFullPasses, AfterThePromptAndEveryStep) {
  const auto &[fixture, batch, threads] = GetParam();
  ASSERT_NO_FATAL_FAILURE(expectDecoderMatchesFullPasses(fixture, batch, threads));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DecoderMatchesFullPasses,
                         ::testing::Combine(::testing::Values("tiny_llama", "tiny_gpt2"), ::testing::Values(1, 3),
                                            ::testing::Values(1, 2)));

// --weights-in-place: decode steps (dot products along the file's rows) and prompts
// (rows transposed into the panel layout on the fly) against packed full passes.
class DecoderWeightsInPlace : public ::testing::TestWithParam<std::tuple<const char *, int64_t, int>> {};

TEST_P(DecoderWeightsInPlace, MatchesPackedFullPasses) {
  const auto &[fixture, batch, threads] = GetParam();
  ASSERT_NO_FATAL_FAILURE(expectDecoderMatchesFullPasses(fixture, batch, threads, {}, true));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DecoderWeightsInPlace,
                         ::testing::Combine(::testing::Values("tiny_llama", "tiny_gpt2"), ::testing::Values(1, 3),
                                            ::testing::Values(1, 2)));

// The step program given after the prefill (what --generate does, so that the first
// token never waits for it): the same logits as a decoder made with both, to the bit;
// decoding before it, a second one, and a program that is not one position are refused.
TEST(Decoder, StepProgramAfterThePrefill) {
  const std::string dir = std::string(NNC_SOURCE_DIR) + "/tests/fixtures/models/tiny_llama_b1_s17";
  const std::string source = withSeqParameter(readText(dir + "/model.nn"));
  const int64_t batch = 2, context = 9, prompt = 4;
  auto compiler = driver::Compiler::fromSource("decoder.nn", source);
  auto probe = compiler.analyze(decoderOptions({{"batch", batch}, {"seq", context}}, 0));
  const auto w = runtime::WeightStore::fromSafeTensors(probe.program.tensors, dir + "/weights.safetensors", "tiny_llama");
  Built pre = build(source, batch, prompt, context, 1, &w);
  Built step = build(source, batch, 1, context, 1, &w, pre.model.get());
  runtime::Decoder both(*pre.model, *step.model), later(*pre.model);
  EXPECT_TRUE(both.hasStep());
  EXPECT_FALSE(later.hasStep());
  std::vector<int32_t> ids(size_t(batch * prompt));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(7 * i + 3) % int32_t(both.vocab());
  const std::vector<float> first = both.prefill(ids.data());
  EXPECT_EQ(later.prefill(ids.data()), first);
  std::vector<int32_t> next(size_t(batch), 1);
  EXPECT_THROW(later.decode(next.data()), std::logic_error);
  EXPECT_EQ(later.past(), prompt); // the refused step left the cache as it was
  EXPECT_THROW(later.setStep(*pre.model), std::invalid_argument); // the prompt's length, not one position
  later.setStep(*step.model);
  EXPECT_THROW(later.setStep(*step.model), std::logic_error);
  for (int64_t i = prompt; i < context; ++i) {
    next[0] = int32_t(i), next[1] = int32_t(2 * i);
    const std::vector<float> want = both.decode(next.data());
    EXPECT_EQ(later.decode(next.data()), want) << "position " << i;
  }
}

// Below f32 a pos_embedding table is stored with its scales after the rows (i4: two
// rows a byte), so a later position is a row index of the kernel, not a pointer offset
// (which read row 2p of an f16 table, and beyond the table for i8 and i4).
class DecoderInStorageDTypes : public ::testing::TestWithParam<DType> {};

TEST_P(DecoderInStorageDTypes, MatchesFullPassesInTheSameDtype) {
  ASSERT_NO_FATAL_FAILURE(expectDecoderMatchesFullPasses("tiny_gpt2", 2, 1, GetParam()));
}

INSTANTIATE_TEST_SUITE_P(StorageDTypes, DecoderInStorageDTypes,
                         ::testing::Values(DType::F16, DType::BF16, DType::I8, DType::I4),
                         [](const auto &info) { return std::string(dtypeName(info.param)); });

// A cache stored below f32 (--kv-dtype): every step's logits against the f32 full pass
// over the same prefix, greedy ids fed back. The bounds are the largest error measured
// on these fixtures (max |got − want| / max(1, |want|) over every logit of every step,
// batch 2, this x86-64 host) with twice that as room: tiny_llama f16 1.2e-4, bf16
// 9.6e-4, i8 2.5e-3; tiny_gpt2 f16 7.2e-4, bf16 7.7e-3, i8 1.4e-2.
class DecoderKvDType : public ::testing::TestWithParam<std::tuple<const char *, DType, double>> {};

TEST_P(DecoderKvDType, StaysCloseToTheFullPass) {
  const auto &[fixture, kvType, bound] = GetParam();
  const std::string dir = std::string(NNC_SOURCE_DIR) + "/tests/fixtures/models/" + fixture + "_b1_s17";
  const std::string source = withSeqParameter(readText(dir + "/model.nn"));
  const int64_t batch = 2, context = 12, prompt = 5;
  auto compiler = driver::Compiler::fromSource("decoder.nn", source);
  auto probe = compiler.analyze(decoderOptions({{"batch", batch}, {"seq", context}}, 0));
  const auto w = runtime::WeightStore::fromSafeTensors(probe.program.tensors, dir + "/weights.safetensors", fixture);
  Built pre = build(source, batch, prompt, context, 2, &w, nullptr, kvType);
  Built step = build(source, batch, 1, context, 2, &w, pre.model.get(), kvType);
  ASSERT_EQ(pre.model->program().kvType, kvType);
  runtime::Decoder decoder(*pre.model, *step.model);
  const int64_t vocab = decoder.vocab();
  std::mt19937 rng(3);
  std::vector<std::vector<int32_t>> rows{size_t(batch)};
  for (auto &r : rows)
    for (int64_t i = 0; i < prompt; ++i) r.push_back(int32_t(rng() % uint32_t(vocab)));
  auto flat = [&](int64_t len) {
    std::vector<int32_t> out;
    for (const auto &r : rows) out.insert(out.end(), r.begin(), r.begin() + len);
    return out;
  };
  double worst = 0;
  std::vector<float> logits = decoder.prefill(flat(prompt).data());
  for (int64_t len = prompt;; ++len) {
    const std::vector<float> want = lastRowLogits(source, w, batch, flat(len), len);
    for (size_t i = 0; i < want.size(); ++i)
      worst = std::max(worst, double(std::fabs(logits[i] - want[i])) / std::max(1.0f, std::fabs(want[i])));
    if (len == context) break;
    std::vector<int32_t> next;
    for (int64_t b = 0; b < batch; ++b) {
      const float *row = &logits[size_t(b * vocab)];
      rows[size_t(b)].push_back(int32_t(std::max_element(row, row + vocab) - row));
      next.push_back(rows[size_t(b)].back());
    }
    logits = decoder.decode(next.data());
  }
  std::printf("%s kv %s: max relative error %.3g\n", fixture, std::string(dtypeName(kvType)).c_str(), worst);
  EXPECT_LE(worst, bound) << fixture << " kv " << dtypeName(kvType);
  EXPECT_GT(worst, 0.0) << "a cache below f32 rounds something";
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, DecoderKvDType,
    ::testing::Values(std::tuple{"tiny_llama", DType::F16, 2.5e-4}, std::tuple{"tiny_llama", DType::BF16, 2e-3},
                      std::tuple{"tiny_llama", DType::I8, 5e-3}, std::tuple{"tiny_gpt2", DType::F16, 1.5e-3},
                      std::tuple{"tiny_gpt2", DType::BF16, 1.5e-2}, std::tuple{"tiny_gpt2", DType::I8, 3e-2}));

// The KV append and attention kernels of each cache dtype are distinct kernels (their
// cache keys differ); f32's keys name no dtype, as before --kv-dtype.
TEST(Decoder, KernelKeysDifferPerKvDType) {
  const std::string dir = std::string(NNC_SOURCE_DIR) + "/tests/fixtures/models/tiny_llama_b1_s17";
  auto compiler = driver::Compiler::fromSource("decoder.nn", withSeqParameter(readText(dir + "/model.nn")));
  std::set<std::string> keys;
  for (DType kv : kKvCacheDTypes) {
    const auto m = compiler.analyze(decoderOptions({{"seq", 1}}, 12, kv));
    int cacheKernels = 0;
    for (const lower::Step &s : m.program.steps)
      if (std::holds_alternative<codegen::KvAppendSpec>(*s.kernel) ||
          std::holds_alternative<codegen::AttentionSpec>(*s.kernel)) {
        const std::string key = codegen::kernelKey(*s.kernel);
        EXPECT_EQ(key.find("f32"), std::string::npos) << key;
        keys.insert(key);
        ++cacheKernels;
      }
    EXPECT_GT(cacheKernels, 0);
  }
  // Every layer has the same shapes: one append and one attention key per dtype.
  EXPECT_EQ(keys.size(), 2 * std::size(kKvCacheDTypes));
}

// A prefill program keeps each sequence's last position after its last attention: the
// layers after it (the last MLP, the final norm, the head) run on batch rows, and the
// output is [batch, 1, vocab]; the one-position program has no such step.
TEST(Decoder, PrefillRunsTheHeadOnTheLastPositionOnly) {
  for (const char *fixture : {"tiny_llama", "tiny_gpt2"}) {
    const std::string dir = std::string(NNC_SOURCE_DIR) + "/tests/fixtures/models/" + fixture + "_b1_s17";
    auto compiler = driver::Compiler::fromSource("decoder.nn", withSeqParameter(readText(dir + "/model.nn")));
    const int64_t batch = 3, seq = 5;
    const auto m = compiler.analyze(decoderOptions({{"batch", batch}, {"seq", seq}}, 12));
    const lower::KernelProgram &p = m.program;
    ASSERT_EQ(p.outputType.shape, (std::vector<int64_t>{batch, 1, m.graph.op(m.graph.output).type.shape[2]}));
    size_t cut = p.steps.size();
    for (size_t i = 0; i < p.steps.size(); ++i)
      if (std::holds_alternative<codegen::LastPositionSpec>(*p.steps[i].kernel)) {
        EXPECT_EQ(cut, p.steps.size()) << fixture << ": one cut";
        cut = i;
        EXPECT_EQ(std::get<codegen::LastPositionSpec>(*p.steps[i].kernel).seq, seq);
      }
    ASSERT_LT(cut, p.steps.size()) << fixture;
    EXPECT_TRUE(std::holds_alternative<codegen::GemmSpec>(*p.steps[cut - 1].kernel)) << "after attention's o GEMM";
    int gemms = 0;
    for (size_t i = cut + 1; i < p.steps.size(); ++i)
      if (const auto *g = std::get_if<codegen::GemmSpec>(&*p.steps[i].kernel)) {
        EXPECT_EQ(g->M, batch) << fixture << " " << p.steps[i].layer;
        ++gemms;
      }
    EXPECT_GE(gemms, 3) << fixture << ": the last MLP's GEMMs and the head";
    const auto *head = std::get_if<codegen::GemmSpec>(&*p.steps.back().kernel);
    ASSERT_NE(head, nullptr) << fixture;
    EXPECT_EQ(head->M, batch) << fixture;
    const auto one = compiler.analyze(decoderOptions({{"batch", batch}, {"seq", 1}}, 12));
    for (const lower::Step &s : one.program.steps)
      EXPECT_FALSE(std::holds_alternative<codegen::LastPositionSpec>(*s.kernel)) << fixture;
  }
}

TEST(Decoder, BidirectionalAttentionCannotDecode) {
  const std::string source = "model m(seq = 8) {\n input t: i32[seq]\n tok = embedding(10, 8)\n"
                             " enc = attention(2, causal=false)\n head = dense(10)\n}";
  auto compiler = driver::Compiler::fromSource("bert.nn", source);
  auto m = compiler.analyze(decoderOptions({{"seq", 1}}, 8));
  ASSERT_NE(m.program.firstNotRunnable(), nullptr);
  EXPECT_NE(m.program.firstNotRunnable()->whyNotRunnable.find("causal=false"), std::string::npos);
}

// On [seq, d] the channel axis of lrn and batchnorm is the sequence axis: a step of
// one position ran it as channel 0 (wrong ids, or a weight-shape error at load).
// The same model still runs whole (no KV cache).
TEST(Decoder, LayersNormalisingAcrossPositionsCannotDecode) {
  for (const char *layer : {"lrn(3)", "batchnorm"}) {
    const std::string source = std::string("model m(seq = 8) {\n input t: i32[seq]\n tok = embedding(10, 8)\n ") +
                               layer + "\n head = dense(10)\n}";
    auto compiler = driver::Compiler::fromSource("mix.nn", source);
    auto m = compiler.analyze(decoderOptions({{"seq", 1}}, 8));
    ASSERT_NE(m.program.firstNotRunnable(), nullptr) << layer;
    EXPECT_NE(m.program.firstNotRunnable()->whyNotRunnable.find("normalises across the sequence axis"),
              std::string::npos)
        << layer;
    EXPECT_EQ(compiler.analyze({}).program.firstNotRunnable(), nullptr) << layer;
  }
}

} // namespace
