// The attention and rotary-embedding kernels against a double-precision reference that
// follows the specs' formulas (KernelSpec.h), on every CPU row this host runs: head
// sizes around the vector widths (masked tails), sequences of 1, primes and lengths
// past the row block, grouped K/V heads, causal and full masks, a `past` offset with
// kvStride past the queries (a cache), q/k/v interleaved in one buffer at column
// offsets, unit ranges split as threads run them, and buffers flush against guard pages.
// The last position of each sequence (a decoder's prefill) on every row too.
// A KV cache (head-major planes) stored as f32, f16, bf16 or i8: the append kernel
// writes the bits the host reference rounds to, each head vector in its plane, and
// attention over it equals the reference over the widened values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "RowEngines.h"
#include "compiler/codegen/AttentionEmitter.h"
#include "compiler/codegen/KvAppendEmitter.h"
#include "compiler/codegen/LastPositionEmitter.h"
#include "compiler/codegen/RopeEmitter.h"
#include "runtime/io/HalfFloat.h"

namespace nnc::testing {
namespace {

using codegen::AttentionKernelFn;
using codegen::AttentionSpec;
using codegen::RopeKernelFn;
using codegen::RopeSpec;

// out[b·seq + i, h·hd + c] per AttentionSpec, in double.
std::vector<double> referenceAttention(const AttentionSpec& s, const std::vector<float>& q,
                                       const std::vector<float>& kv, int64_t past) {
  const int64_t hd = s.headDim, group = s.heads / s.kvHeads, kvLen = past + s.seq;
  std::vector<double> out(size_t(s.batch * s.seq * s.outLd), 0.0);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.seq; ++i) {
        const int64_t g = h / group, keys = s.causal ? past + i + 1 : kvLen;
        const float* qi = &q[size_t((b * s.seq + i) * s.qLd + s.qCol + h * hd)];
        std::vector<double> p(static_cast<size_t>(keys));
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < keys; ++j) {
          const float* kj = &kv[size_t((b * s.kvStride + j) * s.kvLd + s.kCol + g * hd)];
          double dot = 0;
          for (int64_t c = 0; c < hd; ++c) dot += double(qi[c]) * kj[c];
          p[size_t(j)] = dot * s.scale;
          mx = std::max(mx, p[size_t(j)]);
        }
        for (auto& x : p) sum += (x = std::exp(x - mx));
        for (int64_t c = 0; c < hd; ++c) {
          double acc = 0;
          for (int64_t j = 0; j < keys; ++j)
            acc += p[size_t(j)] * kv[size_t((b * s.kvStride + j) * s.kvLd + s.vCol + g * hd + c)];
          out[size_t((b * s.seq + i) * s.outLd + h * hd + c)] = acc / sum;
        }
      }
  return out;
}

struct Case {
  int64_t batch, seq, heads, kvHeads, headDim;
  bool causal;
  int64_t past = 0;
};

