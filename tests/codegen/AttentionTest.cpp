// The attention and rotary-embedding kernels against a double-precision reference that
// follows the specs' formulas (KernelSpec.h), on every CPU row this host runs: head
// sizes around the vector widths (masked tails), sequences of 1, primes and lengths
// past the row block, grouped K/V heads, causal and full masks, a `past` offset with
// kvStride past the queries (a cache), q/k/v interleaved in one buffer at column
// offsets, unit ranges split as threads run them, and buffers flush against guard pages.
// The last position of each sequence (a decoder's prefill) on every row too.
// A KV cache stored as f16, bf16 or i8: the append kernel writes the bits the host
// reference rounds to, and attention over it equals the reference over the widened values.
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

// cache[(b·context + past + i)·cols + c] = x[(b·seq + i)·ld + col + c]; nothing else written.
TEST(KvAppend, CopiesEachRowToItsPosition) {
  for (const RowEngine& row : executableRows()) {
    for (int64_t cols : {1, 7, 16, 33, 64}) {
      const int64_t batch = 3, seq = 4, context = 9, past = 5, ld = cols + 6, col = 2;
      codegen::KvAppendSpec s{batch * seq, seq, context, ld, col, cols};
      auto f = reinterpret_cast<codegen::KvAppendKernelFn>(row.jit->kernel(s));
      GuardedBuffer x(size_t(batch * seq * ld), true), cache(size_t(batch * context * cols), true);
      for (size_t i = 0; i < x.size(); ++i) x.data()[i] = float(i) + 0.5f;
      for (size_t i = 0; i < cache.size(); ++i) cache.data()[i] = -1.0f;
      f(x.data(), cache.data(), 0, 5, past);
      f(x.data(), cache.data(), 5, batch * seq, past);
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t p = 0; p < context; ++p)
          for (int64_t c = 0; c < cols; ++c) {
            const int64_t i = p - past;
            const float want = i >= 0 && i < seq ? x.data()[(b * seq + i) * ld + col + c] : -1.0f;
            ASSERT_EQ(cache.data()[(b * context + p) * cols + c], want)
                << row.family << " cols " << cols << " batch " << b << " position " << p << " col " << c;
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

// The cache row the KV append writes for x[0, cols), per KvAppendSpec (KernelSpec.h),
// and the f32 values attention reads from it.
struct StoredRow {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};
StoredRow referenceRow(const codegen::KvAppendSpec& s, const float* x) {
  StoredRow out{std::vector<uint8_t>(size_t(s.rowBytes()), 0), std::vector<float>(size_t(s.cols))};
  uint8_t* values = out.bytes.data() + s.firstElement();
  for (int64_t c = 0; c < s.cols; ++c) {
    if (s.type == DType::F16 || s.type == DType::BF16) {
      const uint16_t h = s.type == DType::F16 ? floatToHalf(x[c]) : floatToBf16(x[c]);
      std::memcpy(values + 2 * c, &h, 2);
      out.values[size_t(c)] = s.type == DType::F16 ? halfToFloat(h) : bf16ToFloat(h);
    }
  }
  if (s.type != DType::I8) return out;
  for (int64_t t = 0; t < s.vectors(); ++t) {
    float m = 0;
    for (int64_t c = t * s.headDim; c < (t + 1) * s.headDim; ++c) m = std::max(m, std::fabs(x[c]));
    const float scale = m / 127.0f, inverse = m > 0 ? 127.0f / m : 0.0f;
    std::memcpy(out.bytes.data() + 4 * t, &scale, 4);
    for (int64_t c = t * s.headDim; c < (t + 1) * s.headDim; ++c) {
      const auto q = int8_t(std::nearbyint(x[c] * inverse));
      values[c] = uint8_t(q);
      out.values[size_t(c)] = float(q) * scale;
    }
  }
  return out;
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

TEST(KvAppend, StoresEachDTypeAsTheHostRounds) {
  std::mt19937 rng(11);
  for (const RowEngine& row : executableRows())
    for (DType type : {DType::F16, DType::BF16, DType::I8})
      for (int64_t hd : {1, 5, 8, 24, 64}) {
        const int64_t kvHeads = 2, cols = 2 * kvHeads * hd, batch = 2, seq = 3, context = 7, past = 4;
        const int64_t ld = cols + 3, col = 1;
        codegen::KvAppendSpec s{batch * seq, seq, context, ld, col, cols, type, hd};
        auto f = reinterpret_cast<codegen::KvAppendKernelFn>(row.jit->kernel(s));
        GuardedBuffer x(size_t(batch * seq * ld), true), cache(size_t(batch * context * s.rowBytes() / 4), true);
        x.assign(kvValues(x.size(), rng, col, col + hd)); // row 0's first head vector: zeros
        std::memset(cache.data(), 0xab, cache.size() * 4);
        f(x.data(), cache.data(), 0, 1, past);
        f(x.data(), cache.data(), 1, batch * seq, past);
        const auto* bytes = reinterpret_cast<const uint8_t*>(cache.data());
        for (int64_t b = 0; b < batch; ++b)
          for (int64_t p = 0; p < context; ++p) {
            const int64_t i = p - past;
            const uint8_t* got = bytes + (b * context + p) * s.rowBytes();
            std::vector<uint8_t> want(size_t(s.rowBytes()), 0xab);
            if (i >= 0 && i < seq) want = referenceRow(s, x.data() + (b * seq + i) * ld + col).bytes;
            for (int64_t k = 0; k < s.firstElement() + bytesFor(cols, type); ++k) // padding: unspecified
              ASSERT_EQ(got[k], want[size_t(k)]) << row.family << " " << s.key() << " batch " << b << " position "
                                                  << p << " byte " << k;
          }
      }
}

TEST(Attention, ReadsACacheStoredBelowF32) {
  std::mt19937 rng(13);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const Case cases[] = {{1, 1, 8, 2, 64, true, 40}, {2, 3, 4, 4, 33, true, 9}, {1, 5, 6, 2, 5, true, 2},
                        {2, 1, 2, 1, 16, true, 0},  {2, 1, 4, 2, 20, true, 17}};
  for (const RowEngine& row : executableRows())
    for (DType type : {DType::F16, DType::BF16, DType::I8})
      for (const Case& c : cases) {
        const int64_t d = c.heads * c.headDim, kvDim = c.kvHeads * c.headDim, kvStride = c.past + c.seq + 2;
        codegen::KvAppendSpec layout{0, 1, kvStride, 2 * kvDim, 0, 2 * kvDim, type, c.headDim};
        AttentionSpec s;
        s.batch = c.batch, s.seq = c.seq, s.heads = c.heads, s.kvHeads = c.kvHeads, s.headDim = c.headDim;
        s.causal = c.causal, s.kvStride = kvStride;
        s.qLd = d, s.qCol = 0, s.outLd = d;
        s.kvType = type, s.kvLd = layout.rowElements(), s.kCol = layout.firstElement(), s.vCol = s.kCol + kvDim;
        s.scale = 1.0 / std::sqrt(double(c.headDim));
        AttentionSpec wide = s; // the reference reads the widened values as f32 rows
        wide.kvType = DType::F32, wide.kvLd = 2 * kvDim, wide.kCol = 0, wide.vCol = kvDim;
        GuardedBuffer q(size_t(c.batch * c.seq * d), true), cache(size_t(c.batch * kvStride * layout.rowBytes() / 4), true);
        GuardedBuffer scratch(size_t(s.units() * s.scratchPerUnit()), true), out(size_t(c.batch * c.seq * d), true);
        for (size_t i = 0; i < q.size(); ++i) q.data()[i] = normal(rng);
        std::vector<float> widened(size_t(c.batch * kvStride * 2 * kvDim));
        for (int64_t r = 0; r < c.batch * kvStride; ++r) {
          std::vector<float> x(size_t(2 * kvDim));
          for (float& v : x) v = normal(rng);
          StoredRow stored = referenceRow(layout, x.data());
          std::memcpy(reinterpret_cast<uint8_t*>(cache.data()) + r * layout.rowBytes(), stored.bytes.data(),
                      stored.bytes.size());
          std::copy(stored.values.begin(), stored.values.end(), widened.begin() + r * 2 * kvDim);
        }
        const std::vector<double> want = referenceAttention(wide, q.values(), widened, c.past);
        auto f = reinterpret_cast<AttentionKernelFn>(row.jit->kernel(s));
        f(q.data(), cache.data(), cache.data(), scratch.data(), out.data(), 0, s.units(), c.past);
        for (size_t i = 0; i < out.size(); ++i)
          ASSERT_NEAR(out.data()[i], want[i], 2e-6 * (1 + std::abs(want[i])) * std::sqrt(double(c.headDim)))
              << row.family << " " << s.key() << " element " << i;
      }
}

} // namespace
} // namespace nnc::testing
