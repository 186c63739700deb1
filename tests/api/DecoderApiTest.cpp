// The public decoder (nnc::DecoderModel, nnc::Decoder; docs/api.md), through libnnc.so:
// after prompts of 1, 5 and 17 tokens (chunks of 1, 4 + 1, 16 + 1) and after every
// decode step, the logits equal the last row of a full forward pass (nnc::Model at that
// length) for the LLaMA- and GPT-2-style fixtures of tests/runtime/DecoderTest.cpp;
// greedy ids equal transformers' generate() on tests/fixtures/hf_llama; decoders on two
// threads at once equal serial runs; and the errors say what is wrong, before any work.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <regex>
#include <thread>
#include <unistd.h>

#include "DecoderChecks.h"
#include "nnc/nnc.h"

namespace {

using nnc::testing::lastPositions;
using nnc::testing::readText;
using nnc::testing::withSeqParameter;

std::string source(const std::string &relative) { return std::string(NNC_SOURCE_DIR) + "/" + relative; }

// The int32 data of a version-1 .npy file ('<i4', C order), as the hf_llama fixture writes it.
std::vector<int32_t> readIds(const std::string &path) {
  const std::string b = readText(path);
  const size_t header = 10 + size_t(uint8_t(b.at(8))) + 256 * size_t(uint8_t(b.at(9)));
  EXPECT_NE(b.substr(10, header - 10).find("'<i4'"), std::string::npos) << path;
  std::vector<int32_t> v((b.size() - header) / 4);
  std::memcpy(v.data(), b.data() + header, v.size() * 4);
  return v;
}

nnc::Options options(int64_t batch, int64_t seq) {
  nnc::Options o;
  o.batch = batch;
  o.threads = 2;
  o.kernelCacheDir = "";
  o.set["seq"] = seq;
  return o;
}

// The logits of the last position of each row of `ids` (batch × len) from a full pass.
std::vector<float> lastRowLogits(const std::string &text, const std::string &weights, int64_t batch,
                                 const std::vector<int32_t> &ids, int64_t len) {
  nnc::Model full = nnc::Model::fromSource(text, options(batch, len));
  full.loadWeights(weights);
  std::vector<float> out(size_t(full.outputElements()));
  full.run(ids.data(), out.data());
  const int64_t vocab = full.outputShape()[2];
  return lastPositions(out, batch, len, vocab);
}

int32_t argmax(const float *row, int64_t n) { return int32_t(std::max_element(row, row + n) - row); }

class ApiDecoderMatchesFullPasses : public ::testing::TestWithParam<std::tuple<const char *, int64_t>> {};

TEST_P(ApiDecoderMatchesFullPasses, ForPromptsOf1And5And17TokensAndEveryStep) {
  const auto &[fixture, batch] = GetParam();
  const std::string dir = source("tests/fixtures/models/") + fixture + "_b1_s17";
  const std::string text = withSeqParameter(readText(dir + "/model.nn")), weights = dir + "/weights.safetensors";
  nnc::DecoderModel lm = nnc::DecoderModel::fromSource(text, options(batch, 17));
  lm.loadWeights(weights);
  ASSERT_EQ(lm.context(), 17);
  ASSERT_EQ(lm.batch(), batch);
  const int64_t vocab = lm.vocab();
  ASSERT_EQ(vocab, 61);

  std::mt19937 rng(5);
  for (int64_t prompt : {1, 5, 17}) {
    std::vector<std::vector<int32_t>> rows(static_cast<size_t>(batch)); // each row's ids so far
    for (auto &r : rows)
      for (int64_t i = 0; i < prompt; ++i) r.push_back(int32_t(rng() % uint32_t(vocab)));
    auto flat = [&](int64_t len) {
      std::vector<int32_t> ids;
      for (const auto &r : rows) ids.insert(ids.end(), r.begin(), r.begin() + len);
      return ids;
    };
    nnc::Decoder d = lm.newDecoder();
    std::vector<float> logits = d.prefill(flat(prompt).data(), size_t(prompt));
    const std::string what = std::string(fixture) + " prompt " + std::to_string(prompt);
    nnc::testing::expectLogitsClose(logits, lastRowLogits(text, weights, batch, flat(prompt), prompt), what);
    EXPECT_EQ(d.past(), prompt);
    for (int64_t len = prompt + 1; len <= std::min<int64_t>(prompt + 6, lm.context()); ++len) {
      std::vector<int32_t> next;
      for (size_t b = 0; b < rows.size(); ++b) {
        rows[b].push_back(argmax(&logits[b * size_t(vocab)], vocab));
        next.push_back(rows[b].back());
      }
      logits = d.decode(next.data());
      nnc::testing::expectLogitsClose(logits, lastRowLogits(text, weights, batch, flat(len), len), what + " to " + std::to_string(len));
      EXPECT_EQ(d.logits(), logits);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ApiDecoderMatchesFullPasses,
                         ::testing::Combine(::testing::Values("tiny_llama", "tiny_gpt2"), ::testing::Values(1, 2)));

// A prompt given in two prefill calls continues the same sequence: the same logits as in one.
TEST(ApiDecoder, PrefillAppendsToTheCache) {
  const std::string dir = source("tests/fixtures/models/tiny_llama_b1_s17");
  nnc::DecoderModel lm = nnc::DecoderModel::fromSource(withSeqParameter(readText(dir + "/model.nn")), options(1, 17));
  lm.loadWeights(dir + "/weights.safetensors");
  const std::vector<int32_t> ids = {3, 14, 15, 9, 26, 53, 58, 9, 7, 9, 32, 38, 46};
  nnc::Decoder whole = lm.newDecoder(), parts = lm.newDecoder();
  const std::vector<float> want = whole.prefill(ids.data(), ids.size());
  parts.prefill(ids.data(), 6);
  const std::vector<float> got = parts.prefill(ids.data() + 6, ids.size() - 6);
  EXPECT_EQ(parts.past(), int64_t(ids.size()));
  nnc::testing::expectLogitsClose(got, want, "6 + 7 tokens");
}

// Greedy generate() takes its ids from the programs' Argmax step (docs/api.md): they
// equal the host's argmax of decode()'s logits at every step, for random weights, at
// batch 2, from prompts of 1 and 6 tokens (one chunk, and 4 + 2).
TEST(ApiDecoder, GreedyGenerateEqualsTheHostArgmaxOfEveryStep) {
  const std::string dir = source("tests/fixtures/models/tiny_llama_b1_s17");
  const int64_t batch = 2, n = 8;
  nnc::DecoderModel lm = nnc::DecoderModel::fromSource(withSeqParameter(readText(dir + "/model.nn")), options(batch, 17));
  lm.randomWeights(21);
  const int64_t vocab = lm.vocab();
  for (int64_t length : {1, 6}) {
    std::vector<int32_t> prompt;
    for (int64_t i = 0; i < batch * length; ++i) prompt.push_back(int32_t((i * 11 + 5) % vocab));
    nnc::Decoder d = lm.newDecoder();
    const std::vector<int32_t> got = d.generate(prompt.data(), size_t(length), n);
    d.reset();
    std::vector<int32_t> want(static_cast<size_t>(batch * n)), next(static_cast<size_t>(batch));
    const std::vector<float> *logits = &d.prefill(prompt.data(), size_t(length));
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t b = 0; b < batch; ++b)
        want[size_t(b * n + i)] = next[size_t(b)] = argmax(&(*logits)[size_t(b * vocab)], vocab);
      if (i + 1 < n) logits = &d.decode(next.data());
    }
    EXPECT_EQ(got, want) << "prompt of " << length;
    // A nucleus of 1e-9 is the most probable id alone: sampling then gives the greedy ids.
    d.reset();
    EXPECT_EQ(d.generate(prompt.data(), size_t(length), n, nnc::Sampling{2.0, 0, 5, 1e-9}), want)
        << "prompt of " << length;
    // Each row's first id as a stop id: both rows end there, and so does generate.
    d.reset();
    nnc::Sampling stopAtFirst;
    stopAtFirst.stop = {want[0], want[size_t(n)]};
    EXPECT_EQ(d.generate(prompt.data(), size_t(length), n, stopAtFirst), (std::vector<int32_t>{want[0], want[size_t(n)]}))
        << "prompt of " << length;
    EXPECT_EQ(d.past(), length); // no decode step ran: the first id was never fed back
  }
}

// Options::kvDtype: an f16 cache gives the f32 cache's logits within f16's rounding
// (measured max relative difference 1.2e-4 on this fixture: DecoderKvDType in
// tests/runtime/DecoderTest.cpp); a dtype a cache cannot take is an Error naming it.
TEST(ApiDecoder, KvDtypeStoresTheCacheBelowF32) {
  const std::string dir = source("tests/fixtures/models/tiny_llama_b1_s17");
  const std::string text = withSeqParameter(readText(dir + "/model.nn"));
  nnc::Options o = options(1, 17);
  nnc::DecoderModel f32 = nnc::DecoderModel::fromSource(text, o);
  o.kvDtype = "f16";
  nnc::DecoderModel f16 = nnc::DecoderModel::fromSource(text, o);
  f32.loadWeights(dir + "/weights.safetensors");
  f16.loadWeights(dir + "/weights.safetensors");
  const std::vector<int32_t> ids = {3, 14, 15, 9, 26, 53, 58, 9, 7, 9, 32, 38, 46};
  nnc::Decoder a = f32.newDecoder(), b = f16.newDecoder();
  std::vector<float> want = a.prefill(ids.data(), 6), got = b.prefill(ids.data(), 6);
  for (size_t i = 6; i < ids.size(); ++i) {
    want = a.decode(&ids[i]);
    got = b.decode(&ids[i]);
  }
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, double(std::fabs(got[i] - want[i])) / std::max(1.0f, std::fabs(want[i])));
  EXPECT_LE(worst, 2.5e-4);
  EXPECT_GT(worst, 0.0); // the cache is not f32
  o.kvDtype = "i4";
  try {
    nnc::DecoderModel::fromSource(text, o);
    FAIL() << "an i4 KV cache was accepted";
  } catch (const nnc::Error &e) {
    EXPECT_NE(std::string(e.what()).find("Options::kvDtype: expected f32, f16, bf16 or i8, found 'i4'"),
              std::string::npos)
        << e.what();
  }
}

