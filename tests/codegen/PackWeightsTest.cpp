// packWeightsPanel against a naive reference packer, byte for byte: every storage dtype
// (f16, bf16, i8 per channel and per tensor, i4 in groups that do and do not divide K),
// every dot-product layout (bf16 kPack 2, i8 and i4 kPack 4), gated panels, partial
// last panels, K shorter and longer than the packer's tile of k steps, and values that
// round at the edges (f16 subnormals, ±65504, ties). The reference places each element
// with PanelLayout::offset(), the way the layout is specified (PackLayout.h), converting
// f16 in software (the packer uses F16C where the host has it), so neither the fast
// packer's tiling nor its conversion can drift from the specification. Also: the
// first weight a dtype cannot store is the one named, in row-major order.
#include <gtest/gtest.h>

#include <limits>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "compiler/codegen/PackLayout.h"
#include "runtime/io/HalfFloat.h"

namespace nnc::testing {
namespace {

using codegen::PanelLayout;

// The layout from PackLayout.h, one element at a time; the stored values come from
// storedWeightValues (f16/bf16: the rounded value, whose bits are the stored bits;
// i8/i4: q · s, from which q is recovered with the scale, recomputed here; i4's
// rounded to bf16, in software).
std::vector<unsigned char> referencePack(const PanelLayout& L, const std::vector<float>& W, bool perTensor) {
  codegen::PackOptions quant;
  quant.perTensor = perTensor;
  std::vector<unsigned char> out(size_t(L.totalBytes()), 0);
  const std::vector<float> stored = codegen::storedWeightValues(L, W.data(), quant);
  const float limit = L.type == DType::I8 ? 127.0f : 7.0f;
  const int64_t groupSteps = L.type == DType::I4 ? L.group : L.K;
  const int64_t groups = L.groups();
  auto scaleOf = [&](int64_t row, int64_t g) {
    float m = 0;
    if (L.type == DType::I8 && perTensor)
      for (float w : W) m = std::max(m, std::fabs(w));
    else
      for (int64_t k = g * groupSteps; k < std::min(L.K, (g + 1) * groupSteps); ++k)
        m = std::max(m, std::fabs(W[size_t(row * L.K + k)]));
    return L.type == DType::I4 ? bf16ToFloat(floatToBf16(m / limit)) : m / limit;
  };
  for (int64_t n = 0; n < L.N; ++n) {
    const int64_t row = L.sourceRow(n);
    int32_t sum = 0;
    for (int64_t k = 0; k < L.K; ++k) {
      const float v = stored[size_t(row * L.K + k)];
      const int64_t at = L.offset(n, k);
      if (L.type == DType::F16 || L.type == DType::BF16) {
        const float w = W[size_t(row * L.K + k)]; // converted here in software, not by the packer's F16C
        const uint16_t bits = L.type == DType::F16 ? floatToHalf(w) : floatToBf16(w);
        EXPECT_EQ(floatBits(v), floatBits(L.type == DType::F16 ? halfToFloat(bits) : bf16ToFloat(bits)));
        std::memcpy(&out[size_t(at * 2)], &bits, 2);
        continue;
      }
      const float s = scaleOf(row, k / groupSteps);
      const int q = s > 0 ? int(std::lround(v / s)) : 0;
      sum += q;
      if (L.type == DType::I8) {
        out[size_t(at)] = static_cast<unsigned char>(int8_t(q));
      } else if (L.kPack == 4) { // element e of a dot step's NR·4: byte e % (NR·2), q + 8
        const int64_t stepElements = L.NR * 4, e = at % stepElements;
        const int64_t byte = at / stepElements * (stepElements / 2) + e % (2 * L.NR);
        const unsigned nibble = unsigned(q + 8) & 0xfu;
        out[size_t(byte)] |= static_cast<unsigned char>(e < 2 * L.NR ? nibble : nibble << 4);
      } else { // byte b of a k step: channel b low, b + NR/2 high
        const int64_t half = L.NR / 2, local = n % L.NR;
        const unsigned nibble = unsigned(q) & 0xfu;
        out[size_t(((n / L.NR) * L.K + k) * half + local % half)] |=
            static_cast<unsigned char>(local < half ? nibble : nibble << 4);
      }
    }
    if (!L.scaleCount()) continue;
    for (int64_t g = 0; g < groups; ++g) {
      const float s = scaleOf(row, g);
      const uint16_t bits = floatToBf16(s); // i4: the top half of s (bf16), i8: s
      if (L.type == DType::I4) std::memcpy(&out[size_t(L.scalesOffsetBytes() + L.scaleIndex(n, g) * 2)], &bits, 2);
      else std::memcpy(&out[size_t(L.scalesOffsetBytes() + L.scaleIndex(n, g) * 4)], &s, 4);
    }
    if (L.hasSums()) {
      const int32_t s = 128 * sum;
      std::memcpy(&out[size_t(L.sumsOffsetBytes() + n * 4)], &s, 4);
    }
  }
  return out;
}

struct Case {
  DType type;
  int64_t group = 0, kPack = 1;
  bool perTensor = false;
};

TEST(PackWeights, MatchesTheReferenceByteForByte) {
  std::mt19937 rng(11);
  const Case cases[] = {{DType::F16},          {DType::BF16},           {DType::BF16, 0, 2},
                        {DType::I8},           {DType::I8, 0, 1, true}, {DType::I8, 0, 4},
                        {DType::I4, 32},       {DType::I4, 7},          {DType::I4, 32, 4},
                        {DType::I4, 16, 4}};
  struct Shape {
    int64_t N, K, NR;
    bool gated;
  };
  // K below, at and past the packer's 256-step tile, primes, partial last panels; NR 12:
  // channel pairs and dot words not a multiple of the 4 placed (transposed) together.
  const Shape shapes[] = {{1, 1, 32, false},    {5, 13, 16, false},  {37, 97, 32, false},
                          {64, 256, 32, false}, {48, 300, 16, false}, {64, 613, 64, true},
                          {96, 512, 32, true},  {33, 1031, 32, false}, {30, 70, 12, false}};
  for (const Case& c : cases)
    for (const Shape& sh : shapes) {
      PanelLayout L{sh.N, sh.K, sh.NR, false, c.type, c.group, c.kPack, sh.gated};
      SCOPED_TRACE(::testing::Message() << dtypeName(c.type) << " group " << c.group << " kPack " << c.kPack
                                        << (c.perTensor ? " per tensor" : "") << " N " << L.N << " K " << L.K
                                        << " NR " << L.NR << (L.gated ? " gated" : ""));
      std::vector<float> W(size_t(L.N * L.K));
      std::normal_distribution<float> normal(0.0f, c.type == DType::F16 ? 3e-5f : 1.0f);
      for (float& w : W) w = normal(rng);
      if (c.type == DType::F16 && W.size() > 8) { // subnormal halves, the range's ends, a tie
        W[0] = 65504.0f, W[1] = -65504.0f, W[2] = 0x1p-24f, W[3] = 0x1.8p-24f, W[4] = -0.0f, W[5] = 1.0f + 0x1p-11f;
      }
      if (c.type != DType::F16 && c.type != DType::BF16 && L.N > 2)
        std::fill(W.begin() + L.K, W.begin() + 2 * L.K, 0.0f); // an all-zero channel: scale 0
      codegen::PackOptions quant;
      quant.perTensor = c.perTensor;
      std::vector<unsigned char> got(size_t(L.totalBytes()), 0xAB);
      codegen::packWeightsPanel(L, W.data(), got.data(), quant);
      const std::vector<unsigned char> want = referencePack(L, W, c.perTensor);
      ASSERT_EQ(got.size(), want.size());
      size_t first = 0;
      while (first < got.size() && got[first] == want[first]) ++first;
      EXPECT_EQ(first, got.size()) << "first differing byte " << first << " of " << got.size();
    }
}

// f32 panels (transposed 4×4 at a time, the rest one weight at a time): every weight
// at layout.offset(n, k), zeros in the partial panel's missing channels, for K and
// channel counts that are and are not multiples of 4, row tails and gated panels.
TEST(PackWeights, F32PanelsHoldEveryWeightAtItsOffset) {
  struct Shape {
    int64_t N, K, NR;
    bool rowTail, gated;
  };
  const Shape shapes[] = {{1, 1, 32, false, false},  {5, 13, 16, false, false}, {37, 97, 32, false, false},
                          {64, 256, 32, false, false}, {50, 7, 16, true, false},  {64, 613, 64, false, true},
                          {96, 514, 32, false, true},  {33, 1031, 32, true, false}, {6, 4, 8, false, false}};
  for (const Shape& sh : shapes) {
    const PanelLayout L{sh.N, sh.K, sh.NR, sh.rowTail, DType::F32, 0, 1, sh.gated};
    SCOPED_TRACE(::testing::Message() << "N " << L.N << " K " << L.K << " NR " << L.NR
                                      << (sh.rowTail ? " row tail" : "") << (L.gated ? " gated" : ""));
    std::vector<float> W(size_t(L.N * L.K));
    for (size_t i = 0; i < W.size(); ++i) W[i] = float(i) + 0.25f; // distinct: a misplaced weight shows
    std::vector<float> got(size_t(L.totalElements()), -1.0f);
    codegen::packWeightsPanel(L, W.data(), got.data());
    std::vector<float> want(got.size(), 0.0f); // padding is zero
    for (int64_t n = 0; n < L.N; ++n)
      for (int64_t k = 0; k < L.K; ++k) want[size_t(L.offset(n, k))] = W[size_t(L.sourceRow(n) * L.K + k)];
    EXPECT_EQ(got, want);
  }
}

// q = w / s rounded to the nearest integer, ties to even: checked against std::nearbyint
// with the scale made exactly 1 (the row's largest weight is the limit), over ties,
// near-ties, -0 and both limits, in the packer's vector body
// (16 at a time: 8-lane divisions where the host has AVX2, else 4-lane) and its tail.
TEST(PackWeights, QuantisesToTheNearestIntegerTiesToEven) {
  for (const DType type : {DType::I8, DType::I4}) {
    const float limit = type == DType::I8 ? 127.0f : 7.0f;
    const int64_t K = 45; // a group of 32 (i4) or the row: two vector blocks, then a tail
    const PanelLayout L{1, K, 16, false, type, type == DType::I4 ? K : 0};
    std::vector<float> W(static_cast<size_t>(K));
    W[0] = limit; // s = limit / limit = 1
    const float picks[] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.5f, -3.5f, 0.49999997f, 0.50000006f,
                           -6.5f, 6.5f, 2.4999998f, -0.0f, 1.0f, 5.5f};
    for (int64_t k = 1; k < K; ++k) W[size_t(k)] = picks[size_t(k) % std::size(picks)] * (type == DType::I8 ? 17 : 1);
    W[20] = -limit, W[44] = 3.5f; // the tail's last
    const std::vector<float> stored = codegen::storedWeightValues(L, W.data(), {});
    for (int64_t k = 0; k < K; ++k)
      EXPECT_EQ(stored[size_t(k)], std::nearbyint(W[size_t(k)]))
          << dtypeName(type) << " weight " << k << " = " << W[size_t(k)];
  }
}

// The same with scales that are not powers of two: every weight's q equals round-to-
// nearest-even of the f32 quotient fl(w / s), for weights within a few ulp of
// (n + 1/2) · s at every n of the range, and for random ones; i4 in one group and in
// groups of 32 (held in registers), each group's largest weight ±the row's.
TEST(PackWeights, QuotientsNearAHalfRoundAsTheDivisionDoes) {
  std::mt19937 rng(7);
  for (const DType type : {DType::I8, DType::I4}) {
    const float limit = type == DType::I8 ? 127.0f : 7.0f;
    for (const float largest : {1.2345f, 0.0371f, 3.3f}) {
      const float s = type == DType::I4 ? bf16ToFloat(floatToBf16(largest / limit)) : largest / limit;
      std::vector<float> row = {largest};
      for (int n = -int(limit); n < int(limit); ++n)
        for (int ulps = -3; ulps <= 3; ++ulps) {
          float w = (float(n) + 0.5f) * s;
          for (int u = 0; u < std::abs(ulps); ++u) w = std::nextafter(w, ulps < 0 ? -1e30f : 1e30f);
          if (std::fabs(w) <= largest) row.push_back(w);
        }
      std::uniform_real_distribution<float> any(-largest, largest);
      while (row.size() % 32 != 0 || row.size() < 2048) row.push_back(any(rng));
      const int64_t K = int64_t(row.size());
      for (const int64_t group : {K, int64_t(32)}) {
        if (type == DType::I8 && group != K) continue;
        if (group != K) // the same scale in every group
          for (int64_t g = 0; g < K / group; ++g) row[size_t(g * group + g % 7)] = g % 2 ? -largest : largest;
        const PanelLayout L{1, K, 16, false, type, type == DType::I4 ? group : 0};
        const std::vector<float> stored = codegen::storedWeightValues(L, row.data(), {});
        for (int64_t k = 0; k < K; ++k) {
          // (+ 0: the stored q is an integer, whose zero is +0)
          const float q = std::clamp(std::nearbyint(row[size_t(k)] / s), -limit, limit) + 0.0f;
          EXPECT_EQ(floatBits(stored[size_t(k)]), floatBits(q * s))
              << dtypeName(type) << " group " << group << ", s = " << s << ", weight " << k << " = " << row[size_t(k)]
              << " / s = " << row[size_t(k)] / s;
        }
      }
    }
  }
}

TEST(PackWeights, NamesTheFirstWeightItCannotStore) {
  const PanelLayout f16{3, 40, 16, false, DType::F16}, i4{3, 40, 16, false, DType::I4, 8};
  std::vector<float> W(120, 0.5f);
  W[2 * 40 + 3] = NAN; // row 2
  W[1 * 40 + 39] = 70000.0f; // row 1, the last step: first in row-major order
  std::vector<unsigned char> out(size_t(f16.totalBytes()));
  try {
    codegen::packWeightsPanel(f16, W.data(), out.data());
    FAIL() << "no error";
  } catch (const std::domain_error& e) {
    EXPECT_STREQ(e.what(), "weight [1, 39] = 70000 is beyond f16's range (±65504)");
  }
  out.assign(size_t(i4.totalBytes()), 0);
  try {
    codegen::packWeightsPanel(i4, W.data(), out.data()); // i4 holds 70000 (scaled): the NaN is first
    FAIL() << "no error";
  } catch (const std::domain_error& e) {
    EXPECT_STREQ(e.what(), "weight [2, 3] is nan, which i4 cannot store");
  }
  // bf16 rounds FLT_MAX to infinity (its largest finite value is 0x1.fep127): refused,
  // as f16 beyond ±65504, while that largest value itself is stored.
  const PanelLayout bf16{3, 40, 16, false, DType::BF16};
  std::vector<float> big(120, 0x1.fep127f);
  out.assign(size_t(bf16.totalBytes()), 0);
  EXPECT_NO_THROW(codegen::packWeightsPanel(bf16, big.data(), out.data()));
  big[0 * 40 + 7] = std::numeric_limits<float>::max();
  try {
    codegen::packWeightsPanel(bf16, big.data(), out.data());
    FAIL() << "no error";
  } catch (const std::domain_error& e) {
    EXPECT_STREQ(e.what(), "weight [0, 7] = 3.4028235e+38 is beyond bf16's range (±3.3895314e+38)");
  }
}

} // namespace
} // namespace nnc::testing