TEST(Attention, MatchesTheReference) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const Case cases[] = {
      {1, 1, 1, 1, 1, true},   {1, 1, 2, 1, 8, false},  {2, 5, 4, 2, 16, true}, {1, 17, 4, 2, 16, true},
      {3, 17, 6, 6, 8, false}, {1, 7, 3, 1, 13, true},  {2, 31, 2, 2, 64, true}, {1, 33, 8, 2, 20, false},
      {1, 4, 2, 2, 17, true},  {2, 3, 4, 4, 33, true, 9}, {1, 1, 8, 2, 64, true, 40}, {1, 6, 2, 1, 24, false, 5},
      // one query (decoding): keys below, at and past a vector multiple, head tails
      {2, 1, 6, 3, 24, true, 36}, {1, 1, 4, 1, 64, false, 100}, {3, 1, 4, 2, 13, true, 15}, {1, 1, 2, 2, 5, true, 31},
      // one query, more heads in a group than one block takes: whole blocks, and a tail
      {1, 1, 24, 1, 8, false, 9}, {2, 1, 20, 2, 16, true, 23},
      // one query over hundreds of keys (score rows past L1), also in a tail block
      {1, 1, 8, 2, 64, true, 600}, {2, 1, 4, 2, 13, false, 511}, {1, 1, 24, 1, 8, true, 300},
  };
  for (const RowEngine& row : executableRows()) {
    for (const Case& c : cases) {
      AttentionSpec s;
      s.batch = c.batch, s.seq = c.seq, s.heads = c.heads, s.kvHeads = c.kvHeads, s.headDim = c.headDim;
      s.causal = c.causal;
      s.kvStride = c.seq + c.past + (c.past ? 3 : 0); // a cache keeps spare rows
      const int64_t d = c.heads * c.headDim, kvDim = c.kvHeads * c.headDim;
      // q in its own buffer with one spare column on each side; k and v interleaved in one
      s.qLd = d + 2, s.qCol = 1;
      s.kvLd = 2 * kvDim + 1, s.kCol = 1, s.vCol = 1 + kvDim;
      s.outLd = d + 3;
      s.scale = 1.0 / std::sqrt(double(c.headDim));
      auto f = reinterpret_cast<AttentionKernelFn>(row.jit->kernel(s));
      GuardedBuffer q(size_t(c.batch * c.seq * s.qLd), true), kv(size_t(c.batch * s.kvStride * s.kvLd), true);
      GuardedBuffer scratch(size_t(s.units() * s.scratchPerUnit()), true), out(size_t(c.batch * c.seq * s.outLd), true);
      for (size_t i = 0; i < q.size(); ++i) q.data()[i] = normal(rng);
      for (size_t i = 0; i < kv.size(); ++i) kv.data()[i] = normal(rng);
      const std::vector<double> want = referenceAttention(s, q.values(), kv.values(), c.past);
      for (int64_t split : {int64_t(0), s.units() / 2}) {
        for (size_t i = 0; i < out.size(); ++i) out.data()[i] = -7.0f;
        for (size_t i = 0; i < scratch.size(); ++i) scratch.data()[i] = NAN; // nothing reads it unwritten
        f(q.data(), kv.data(), kv.data(), scratch.data(), out.data(), 0, split, c.past);
        f(q.data(), kv.data(), kv.data(), scratch.data(), out.data(), split, s.units(), c.past);
        for (int64_t r = 0; r < c.batch * c.seq; ++r)
          for (int64_t col = 0; col < s.outLd; ++col) {
            const float got = out.data()[r * s.outLd + col];
            if (col >= d) { // past the heads: untouched
              ASSERT_EQ(got, -7.0f) << row.family << " " << s.key() << " row " << r << " col " << col;
              continue;
            }
            const double w = want[size_t(r * s.outLd + col)];
            ASSERT_NEAR(got, w, 2e-6 * (1 + std::abs(w)) * std::sqrt(double(c.headDim)))
                << row.family << " " << s.key() << " past " << c.past << " row " << r << " col " << col;
          }
      }
    }
  }
}