class ApiDecoderHfCheckpoint : public ::testing::TestWithParam<const char *> {};

TEST_P(ApiDecoderHfCheckpoint, GreedyIdsEqualTransformersGenerate) {
  const std::string dtype = GetParam(), dir = source("tests/fixtures/hf_llama");
  const std::vector<int32_t> prompt = readIds(dir + "/prompt.npy"), want = readIds(dir + "/greedy_" + dtype + ".npy");
  const int64_t length = int64_t(prompt.size()) / 2, fresh = int64_t(want.size()) / 2;
  nnc::DecoderModel lm = nnc::DecoderModel::fromFile(dir + "/model.nn", options(2, length + fresh));
  lm.loadWeights(dir + "/" + dtype + "/model.safetensors", nnc::WeightMap::fromFile(source("examples/llama.weightmap")));
  nnc::Decoder d = lm.newDecoder();
  EXPECT_EQ(d.generate(prompt.data(), size_t(length), fresh), want) << dtype;
  EXPECT_EQ(d.past(), length + fresh - 1); // the last id is not fed back
  d.reset();
  EXPECT_EQ(d.generate(prompt.data(), size_t(length), fresh), want) << dtype << " after reset";
}

INSTANTIATE_TEST_SUITE_P(SavedBy, ApiDecoderHfCheckpoint, ::testing::Values("f32", "bf16"));

