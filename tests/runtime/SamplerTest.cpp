// The next-id sampler of --generate and nnc::Decoder (runtime/model/Sampler.h): greedy
// is the first maximum; draws keep to the top k and to the nucleus of top-p, the ids
// and probabilities transformers' warpers keep (tests/fixtures/sampling, written by
// tools/fixtures/make_sampling_fixture.py), and the same seed gives the same ids, whatever
// rounding mode the calling thread is in.
#include <gtest/gtest.h>
#include <xmmintrin.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "runtime/model/Sampler.h"

namespace nnc::testing {
namespace {

// Probabilities 0.5, 0.3, 0.15, 0.05 at temperature 1, listed out of order.
const std::vector<float> kLogits = {std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)};

std::map<int32_t, int> draws(double topP, int64_t topK, uint64_t seed, int n = 4000) {
  runtime::Sampler s(1.0, topK, topP, seed);
  std::map<int32_t, int> seen;
  for (int i = 0; i < n; ++i) ++seen[s.next(kLogits.data(), int64_t(kLogits.size()))];
  return seen;
}

TEST(Sampler, GreedyIsTheFirstMaximum) {
  const std::vector<float> tied = {1.0f, 3.0f, 2.0f, 3.0f};
  runtime::Sampler s(0.0, 0, 0.5, 1);
  EXPECT_EQ(s.next(tied.data(), 4), 1);
}

TEST(Sampler, WithoutLimitsEveryIdIsDrawnAtItsRate) {
  auto seen = draws(1.0, 0, 1);
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_NEAR(seen[1] / 4000.0, 0.5, 0.04);
  EXPECT_NEAR(seen[2] / 4000.0, 0.05, 0.02);
}

TEST(Sampler, TopPKeepsTheIdThatReachesTheMass) {
  // 0.5 < 0.75, so the second most probable id (3, 0.3) stays; 0.8 >= 0.75 ends it.
  auto two = draws(0.75, 0, 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_GT(two.count(1), 0u);
  EXPECT_GT(two.count(3), 0u);
  EXPECT_NEAR(two[1] / 4000.0, 0.5 / 0.8, 0.04); // renormalised over the nucleus
  // 0.5 >= 0.45: the most probable id alone.
  auto one = draws(0.45, 0, 3);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one.begin()->first, 1);
  // 0.5 + 0.3 < 0.9, so the third (0.15) stays too; the least probable one does not.
  auto three = draws(0.9, 0, 4);
  EXPECT_EQ(three.size(), 3u);
  EXPECT_EQ(three.count(2), 0u);
}

TEST(Sampler, TopPAppliesWithinTheTopK) {
  // Top 3 hold 0.5, 0.3, 0.15 of 0.95: p = 0.8 needs 0.76 of them, reached by the first two.
  auto seen = draws(0.8, 3, 5);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen.count(0) + seen.count(2), 0u);
  auto topK = draws(1.0, 3, 5);
  EXPECT_EQ(topK.size(), 3u);
  EXPECT_EQ(topK.count(2), 0u);
}

TEST(Sampler, KeepsTheIdsTransformersKeeps) {
  std::ifstream in(std::string(NNC_SOURCE_DIR) + "/tests/fixtures/sampling/warpers.json");
  ASSERT_TRUE(in) << "tests/fixtures/sampling/warpers.json";
  const nlohmann::json fixture = nlohmann::json::parse(in);
  const auto& cases = fixture.at("cases");
  ASSERT_GE(cases.size(), 90u);
  for (const auto& c : cases) {
    const std::vector<float> logits = fixture.at("rows").at(c.at("row").get<size_t>()).get<std::vector<float>>();
    const double t = c.at("temperature"), p = c.at("top_p");
    const int64_t k = c.at("top_k");
    const std::string what = "row " + c.at("row").dump() + ", T " + std::to_string(t) + ", top-k " +
                             std::to_string(k) + ", top-p " + std::to_string(p);
    const runtime::Sampler::Candidates got = runtime::Sampler(t, k, p, 1).candidates(logits.data(), int64_t(logits.size()));
    // transformers lists the kept ids in id order, with their probabilities
    std::map<int32_t, double> want;
    for (size_t i = 0; i < c.at("ids").size(); ++i) want[c.at("ids")[i].get<int32_t>()] = c.at("probs")[i];
    ASSERT_EQ(got.ids.size(), want.size()) << what;
    double total = 0;
    for (double w : got.weights) total += w;
    for (size_t i = 0; i < got.ids.size(); ++i) {
      ASSERT_EQ(want.count(got.ids[i]), 1u) << what << ": id " << got.ids[i] << " is not one transformers keeps";
      EXPECT_NEAR(got.weights[i] / total, want[got.ids[i]], 1e-9) << what << ", id " << got.ids[i];
      if (i > 0) { // most probable first
        EXPECT_GE(got.weights[i - 1], got.weights[i]) << what;
      }
    }
  }
}

TEST(Sampler, NaNLogitsAreNeverDrawn) {
  const float nan = std::nanf("");
  const std::vector<float> logits = {nan, 1.0f, nan, 0.5f, nan};
  for (double p : {1.0, 0.9})
    for (int64_t k : {0, 2, 4}) {
      runtime::Sampler s(1.0, k, p, 9);
      std::map<int32_t, int> seen;
      for (int i = 0; i < 500; ++i) ++seen[s.next(logits.data(), 5)];
      EXPECT_EQ(seen.count(0) + seen.count(2) + seen.count(4), 0u) << "top-k " << k << ", top-p " << p;
    }
  const std::vector<float> none = {nan, nan, nan};
  runtime::Sampler s(1.0, 0, 1.0, 9);
  EXPECT_EQ(s.next(none.data(), 3), 0); // as the greedy pick: id 0
}

TEST(Sampler, TheSameSeedGivesTheSameIds) {
  runtime::Sampler a(0.8, 0, 0.9, 42), b(0.8, 0, 0.9, 42), c(0.8, 0, 0.9, 43);
  std::vector<int32_t> x, y, z;
  for (int i = 0; i < 64; ++i) {
    x.push_back(a.next(kLogits.data(), 4));
    y.push_back(b.next(kLogits.data(), 4));
    z.push_back(c.next(kLogits.data(), 4));
  }
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
}

TEST(Sampler, TheCallersRoundingModeChangesNoWeight) {
  std::vector<float> logits(1000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(float(i)) * 7.0f;
  const runtime::Sampler s(0.7, 0, 0.95, 5);
  const runtime::Sampler::Candidates nearest = s.candidates(logits.data(), int64_t(logits.size()));
  const uint32_t before = _mm_getcsr();
  _mm_setcsr((before & ~0x6000u) | 0x6000u); // round toward zero
  const runtime::Sampler::Candidates towardZero = s.candidates(logits.data(), int64_t(logits.size()));
  _mm_setcsr(before);
  ASSERT_GT(nearest.ids.size(), 100u);
  EXPECT_EQ(nearest.ids, towardZero.ids);
  EXPECT_EQ(nearest.weights, towardZero.weights); // exp((logit - max) / T), rounded as IEEE's default says
}

} // namespace
} // namespace nnc::testing