// Causal attention: a NaN or inf in a later position's value or key never reaches an
// earlier row — rows before it give the same bits as with that position finite, also
// the rows that share its block of queries (a decode step, which sees only the keys
// before it, gives them so). It reached them as 0 · NaN in the block's weighted sum.
TEST(Attention, ALaterPositionsNaNNeverReachesAnEarlierRow) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const RowEngine& row : executableRows())
    for (int64_t past : {int64_t(0), int64_t(5)}) {
      AttentionSpec s;
      s.batch = 1, s.seq = 13, s.heads = 2, s.kvHeads = 1, s.headDim = 8, s.causal = true;
      s.kvStride = s.seq + past;
      s.qLd = s.outLd = 16, s.qCol = 0;
      s.kvLd = 16, s.kCol = 0, s.vCol = 8;
      s.scale = 1.0 / std::sqrt(8.0);
      auto f = reinterpret_cast<AttentionKernelFn>(row.jit->kernel(s));
      std::vector<float> q(size_t(s.seq * s.qLd)), kv(size_t(s.kvStride * s.kvLd));
      for (float& v : q) v = normal(rng);
      for (float& v : kv) v = normal(rng);
      std::vector<float> scratch(size_t(s.units() * s.scratchPerUnit())), clean(size_t(s.seq * s.outLd));
      f(q.data(), kv.data(), kv.data(), scratch.data(), clean.data(), 0, s.units(), past);
      for (int64_t at : {int64_t(5), int64_t(6), int64_t(12)}) // query rows 5, 6 and 12 (blocks start anywhere)
        for (int64_t col : {s.vCol + 3, s.kCol + 2})
          for (float bad : {NAN, INFINITY}) {
            std::vector<float> poisoned = kv, out(clean.size());
            poisoned[size_t((past + at) * s.kvLd + col)] = bad;
            f(q.data(), poisoned.data(), poisoned.data(), scratch.data(), out.data(), 0, s.units(), past);
            for (int64_t r = 0; r < at; ++r)
              ASSERT_EQ(std::memcmp(&out[size_t(r * s.outLd)], &clean[size_t(r * s.outLd)], 16 * sizeof(float)), 0)
                  << row.family << " past " << past << ": " << bad << " at position " << at << " column " << col
                  << " changed row " << r;
            if (std::isnan(bad)) { // the row at the poisoned position itself sees it (an inf key may score −inf)
              EXPECT_TRUE(std::any_of(&out[size_t(at * s.outLd)], &out[size_t(at * s.outLd + 16)],
                                      [](float v) { return std::isnan(v); }))
                  << row.family << " past " << past << ": NaN at position " << at << " column " << col;
            }
          }
    }
}

TEST(Attention, RefusesSpecsItCannotBuild) {
  AttentionSpec s;
  s.seq = 4, s.kvStride = 4, s.heads = 4, s.kvHeads = 3, s.headDim = 8, s.qLd = s.kvLd = s.outLd = 96;
  s.kCol = 32, s.vCol = 56;
  EXPECT_THROW(codegen::validateAttentionSpec(s), std::invalid_argument); // 3 does not divide 4
  s.kvHeads = 2;
  EXPECT_NO_THROW(codegen::validateAttentionSpec(s));
  s.kvStride = 3;
  EXPECT_THROW(codegen::validateAttentionSpec(s), std::invalid_argument); // keys do not fit
  s.kvStride = 4, s.vCol = 90;
  EXPECT_THROW(codegen::validateAttentionSpec(s), std::invalid_argument); // v's heads run past the row
  s.vCol = 56, s.kvType = DType::F16;
  EXPECT_THROW(codegen::validateAttentionSpec(s), std::invalid_argument); // f16 rows: only a cache
  s.kvCache = true, s.kvLd = s.kCol = s.vCol = 0;                         // a cache's planes: no columns
  EXPECT_NO_THROW(codegen::validateAttentionSpec(s));
}

// x1' = x1·cos − x2·sin, x2' = x2·cos + x1·sin on the first `heads` slices.
TEST(Rope, RotatesThePairsOfEveryHead) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const RowEngine& row : executableRows()) {
    for (int64_t hd : {2, 6, 16, 34, 64, 130}) {
      const int64_t seq = 5, batch = 2, heads = 3, ld = heads * hd + 5, past = 2, positions = past + seq;
      RopeSpec s{batch * seq, seq, ld, heads, hd};
      auto f = reinterpret_cast<RopeKernelFn>(row.jit->kernel(s));
      GuardedBuffer x(size_t(s.rows * ld), true), table(size_t(positions * hd), true);
      for (size_t i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
      for (size_t i = 0; i < table.size(); ++i) table.data()[i] = normal(rng);
      const std::vector<float> before = x.values();
      f(x.data(), table.data(), 0, 3, past);
      f(x.data(), table.data(), 3, s.rows, past);
      const int64_t half = hd / 2;
      for (int64_t r = 0; r < s.rows; ++r) {
        const float* t = table.data() + (past + r % seq) * hd;
        for (int64_t col = 0; col < ld; ++col) {
          const float* in = &before[size_t(r * ld)];
          double want = in[col];
          if (col < heads * hd) {
            const int64_t h = col / hd, i = col % hd % half, base = h * hd;
            const double x1 = in[base + i], x2 = in[base + half + i], c = t[i], sn = t[half + i];
            want = col % hd < half ? x1 * c - x2 * sn : x2 * c + x1 * sn;
          }
          ASSERT_NEAR(x.data()[r * ld + col], want, 1e-6 * (1 + std::abs(want)))
              << row.family << " hd " << hd << " row " << r << " col " << col;
        }
      }
    }
  }
}