// Decoders of one model on several threads at once (sampled and greedy, prompts of
// different lengths, so their chunk programs compile while the others run) give what
// the same decoders give one after another on another model of the same weights.
TEST(ApiDecoder, ThreadsAtOnceEqualSerialRuns) {
  const std::string dir = source("tests/fixtures/hf_llama");
  const auto map = nnc::WeightMap::fromFile(source("examples/llama.weightmap"));
  auto load = [&] {
    nnc::DecoderModel lm = nnc::DecoderModel::fromFile(dir + "/model.nn", options(1, 32));
    lm.loadWeights(dir + "/f32/model.safetensors", map);
    return lm;
  };
  const int kThreads = 4;
  auto work = [](nnc::DecoderModel &lm, int t, std::vector<int32_t> &ids, std::vector<float> &logits) {
    std::vector<int32_t> prompt;
    for (int i = 0; i < 3 + 7 * t; ++i) prompt.push_back(int32_t((i * 7 + t * 13) % 61));
    nnc::Decoder d = lm.newDecoder();
    const nnc::Sampling s{t % 2 ? 0.9 : 0.0, t == 3 ? 10 : 0, uint64_t(t)};
    for (int round = 0; round < 3; ++round) {
      d.reset();
      ids = d.generate(prompt.data(), prompt.size(), 32 - int64_t(prompt.size()), s);
    }
    logits = d.logits();
  };
  nnc::DecoderModel serialModel = load();
  std::vector<std::vector<int32_t>> serialIds(kThreads), ids(kThreads);
  std::vector<std::vector<float>> serialLogits(kThreads), logits(kThreads);
  for (int t = 0; t < kThreads; ++t) work(serialModel, t, serialIds[size_t(t)], serialLogits[size_t(t)]);
  nnc::DecoderModel shared = load();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] { work(shared, t, ids[size_t(t)], logits[size_t(t)]); });
  for (auto &th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(ids[size_t(t)], serialIds[size_t(t)]) << "thread " << t;
    EXPECT_EQ(logits[size_t(t)], serialLogits[size_t(t)]) << "thread " << t;
  }
}

std::string errorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const nnc::Error &e) {
    return e.what();
  }
  return "no error";
}

TEST(ApiDecoder, ErrorsSayWhatIsWrongAndLeaveTheCacheAsItWas) {
  const std::string dir = source("tests/fixtures/models/tiny_llama_b1_s17");
  const std::string text = withSeqParameter(readText(dir + "/model.nn"));
  nnc::DecoderModel lm = nnc::DecoderModel::fromSource(text, options(1, 8));
  nnc::Decoder d = lm.newDecoder();
  const std::vector<int32_t> ids = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_NE(errorOf([&] { d.prefill(ids.data(), 3); }).find("weights were not loaded"), std::string::npos);
  lm.loadWeights(dir + "/weights.safetensors");
  d.prefill(ids.data(), 3);
  EXPECT_NE(errorOf([&] { d.prefill(ids.data(), 6); })
                .find("6 more positions were asked for, but the context of 8 has room for 5 (3 are in the KV cache"),
            std::string::npos);
  const std::vector<int32_t> bad = {4, 61};
  EXPECT_NE(errorOf([&] { d.prefill(bad.data(), 2); })
                .find("token id 61 at batch row 0, position 4 is outside the vocabulary [0, 61)"),
            std::string::npos);
  const int32_t negative = -1;
  EXPECT_NE(errorOf([&] { d.decode(&negative); }).find("token id -1"), std::string::npos);
  EXPECT_NE(errorOf([&] { d.generate(ids.data(), 3, 3); })
                .find("need 9 positions, but the context is 8 (its seq; Options::set[\"seq\"] makes it longer)"),
            std::string::npos);
  EXPECT_NE(errorOf([&] { d.generate(ids.data(), 1, 0); }).find("at least one new token"), std::string::npos);
  EXPECT_NE(errorOf([&] { d.prefill(ids.data(), 0); }).find("at least one token"), std::string::npos);
  // Sizes that overflowed (an internal error; SIZE_MAX read as a prompt of 0), a null
  // pointer, a temperature that is no number.
  EXPECT_NE(errorOf([&] { d.generate(ids.data(), 6, INT64_MAX); }).find("need more than 2^63 positions"),
            std::string::npos);
  EXPECT_NE(errorOf([&] { d.prefill(ids.data(), SIZE_MAX); }).find("a prompt of 18446744073709551615 tokens"),
            std::string::npos);
  EXPECT_NE(errorOf([&] { d.prefill(nullptr, 3); }).find("null pointer"), std::string::npos);
  EXPECT_NE(errorOf([&] { lm.loadWeights(nullptr, 100); }).find("null pointer"), std::string::npos);
  EXPECT_NE(errorOf([&] { lm.loadWeights("x", SIZE_MAX); }).find("more than any weights file"), std::string::npos);
  EXPECT_NE(errorOf([&] { d.decode(nullptr); }).find("null pointer"), std::string::npos);
  for (double t : {std::nan(""), double(INFINITY), -1.0})
    EXPECT_NE(errorOf([&] { d.generate(ids.data(), 1, 1, nnc::Sampling{t, 0, 1}); }).find("Sampling's temperature"),
              std::string::npos)
        << t;
  for (double p : {std::nan(""), 0.0, -0.5, 1.5})
    EXPECT_NE(errorOf([&] { d.generate(ids.data(), 1, 1, nnc::Sampling{1.0, 0, 1, p}); })
                  .find("Sampling's topP is in (0, 1]"),
              std::string::npos)
        << p;
  nnc::Sampling outside;
  outside.stop = {61};
  EXPECT_NE(errorOf([&] { d.generate(ids.data(), 1, 1, outside); }).find("stop id 61 is outside the vocabulary [0, 61)"),
            std::string::npos);
  EXPECT_EQ(d.past(), 3); // none of these touched the cache
  d.prefill(ids.data(), 5);
  EXPECT_EQ(d.past(), 8);
  EXPECT_NE(errorOf([&] { d.decode(ids.data()); }).find("the context of 8 has room for 0"), std::string::npos);
  EXPECT_NE(errorOf([&] { d.generate(ids.data(), 0, 1); }).find("Decoder::generate: a prompt of at least one token"),
            std::string::npos);
  // Moved from: an Error, not a null pointer followed (only destruction and assignment are allowed).
  nnc::Decoder taken = std::move(d);
  EXPECT_EQ(errorOf([&] { d.prefill(ids.data(), 1); }), "this Decoder was moved from: a moved-from Decoder may only be "
                                                        "destroyed or assigned to");
  EXPECT_EQ(errorOf([&] { d.past(); }).find("this Decoder was moved from"), 0u);
  EXPECT_EQ(taken.past(), 8);
  nnc::DecoderModel takenLm = std::move(lm);
  EXPECT_EQ(errorOf([&] { lm.newDecoder(); }).find("this DecoderModel was moved from"), 0u);
  EXPECT_EQ(errorOf([&] { lm.context(); }).find("this DecoderModel was moved from"), 0u);
  EXPECT_EQ(takenLm.context(), 8);

  EXPECT_NE(errorOf([] { nnc::DecoderModel::fromFile(source("examples/digits/digits.nn")); })
                .find("DecoderModel needs a language model: token ids i32[seq] in, logits [seq, vocab] out"),
            std::string::npos);
  const std::string bert = "model m(seq = 8) {\n input t: i32[seq]\n tok = embedding(10, 8)\n"
                           " enc = attention(2, causal=false)\n head = dense(10)\n}";
  EXPECT_NE(errorOf([&] { nnc::DecoderModel::fromSource(bert); }).find("layer 'enc' (attention, line 4)"),
            std::string::npos);
  const std::string normalised = "model m(seq = 8) {\n input t: i32[seq]\n tok = embedding(10, 8)\n"
                                 " bn = batchnorm\n head = dense(10)\n}";
  EXPECT_NE(errorOf([&] { nnc::DecoderModel::fromSource(normalised); })
                .find("layer 'bn' (batchnorm, line 4) normalises across the sequence axis"),
            std::string::npos)
      << errorOf([&] { nnc::DecoderModel::fromSource(normalised); });
  const std::string fixed = "model m {\n input t: i32[8]\n tok = embedding(10, 8)\n head = dense(10)\n}";
  // The context is the input's length, seq or not; a table sized by seq is the context's.
  EXPECT_EQ(errorOf([&] { nnc::DecoderModel::fromSource(fixed); }), "no error");
  nnc::DecoderModel fixedLm = nnc::DecoderModel::fromSource(fixed);
  fixedLm.randomWeights(1);
  nnc::Decoder fd = fixedLm.newDecoder();
  EXPECT_NE(errorOf([&] { fd.generate(ids.data(), 5, 4); })
                .find("need 9 positions, but the context is 8 (its input's length, a number in the model)"),
            std::string::npos)
      << errorOf([&] { fd.generate(ids.data(), 5, 4); });
  nnc::DecoderModel scaledLm =
      nnc::DecoderModel::fromSource("model m(n = 4) {\n input t: i32[2*n]\n tok = embedding(10, 8)\n head = dense(10)\n}");
  scaledLm.randomWeights(1);
  nnc::Decoder sd = scaledLm.newDecoder();
  EXPECT_NE(errorOf([&] { sd.generate(ids.data(), 5, 4); })
                .find("the context is 8 (its input's length, written with n; a larger Options::set[\"n\"] makes it "
                      "longer)"),
            std::string::npos)
      << errorOf([&] { sd.generate(ids.data(), 5, 4); });
  const std::string seqTable = "model m(seq = 8) {\n input t: i32[seq]\n tok = embedding(10, 8)\n"
                               " pos = pos_embedding(seq)\n attn = attention(2)\n head = dense(10)\n}";
  EXPECT_EQ(errorOf([&] { nnc::DecoderModel::fromSource(seqTable).randomWeights(1); }), "no error");
}