// out[b, :] = x[b·seq + seq − 1, :]; nothing else written.
TEST(LastPosition, CopiesEachSequencesLastRow) {
  for (const RowEngine& row : executableRows())
    for (int64_t cols : {1, 7, 16, 33, 64})
      for (int64_t seq : {1, 5}) {
        const int64_t batch = 3;
        codegen::LastPositionSpec s{batch, seq, cols};
        auto f = reinterpret_cast<codegen::LastPositionKernelFn>(row.jit->kernel(s));
        GuardedBuffer x(size_t(batch * seq * cols), true), out(size_t(batch * cols), true);
        for (size_t i = 0; i < x.size(); ++i) x.data()[i] = float(i) + 0.25f;
        f(x.data(), out.data(), 0, 1);
        f(x.data(), out.data(), 1, batch);
        for (int64_t b = 0; b < batch; ++b)
          for (int64_t c = 0; c < cols; ++c)
            ASSERT_EQ(out.data()[b * cols + c], x.data()[(b * seq + seq - 1) * cols + c])
                << row.family << " " << s.key() << " batch " << b << " col " << c;
      }
}

// One head vector as the KV append stores it at a position (KvCacheLayout in
// KernelSpec.h): its value bytes, its i8 scale, and the f32 values attention reads.
struct StoredVector {
  std::vector<uint8_t> bytes;
  float scale = 0;
  std::vector<float> values;
};
StoredVector referenceVector(const codegen::KvCacheLayout& l, const float* x) {
  const int64_t hd = l.headDim;
  StoredVector out{std::vector<uint8_t>(size_t(l.valueBytes()), 0), 0.0f, std::vector<float>(x, x + hd)};
  if (l.type == DType::F32) std::memcpy(out.bytes.data(), x, size_t(4 * hd));
  if (l.type == DType::F16 || l.type == DType::BF16)
    for (int64_t c = 0; c < hd; ++c) {
      const uint16_t h = l.type == DType::F16 ? floatToHalf(x[c]) : floatToBf16(x[c]);
      std::memcpy(out.bytes.data() + 2 * c, &h, 2);
      out.values[size_t(c)] = l.type == DType::F16 ? halfToFloat(h) : bf16ToFloat(h);
    }
  if (l.type == DType::I8) {
    float m = 0;
    for (int64_t c = 0; c < hd; ++c) m = std::max(m, std::fabs(x[c]));
    const float inverse = m > 0 ? 127.0f / m : 0.0f;
    out.scale = m / 127.0f;
    for (int64_t c = 0; c < hd; ++c) {
      const auto q = int8_t(std::nearbyint(x[c] * inverse));
      out.bytes[size_t(c)] = uint8_t(q);
      out.values[size_t(c)] = float(q) * out.scale;
    }
  }
  return out;
}
// Where vector t of batch entry b at a position keeps its values and its i8 scale.
uint8_t* valuesAt(const codegen::KvCacheLayout& l, void* cache, int64_t b, int64_t t, int64_t position) {
  return static_cast<uint8_t*>(cache) + b * l.entryBytes() + t * l.planeBytes() + l.valuesOffset() +
         position * l.valueBytes();
}
uint8_t* scaleAt(const codegen::KvCacheLayout& l, void* cache, int64_t b, int64_t t, int64_t position) {
  return static_cast<uint8_t*>(cache) + b * l.entryBytes() + t * l.planeBytes() + 4 * position;
}