// At temperature 0 (greedy) Sampling's topK, topP and seed do nothing: the host hears so
// through Options::onWarning, once per Decoder (they were ignored without a word; the
// CLI's --top-k without --temperature is a usage error), and the ids are the greedy ones.
// Weights loaded again after a Decoder's cache was filled: its next call is an error
// (the cache holds the old weights' keys and values) until reset(); decoders on other
// threads meanwhile either finish a call on one set of weights or say so, never crash.
TEST(ApiDecoder, WeightsLoadedAgainAfterTheCacheWasFilledAreAnErrorUntilReset) {
  const std::string dir = source("tests/fixtures/models/tiny_llama_b1_s17");
  const std::string text = withSeqParameter(readText(dir + "/model.nn"));
  nnc::DecoderModel lm = nnc::DecoderModel::fromSource(text, options(1, 16));
  lm.loadWeights(dir + "/weights.safetensors");
  const std::vector<int32_t> prompt = {3, 1, 4};
  nnc::Decoder d = lm.newDecoder();
  d.prefill(prompt.data(), prompt.size());
  const std::vector<int32_t> ids = d.generate(prompt.data(), prompt.size(), 3); // 3 + 2 more positions
  lm.randomWeights(7);
  const int32_t next = 2;
  const std::string stale = errorOf([&] { d.decode(&next); });
  EXPECT_NE(stale.find("its weights were loaded again (loadWeights or randomWeights) after this Decoder's KV cache was "
                       "filled: its 8 positions hold the old weights' keys and values; reset() it"),
            std::string::npos)
      << stale;
  EXPECT_EQ(d.past(), 8);
  d.reset();
  lm.loadWeights(dir + "/weights.safetensors");
  d.prefill(prompt.data(), prompt.size());
  EXPECT_EQ(d.generate(prompt.data(), prompt.size(), 3), ids) << "the same weights again, the same ids";

  std::atomic<bool> done{false};
  std::atomic<int> calls{0}, told{0};
  std::string other;
  std::thread decoding([&] {
    nnc::Decoder e = lm.newDecoder();
    while (!done) {
      const std::string why = errorOf([&] {
        e.reset();
        e.generate(prompt.data(), prompt.size(), 4);
      });
      if (why == "no error") ++calls;
      else if (why.find("its weights were loaded again") != std::string::npos) ++told;
      else other = why;
    }
  });
  for (int i = 0; i < 30; ++i) lm.randomWeights(uint64_t(i));
  done = true;
  decoding.join();
  EXPECT_EQ(other, "");
  EXPECT_GT(calls + told, 0);
}