// Values across magnitudes: f16 subnormals and overflow, bf16 ties, an all-zero head.
std::vector<float> kvValues(size_t n, std::mt19937& rng, int64_t zeroFrom, int64_t zeroTo) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float magnitudes[] = {1.0f, 1e-6f, 3e-5f, 70000.0f, 0.25f, 300.0f};
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = normal(rng) * magnitudes[i / 7 % 6];
  for (int64_t i = zeroFrom; i < zeroTo; ++i) v[size_t(i)] = 0.0f;
  return v;
}

// Every head vector of every new row lands in its plane at its position, in the bits the
// host rounds to; every other byte of the cache (other positions, value padding) stays.
TEST(KvAppend, StoresEachHeadVectorInItsPlaneAsTheHostRounds) {
  std::mt19937 rng(11);
  for (const RowEngine& row : executableRows())
    for (DType type : {DType::F32, DType::F16, DType::BF16, DType::I8})
      for (int64_t hd : {1, 5, 8, 24, 33, 64})
        for (int64_t kvHeads : {1, 2}) {
          const int64_t cols = 2 * kvHeads * hd, batch = 2, seq = 3, context = 7, past = 4;
          const int64_t ld = cols + 3, col = 1;
          codegen::KvAppendSpec s{batch * seq, seq, context, ld, col, cols, type, hd};
          const codegen::KvCacheLayout l = s.layout();
          ASSERT_EQ(l.kvHeads, kvHeads);
          auto f = reinterpret_cast<codegen::KvAppendKernelFn>(row.jit->kernel(s));
          GuardedBuffer x(size_t(batch * seq * ld), true), cache(size_t(batch * l.entryBytes() / 4), true);
          x.assign(kvValues(x.size(), rng, col, col + hd)); // row 0's first head vector: zeros
          std::memset(cache.data(), 0xab, cache.size() * 4);
          std::vector<uint8_t> want(cache.size() * 4, 0xab);
          for (int64_t b = 0; b < batch; ++b)
            for (int64_t i = 0; i < seq; ++i)
              for (int64_t t = 0; t < 2 * kvHeads; ++t) {
                const StoredVector v = referenceVector(l, x.data() + (b * seq + i) * ld + col + t * hd);
                std::memcpy(valuesAt(l, want.data(), b, t, past + i), v.bytes.data(), size_t(bytesFor(hd, type)));
                if (type == DType::I8) std::memcpy(scaleAt(l, want.data(), b, t, past + i), &v.scale, 4);
              }
          f(x.data(), cache.data(), 0, 1, past);
          f(x.data(), cache.data(), 1, batch * seq, past);
          const auto* got = reinterpret_cast<const uint8_t*>(cache.data());
          for (size_t k = 0; k < want.size(); ++k) {
            const int64_t plane = int64_t(k) % l.entryBytes() / l.planeBytes();
            const int64_t inPlane = int64_t(k) % l.planeBytes() - l.valuesOffset();
            const bool padding = inPlane >= 0 && inPlane % l.valueBytes() >= bytesFor(hd, type); // unspecified
            if (padding) continue;
            ASSERT_EQ(got[k], want[k]) << row.family << " " << s.key() << " byte " << k << " (batch "
                                       << int64_t(k) / l.entryBytes() << ", plane " << plane << ")";
          }
        }
}

TEST(KvAppend, RefusesColumnsThatAreNotWholeHeads) {
  codegen::KvAppendSpec s{4, 2, 8, 40, 0, 32, DType::F32, 8};
  EXPECT_NO_THROW(codegen::validateKvAppendSpec(s)); // 2 k heads and 2 v heads of 8
  s.cols = 24;                                       // 3 head vectors: k and v differ
  EXPECT_THROW(codegen::validateKvAppendSpec(s), std::invalid_argument);
  s.cols = 32, s.headDim = 5;
  EXPECT_THROW(codegen::validateKvAppendSpec(s), std::invalid_argument);
}

// Attention over a cache in every dtype (planes as KvCacheLayout) equals the reference
// over the values it stores, widened; f32 caches end on a guard page.
TEST(Attention, ReadsACacheInEveryDType) {
  std::mt19937 rng(13);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const Case cases[] = {{1, 1, 8, 2, 64, true, 40}, {2, 3, 4, 4, 33, true, 9},  {1, 5, 6, 2, 5, true, 2},
                        {2, 1, 2, 1, 16, true, 0},  {2, 1, 4, 2, 20, true, 17}, {3, 1, 4, 2, 13, true, 15},
                        {1, 17, 4, 2, 16, true, 3}, {1, 1, 24, 1, 8, true, 9},  {1, 1, 8, 2, 64, true, 400},
                        {2, 1, 4, 2, 20, true, 270}};
  for (const RowEngine& row : executableRows())
    for (DType type : {DType::F32, DType::F16, DType::BF16, DType::I8})
      for (const Case& c : cases) {
        const int64_t d = c.heads * c.headDim, kvDim = c.kvHeads * c.headDim, kvStride = c.past + c.seq + 2;
        AttentionSpec s;
        s.batch = c.batch, s.seq = c.seq, s.heads = c.heads, s.kvHeads = c.kvHeads, s.headDim = c.headDim;
        s.causal = c.causal, s.kvStride = kvStride;
        s.qLd = d, s.qCol = 0, s.outLd = d;
        s.kvCache = true, s.kvType = type;
        s.scale = 1.0 / std::sqrt(double(c.headDim));
        const codegen::KvCacheLayout l = s.cacheLayout();
        AttentionSpec wide = s; // the reference reads the widened values as f32 rows
        wide.kvCache = false, wide.kvType = DType::F32, wide.kvLd = 2 * kvDim, wide.kCol = 0, wide.vCol = kvDim;
        GuardedBuffer q(size_t(c.batch * c.seq * d), true), cache(size_t(c.batch * l.entryBytes() / 4), true);
        GuardedBuffer scratch(size_t(s.units() * s.scratchPerUnit()), true), out(size_t(c.batch * c.seq * d), true);
        for (size_t i = 0; i < q.size(); ++i) q.data()[i] = normal(rng);
        std::vector<float> widened(size_t(c.batch * kvStride * 2 * kvDim));
        for (int64_t b = 0; b < c.batch; ++b)
          for (int64_t j = 0; j < kvStride; ++j)
            for (int64_t t = 0; t < 2 * c.kvHeads; ++t) {
              std::vector<float> x(size_t(c.headDim));
              for (float& v : x) v = normal(rng);
              const StoredVector stored = referenceVector(l, x.data());
              std::memcpy(valuesAt(l, cache.data(), b, t, j), stored.bytes.data(), stored.bytes.size());
              if (type == DType::I8) std::memcpy(scaleAt(l, cache.data(), b, t, j), &stored.scale, 4);
              std::copy(stored.values.begin(), stored.values.end(),
                        widened.begin() + (b * kvStride + j) * 2 * kvDim + t * c.headDim);
            }
        const std::vector<double> want = referenceAttention(wide, q.values(), widened, c.past);
        auto f = reinterpret_cast<AttentionKernelFn>(row.jit->kernel(s));
        for (int64_t split : {int64_t(0), s.units() / 2}) {
          for (size_t i = 0; i < out.size(); ++i) out.data()[i] = NAN;
          f(q.data(), cache.data(), cache.data(), scratch.data(), out.data(), 0, split, c.past);
          f(q.data(), cache.data(), cache.data(), scratch.data(), out.data(), split, s.units(), c.past);
          for (size_t i = 0; i < out.size(); ++i)
            ASSERT_NEAR(out.data()[i], want[i], 2e-6 * (1 + std::abs(want[i])) * std::sqrt(double(c.headDim)))
                << row.family << " " << s.key() << " element " << i;
        }
      }
}

} // namespace
} // namespace nnc::testing