// A row whose logits hold NaN (weights of NaN) leaves nothing to pick an id from:
// greedy and sampled generate() say so, naming the row and the token.
TEST(ApiDecoder, NaNLogitsAreAnError) {
  const std::string dir = source("tests/fixtures/models/tiny_llama_b1_s17");
  const std::string text = withSeqParameter(readText(dir + "/model.nn"));
  nnc::DecoderModel lm = nnc::DecoderModel::fromSource(text, options(1, 16));
  lm.loadWeights(dir + "/weights.safetensors");
  std::string bytes = readText(dir + "/weights.safetensors");
  const size_t header = 8 + size_t(*reinterpret_cast<const uint64_t *>(bytes.data()));
  for (size_t at = header; at + 4 <= bytes.size(); at += 4) { // every weight NaN (all are F32)
    const float nan = std::nanf("");
    std::memcpy(&bytes[at], &nan, 4);
  }
  lm.loadWeights(bytes.data(), bytes.size());
  const std::vector<int32_t> prompt = {3, 1, 4};
  for (double t : {0.0, 1.0}) {
    nnc::Decoder d = lm.newDecoder();
    const std::string why = errorOf([&] { d.generate(prompt.data(), prompt.size(), 3, nnc::Sampling{t, 0, 1}); });
    EXPECT_NE(why.find("the logits of batch row 0 for new token 0 hold NaN ("), std::string::npos) << why;
    EXPECT_NE(why.find("the first at id 0), so no id can be picked from them"), std::string::npos) << why;
  }
}

TEST(ApiDecoder, SamplingOptionsUnusedByGreedyDecodingAreSaidOnce) {
  const std::string dir = source("tests/fixtures/models/tiny_llama_b1_s17");
  nnc::Options o = options(1, 8);
  std::vector<std::string> warnings;
  o.onWarning = [&](const std::string &w) { warnings.push_back(w); };
  nnc::DecoderModel lm = nnc::DecoderModel::fromSource(withSeqParameter(readText(dir + "/model.nn")), o);
  lm.loadWeights(dir + "/weights.safetensors");
  const std::vector<int32_t> ids = {1, 2, 3};
  nnc::Decoder d = lm.newDecoder();
  const std::vector<int32_t> greedy = d.generate(ids.data(), 3, 4);
  EXPECT_TRUE(warnings.empty());
  d.reset();
  EXPECT_EQ(d.generate(ids.data(), 3, 4, nnc::Sampling{0, 5, 9, 0.5}), greedy);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("Sampling's topK (5), topP (0.5) and seed (9) shape sampling, which temperature > 0 "
                             "turns on; at temperature 0 generate is greedy"),
            std::string::npos)
      << warnings[0];
  d.reset();
  EXPECT_EQ(d.generate(ids.data(), 3, 4, nnc::Sampling{0, 0, 7}), greedy);
  EXPECT_EQ(warnings.size(), 1u); // once per Decoder
  nnc::Decoder other = lm.newDecoder();
  EXPECT_EQ(other.generate(ids.data(), 3, 4, nnc::Sampling{0, 0, 7}), greedy);
  EXPECT_EQ(warnings.size(), 2u);
}

// The example of docs/api.md (class DecoderModel), compiled and run here: the docs hold
// tests/api/decoder_example.inc verbatim, and it prints transformers' greedy ids.
int docsExample() try {
#include "api/decoder_example.inc"
  return 0;
} catch (const nnc::Error &e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}

TEST(ApiDecoder, TheDocsExampleRunsAndIsTheOneInTheDocs) {
  const std::string example = readText(source("tests/api/decoder_example.inc"));
  ASSERT_FALSE(example.empty());
  EXPECT_NE(readText(source("docs/api.md")).find("int main() try {\n" + example + "} catch"), std::string::npos);
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
  ASSERT_EQ(chdir(NNC_SOURCE_DIR), 0); // the example's paths are from the repository root
  testing::internal::CaptureStdout();
  const int status = docsExample();
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_EQ(chdir(cwd), 0);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(out, "42 57 14 12 32 48 24 15 5 38 (past 15 of 16)\n"
                 "42 then 57\n"
                 "sampled twice with seed 7: the same ids\n");
}

} // namespace
