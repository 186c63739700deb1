// Packing W[N][K] into NR-wide k-major panels (layout in PackLayout.h), in f32 or in a
// low-precision storage dtype (rounded, or quantised with per-channel / per-group scales).
#include "compiler/codegen/PackLayout.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <vector>

#include <cpuid.h>
#include <immintrin.h>

#include "runtime/io/HalfFloat.h"

namespace nnc::codegen {

namespace {
std::vector<const float*> rowPointers(const PanelLayout& L, const float* W) {
  std::vector<const float*> rows(size_t(L.N));
  for (int64_t n = 0; n < L.N; ++n) rows[size_t(n)] = W + n * L.K;
  return rows;
}

// Panel p's rows (its `width` channels' rows of W): copied into `copies` by `read` when
// it is set and takes them, else W's own.
const float* const* panelRows(const PanelLayout& L, const float* const* W, int64_t p, int64_t width,
                              const RowReader& read, std::vector<float>& copies, std::vector<const float*>& rows) {
  rows.resize(size_t(width));
  for (int64_t j = 0; j < width; ++j) rows[size_t(j)] = W[L.sourceRow(p * L.NR + j)];
  if (!read) return rows.data();
  copies.resize(size_t(width * L.K));
  if (!read(rows.data(), width, L.K, copies.data())) return rows.data();
  for (int64_t j = 0; j < width; ++j) rows[size_t(j)] = copies.data() + j * L.K;
  return rows.data();
}

void packRowsF32(const PanelLayout& L, const float* const* W, float* out, const RowReader& read) {
  const int64_t panels = L.hasRowTail() ? L.fullPanels() : L.panels();
  std::vector<float> copies;
  std::vector<const float*> pointers;
  for (int64_t p = 0; p < panels; ++p) {
    float* panel = out + p * L.panelElements();
    int64_t width = std::min<int64_t>(L.NR, L.N - p * L.NR);
    const float* const* from = panelRows(L, W, p, width, read, copies, pointers);
    int64_t k = 0;
#if defined(__SSE2__)
    // 4 channels × 4 k steps at a time, transposed in registers, with each of the NR
    // rows asked for 256 bytes ahead (NR streams at once are more than the hardware
    // prefetcher follows): one weight at a time, the panel took 0.54-1.0 ns a weight on
    // one core of the Zen 5 guest (the source from DRAM), now 0.47-0.57.
    for (; k + 4 <= L.K; k += 4) {
      float* rows = panel + k * L.NR;
      if (k % 16 == 0)
        for (int64_t j = 0; j < width; ++j)
          _mm_prefetch(reinterpret_cast<const char*>(from[size_t(j)] + k + 64), _MM_HINT_T0);
      int64_t j = 0;
      for (; j + 4 <= width; j += 4) {
        __m128 a = _mm_loadu_ps(from[size_t(j)] + k), b = _mm_loadu_ps(from[size_t(j + 1)] + k);
        __m128 c = _mm_loadu_ps(from[size_t(j + 2)] + k), d = _mm_loadu_ps(from[size_t(j + 3)] + k);
        _MM_TRANSPOSE4_PS(a, b, c, d);
        _mm_storeu_ps(rows + j, a);
        _mm_storeu_ps(rows + L.NR + j, b);
        _mm_storeu_ps(rows + 2 * L.NR + j, c);
        _mm_storeu_ps(rows + 3 * L.NR + j, d);
      }
      for (int64_t t = 0; t < 4; ++t) {
        for (int64_t r = j; r < width; ++r) rows[t * L.NR + r] = from[size_t(r)][k + t];
        std::fill(rows + t * L.NR + width, rows + (t + 1) * L.NR, 0.0f);
      }
    }
#endif
    for (; k < L.K; ++k) {
      float* row = panel + k * L.NR;
      for (int64_t j = 0; j < width; ++j) row[j] = from[size_t(j)][k];
      std::fill(row + width, row + L.NR, 0.0f);
    }
  }
  if (!L.hasRowTail()) return;
  for (int64_t j = 0; j < L.tailColumns(); ++j) {
    float* row = out + L.tailOffset() + j * L.tailStride();
    std::copy_n(W[L.sourceRow(L.fullPanels() * L.NR + j)], L.K, row);
    std::fill(row + L.K, row + L.tailStride(), 0.0f);
  }
}
} // namespace

void packWeightsPanelF32(const PanelLayout& L, const float* W, float* out) {
  packRowsF32(L, rowPointers(L, W).data(), out, {});
}

namespace {
constexpr float kHalfMax = 65504.0f;
constexpr float kBf16Max = 0x1.fep127f; // 0x7f7f: a larger weight would round to bf16 infinity

// x rounded to the nearest integer, ties to even, for |x| <= 2^22: adding and taking
// away 1.5 · 2^23 leaves no fraction bits (IEEE round to nearest even; std::nearbyint
// is a library call per weight on a baseline x86-64 build).
inline float roundEven(float x) {
  constexpr float kMagic = 0x1.8p23f;
  return (x + kMagic) - kMagic;
}

} // namespace

// With 8 running maxima: one chain of maxss waits on the last (4 cycles a weight),
// which made the scale search most of an i8/i4 load; GCC leaves the 8 lanes scalar,
// hence SSE2's 2 × 4. Exact: the order of the max does not change it.
float maxAbs(const float* p, int64_t n) {
  float m[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
#if defined(__SSE2__)
  const __m128 magnitude = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  __m128 m0 = _mm_setzero_ps(), m1 = _mm_setzero_ps();
  for (; i + 8 <= n; i += 8) {
    m0 = _mm_max_ps(m0, _mm_and_ps(_mm_loadu_ps(p + i), magnitude));
    m1 = _mm_max_ps(m1, _mm_and_ps(_mm_loadu_ps(p + i + 4), magnitude));
  }
  _mm_storeu_ps(m, m0);
  _mm_storeu_ps(m + 4, m1);
#endif
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) m[j] = std::max(m[j], std::fabs(p[i + j]));
  for (; i < n; ++i) m[0] = std::max(m[0], std::fabs(p[i]));
  return *std::max_element(m, m + 8);
}

namespace {

float storableLimit(const PanelLayout& L) {
  return L.type == DType::F16    ? kHalfMax
         : L.type == DType::BF16 ? kBf16Max
                                 : std::numeric_limits<float>::max();
}

// Whether every weight of a row is storable (not NaN or inf, and for f16 within
// ±65504, bf16 within ±3.39e38): 8 lanes of |w| <= limit, false for NaN (SSE2's cmpleps too; GCC leaves
// the bool lanes scalar, a third of an i4 load's own work).
bool rowStorable(const float* row, int64_t K, float limit) {
  bool fine[8] = {true, true, true, true, true, true, true, true};
  int64_t k = 0;
#if defined(__SSE2__)
  const __m128 magnitude = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff)), most = _mm_set1_ps(limit);
  __m128 ok = _mm_castsi128_ps(_mm_set1_epi32(-1));
  for (; k + 8 <= K; k += 8) {
    ok = _mm_and_ps(ok, _mm_cmple_ps(_mm_and_ps(_mm_loadu_ps(row + k), magnitude), most));
    ok = _mm_and_ps(ok, _mm_cmple_ps(_mm_and_ps(_mm_loadu_ps(row + k + 4), magnitude), most));
  }
  fine[0] = _mm_movemask_ps(ok) == 0xf;
#endif
  for (; k + 8 <= K; k += 8)
    for (int j = 0; j < 8; ++j) fine[j] &= std::fabs(row[k + j]) <= limit;
  for (; k < K; ++k) fine[0] &= std::fabs(row[k]) <= limit;
  return std::all_of(fine, fine + 8, [](bool f) { return f; });
}

// max |w| over w[0 .. n), and in `finite` whether every w is (|w| <= FLT_MAX fails for NaN
// and inf): a quantised group's check and its scale search in one read, the packer's
// first touch of the source, from memory (two passes and a call per group were a third
// of an i4 load's work).
float groupMax(const float* w, int64_t n, bool& finite) {
  finite = rowStorable(w, n, std::numeric_limits<float>::max());
  return maxAbs(w, n);
}
// The largest of m's 8 lanes.
__attribute__((target("avx2"))) inline float largestLane(__m256 m) {
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_max_ss(h, _mm_shuffle_ps(h, h, 1)));
}
__attribute__((target("avx2"))) float groupMaxAvx2(const float* w, int64_t n, bool& finite) {
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 most = _mm256_set1_ps(std::numeric_limits<float>::max());
  __m256 m = _mm256_setzero_ps(), ok = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_and_ps(_mm256_loadu_ps(w + i), magnitude);
    m = _mm256_max_ps(m, a);
    ok = _mm256_and_ps(ok, _mm256_cmp_ps(a, most, _CMP_LE_OQ));
  }
  float result = largestLane(m);
  finite = _mm256_movemask_ps(ok) == 0xff;
  for (; i < n; ++i) {
    finite &= std::fabs(w[i]) <= std::numeric_limits<float>::max();
    result = std::max(result, std::fabs(w[i]));
  }
  return result;
}

// Throws UnstorableWeight naming the first weight, in row-major order, that
// layout.type cannot store: NaN or inf, or f16 beyond ±65504.
void checkStorable(const PanelLayout& L, const float* const* W) {
  const float limit = storableLimit(L);
  for (int64_t n = 0; n < L.N; ++n) {
    const float* row = W[n];
    if (rowStorable(row, L.K, limit)) continue;
    for (int64_t k = 0; k < L.K; ++k) {
      if (!std::isfinite(row[k]))
        throw UnstorableWeight(n, k, fmt::format("is {}, which {} cannot store", row[k], dtypeName(L.type)));
      if (std::fabs(row[k]) > limit)
        throw UnstorableWeight(n, k, fmt::format("= {} is beyond {}'s range (±{})", row[k], dtypeName(L.type), limit));
    }
  }
}

// i8, i4: the scales, channel n's group g at n · groups + g (i8: one group of all K, or
// the tensor's when per tensor); s = max|w| / limit, for i4 rounded to the bf16 it is
// stored as (PackLayout.h), so that q is found with the scale the kernels multiply by.
// Filled row by row (quantizeRow), as the packer reads each row.
struct Scales {
  std::vector<float> values;
  int64_t groupSteps = 0, groups = 0;
  float limit = 0;
  bool perTensor = false;
  float tensorMax = 0; // per tensor: max |w| over all of W
  std::vector<float> tensorMaxOfRow; // per tensor, W rows of several tensors (PackOptions)
  bool bf16 = false;   // i4: the stored scales are bf16
  Scales(const PanelLayout& L, const float* const* W, const PackOptions& quant) {
    bf16 = L.type == DType::I4;
    limit = L.type == DType::I8 ? 127.0f : 7.0f;
    groupSteps = L.type == DType::I4 ? L.group : L.K;
    groups = (L.K + groupSteps - 1) / groupSteps;
    values.resize(size_t(L.N * groups));
    perTensor = L.type == DType::I8 && quant.perTensor;
    if (perTensor && !quant.tensorMaxOfRow.empty()) {
      if (int64_t(quant.tensorMaxOfRow.size()) != L.N)
        throw std::invalid_argument(fmt::format("per-tensor scales: {} rows' tensor maxima for {} rows",
                                                quant.tensorMaxOfRow.size(), L.N));
      tensorMaxOfRow = quant.tensorMaxOfRow;
      return;
    }
    for (int64_t n = 0; perTensor && n < L.N; ++n) tensorMax = std::max(tensorMax, maxAbs(W[n], L.K));
  }
  // Row n's scale for a group whose max |w| is groupMax (per tensor, the tensor's instead).
  float scaleOf(int64_t n, float groupMax) const {
    const float range = !perTensor ? groupMax : tensorMaxOfRow.empty() ? tensorMax : tensorMaxOfRow[size_t(n)];
    const float s = range / limit;
    // Rounded to nearest even, |w / s| stays <= 7 · (1 + 2^-8): q still rounds to 7.
    return bf16 ? bf16ToFloat(floatToBf16(s)) : s;
  }
};

// round-to-nearest-even(from[i] / scale), clamped to ±limit, into to[i] for i < count, with
// scale > 0: the division itself (not a multiplication by 1 / scale, which rounds some
// quotients to the other side of a half), so every path stores the same q.
void quantizeRun(const float* from, int64_t count, float scale, float limit, int8_t* to) {
  int64_t i = 0;
#if defined(__SSE2__)
  // 16 weights at a time (GCC leaves the float -> int8 loop scalar: a division per
  // weight was most of an i8/i4 load).
  const __m128 vscale = _mm_set1_ps(scale), lo = _mm_set1_ps(-limit), hi = _mm_set1_ps(limit);
  const __m128 magic = _mm_set1_ps(0x1.8p23f);
  auto quantize4 = [&](const float* x) {
    const __m128 r = _mm_sub_ps(_mm_add_ps(_mm_div_ps(_mm_loadu_ps(x), vscale), magic), magic);
    return _mm_cvttps_epi32(_mm_min_ps(_mm_max_ps(r, lo), hi));
  };
  for (; i + 16 <= count; i += 16) {
    const __m128i a = _mm_packs_epi32(quantize4(from + i), quantize4(from + i + 4));
    const __m128i b = _mm_packs_epi32(quantize4(from + i + 8), quantize4(from + i + 12));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(to + i), _mm_packs_epi16(a, b));
  }
#endif
  for (; i < count; ++i) to[i] = int8_t(std::clamp(roundEven(from[i] / scale), -limit, limit));
}

// The same with 8-lane divisions where the host has AVX2 (the division is most of
// quantising: a third less time for TinyLlama's weights at i4 on Zen 3).
__attribute__((target("avx2"))) inline __m256i quantize8(__m256 x, __m256 scale, __m256 limit) {
  const __m256 r = _mm256_round_ps(_mm256_div_ps(x, scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(r, _mm256_sub_ps(_mm256_setzero_ps(), limit)), limit));
}
// 16 weights' q, a and b's 8 each, stored in order at `to`.
__attribute__((target("avx2"))) inline void store16(__m256i a, __m256i b, int8_t* to) {
  // packs works within 128-bit halves: [a0-3 b0-3 | a4-7 b4-7], put back in order.
  const __m256i words = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xd8);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(to),
                   _mm_packs_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1)));
}
__attribute__((target("avx2"))) void quantizeRunAvx2(const float* from, int64_t count, float scale, float limit,
                                                    int8_t* to) {
  int64_t i = 0;
  const __m256 vscale = _mm256_set1_ps(scale), vlimit = _mm256_set1_ps(limit);
  for (; i + 16 <= count; i += 16)
    store16(quantize8(_mm256_loadu_ps(from + i), vscale, vlimit), quantize8(_mm256_loadu_ps(from + i + 8), vscale, vlimit),
            to + i);
  if (i < count) quantizeRun(from + i, count - i, scale, limit, to + i);
}

// i4's groups (up to kRegisterGroupSteps, a multiple of 16) quantised 8 at a time without
// a call a group: first the 8 groups' checks and scales, then their q from L1. Each
// group's scale is a horizontal max and a division, and its q waits for it; group by
// group those latencies were not overlapped, and quantising was 0.55 ns of an i4 weight's
// ~0.6 ns pack (Zen 3). quantizeRow's first `groups` groups of row n; `g` the next group
// to do when it returns. False when a weight is not storable.
constexpr int64_t kRegisterGroupSteps = 64;
__attribute__((target("avx2"))) bool quantizeRegisterGroupsAvx2(Scales& s, int64_t n, const float* w, int64_t groups,
                                                               int8_t* q, int64_t& g) {
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 most = _mm256_set1_ps(std::numeric_limits<float>::max()), vlimit = _mm256_set1_ps(s.limit);
  const int64_t vectors = s.groupSteps / 8;
  float* scales = &s.values[size_t(n * s.groups)];
  for (g = 0; g < groups;) {
    const int64_t batch = std::min<int64_t>(8, groups - g);
    __m256 ok = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    for (int64_t b = 0; b < batch; ++b) {
      const float* x = w + (g + b) * s.groupSteps;
      __m256 m = _mm256_setzero_ps();
      for (int64_t i = 0; i < vectors; ++i) {
        const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + 8 * i), magnitude);
        m = _mm256_max_ps(m, a);
        ok = _mm256_and_ps(ok, _mm256_cmp_ps(a, most, _CMP_LE_OQ));
      }
      scales[g + b] = s.scaleOf(n, largestLane(m));
    }
    if (_mm256_movemask_ps(ok) != 0xff) return false;
    for (int64_t b = 0; b < batch; ++b, ++g) {
      const float* x = w + g * s.groupSteps;
      int8_t* to = q + g * s.groupSteps;
      const float scale = scales[g];
      if (!(scale > 0)) {
        std::fill(to, to + s.groupSteps, int8_t(0));
        continue;
      }
      const __m256 vscale = _mm256_set1_ps(scale);
      for (int64_t i = 0; i < vectors; i += 2)
        store16(quantize8(_mm256_loadu_ps(x + 8 * i), vscale, vlimit),
                quantize8(_mm256_loadu_ps(x + 8 * i + 8), vscale, vlimit), to + 8 * i);
    }
  }
  return true;
}

// Row n's K weights w quantised into q[0 .. K), group by group: each group is read from
// memory once, for its check and its scale (set in s), and quantised from L1 with one
// scale over contiguous weights (a division per weight by k / groupSteps took most of an
// i4 load). False, with the row partly done, when a weight is not storable.
bool quantizeRow(Scales& s, int64_t n, const float* w, int64_t K, int8_t* q) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  int64_t g = 0;
  if (avx2 && s.groupSteps % 16 == 0 && s.groupSteps <= kRegisterGroupSteps)
    if (!quantizeRegisterGroupsAvx2(s, n, w, K / s.groupSteps, q, g)) return false;
  for (; g < s.groups; ++g) {
    const int64_t k0 = g * s.groupSteps, count = std::min(K, k0 + s.groupSteps) - k0;
    bool finite = true;
    const float range = (avx2 ? groupMaxAvx2 : groupMax)(w + k0, count, finite);
    if (!finite) return false;
    const float scale = s.values[size_t(n * s.groups + g)] = s.scaleOf(n, range);
    if (scale > 0) (avx2 ? quantizeRunAvx2 : quantizeRun)(w + k0, count, scale, s.limit, q + k0);
    else std::fill(q + k0, q + k0 + count, int8_t(0));
  }
  return true;
}

// IEEE binary16 bits of w[0 .. n), rounded to nearest even: with F16C's vcvtps2ph when
// the host has it (the same bits as floatToHalf for the finite values checkStorable
// lets through; the conversion was most of an f16 load), else floatToHalf.
__attribute__((target("avx,f16c"))) void halfBitsF16C(const float* w, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(w + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) out[i] = floatToHalf(w[i]);
}
void halfBits(const float* w, int64_t n, uint16_t* out) {
  // F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports has no "f16c".
  static const bool f16c = __builtin_cpu_supports("avx") && [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
  }();
  if (f16c) return halfBitsF16C(w, n, out);
  for (int64_t i = 0; i < n; ++i) out[i] = floatToHalf(w[i]);
}

// bfloat16 bits of w[0 .. n), rounded to nearest even: 8 at a time where the host has
// AVX2 (floatToBf16's integer rounding, the same bits for the finite values the storable
// check lets through; one at a time it was a third of a bf16 load), else floatToBf16.
__attribute__((target("avx2"))) void bf16BitsAvx2(const float* w, int64_t n, uint16_t* out) {
  const __m256i one = _mm256_set1_epi32(1), half = _mm256_set1_epi32(0x7fff);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i r[2];
    for (int h = 0; h < 2; ++h) {
      const __m256i x = _mm256_castps_si256(_mm256_loadu_ps(w + i + 8 * h));
      const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), one);
      r[h] = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(half, odd)), 16);
    }
    // packus works within 128-bit halves: [a0-3 b0-3 | a4-7 b4-7], put back in order.
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm256_permute4x64_epi64(_mm256_packus_epi32(r[0], r[1]), 0xd8));
  }
  for (; i < n; ++i) out[i] = floatToBf16(w[i]);
}
void bf16Bits(const float* w, int64_t n, uint16_t* out) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return bf16BitsAvx2(w, n, out);
  for (int64_t i = 0; i < n; ++i) out[i] = floatToBf16(w[i]);
}

// K steps a panel is placed in at a time: its channels' steps in storage form (f16/bf16
// a tile of NR × kTileSteps, <= 64 × 256 × 2 bytes = 32 KiB; i8/i4 the panel's q, NR × K
// bytes, quantised as each row is read) written out transposed, so each weight is read,
// converted and placed once, with no copy of the whole tensor in between (a cold load is
// mostly fresh memory being handed out).
constexpr int64_t kTileSteps = 256;

#if defined(__SSE2__)
// `rows` rows of one 16-byte vector each in place of their columns: 16 rows of 16 bytes
// or 8 rows of 8 16-bit values; log2(rows) rounds of interleaving row i with row
// i + rows / 2 (the perfect shuffle, applied that often, transposes).
inline void transposeRows(__m128i* r, int rows) {
  for (int round = 0; (1 << round) < rows; ++round) {
    __m128i o[16];
    for (int i = 0; i < rows / 2; ++i) {
      const __m128i a = r[i], b = r[i + rows / 2];
      o[2 * i] = rows == 16 ? _mm_unpacklo_epi8(a, b) : _mm_unpacklo_epi16(a, b);
      o[2 * i + 1] = rows == 16 ? _mm_unpackhi_epi8(a, b) : _mm_unpackhi_epi16(a, b);
    }
    std::copy(o, o + rows, r);
  }
}
// 4 rows of 4 32-bit words in place of their columns.
inline void transposeWords(__m128i* r) {
  const __m128i a = _mm_unpacklo_epi32(r[0], r[1]), b = _mm_unpacklo_epi32(r[2], r[3]);
  const __m128i c = _mm_unpackhi_epi32(r[0], r[1]), d = _mm_unpackhi_epi32(r[2], r[3]);
  r[0] = _mm_unpacklo_epi64(a, b);
  r[1] = _mm_unpackhi_epi64(a, b);
  r[2] = _mm_unpacklo_epi64(c, d);
  r[3] = _mm_unpackhi_epi64(c, d);
}

// i4 for f32 activations (kPack 1), a full panel's steps: byte j of k step t holds
// channel j's q (low nibble) and channel j + half's (high), for `steps` (a multiple of
// 16) steps (channel j's q at j · stride), written `half` bytes a step from `out`. Per
// 16 channels × 16 steps: the nibbles joined along k, then transposed; one byte at a
// time, this placement was a quarter of an i4 load's work.
void placeNibbleSteps(const int8_t* q, int64_t stride, int64_t half, int64_t steps, unsigned char* out) {
  const __m128i low = _mm_set1_epi8(0x0f), high = _mm_set1_epi8(static_cast<char>(0xf0));
  for (int64_t t0 = 0; t0 < steps; t0 += 16)
    for (int64_t j0 = 0; j0 < half; j0 += 16) {
      // 16 channel pairs, or the 8 of an AVX2 f32 panel (NR 16) with 8 rows of zeros
      const int64_t pairs = std::min<int64_t>(16, half - j0);
      __m128i r[16];
      for (int64_t i = 0; i < 16; ++i) {
        r[i] = _mm_setzero_si128();
        if (i >= pairs) continue;
        const int8_t* lo = q + (j0 + i) * stride + t0;
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lo));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lo + half * stride));
        r[i] = _mm_or_si128(_mm_and_si128(a, low), _mm_and_si128(_mm_slli_epi16(b, 4), high));
      }
      transposeRows(r, 16);
      for (int64_t t = 0; t < 16; ++t) {
        auto* to = out + (t0 + t) * half + j0;
        if (pairs == 16) _mm_storeu_si128(reinterpret_cast<__m128i*>(to), r[t]);
        else _mm_storel_epi64(reinterpret_cast<__m128i*>(to), r[t]);
      }
    }
}

// kPack 1 with 16-bit (f16/bf16) or 8-bit (i8) elements, a full panel's steps: element
// j of k step t holds channel j's value, for `steps` (a multiple of n = 16 / sizeof(T))
// steps (channel j's values at j · stride: the f16/bf16 tile, i8's panel q), written NR
// elements a step from `out`: n channels × n steps transposed at a time (one element at
// a time, the placement took most of an f16 load and as long as quantising i8).
template <typename T>
void placeTransposedSteps(const T* in, int64_t stride, int64_t NR, int64_t steps, T* out) {
  constexpr int64_t n = 16 / int64_t(sizeof(T));
  for (int64_t t0 = 0; t0 < steps; t0 += n)
    for (int64_t j0 = 0; j0 < NR; j0 += n) {
      __m128i r[n];
      for (int64_t i = 0; i < n; ++i)
        r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + (j0 + i) * stride + t0));
      transposeRows(r, int(n));
      for (int64_t t = 0; t < n; ++t) _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (t0 + t) * NR + j0), r[t]);
    }
}

// i4 for dot products (kPack 4), a full panel's steps: byte 4j + r of dot step u holds
// channel j's q + 8 at k step 4u + r (low nibble) and channel j + half's (high), for
// `steps` (a multiple of 16) steps (channel j's q at j · stride), written 2·half·2 bytes
// a dot step from `out`. A channel pair's 4 steps of a dot step are one 32-bit word,
// joined 16 steps at a time, 4 pairs' words transposed together; byte by byte,
// TinyLlama's i4 load (`--generate`, NNC_CACHE=off) was ready in 12.3 s, with whole
// words in 2.9 s, and 1.3 s once the kernel's pages were warm (kPack 1 alike).
void placeDotNibbleSteps(const int8_t* q, int64_t stride, int64_t half, int64_t steps, unsigned char* out) {
  const __m128i eight = _mm_set1_epi8(8), low = _mm_set1_epi8(0x0f), high = _mm_set1_epi8(static_cast<char>(0xf0));
  const int64_t stepBytes = 4 * half; // NR · 2
  auto joined = [&](int64_t j, int64_t t0) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + j * stride + t0));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + (j + half) * stride + t0));
    return _mm_or_si128(_mm_and_si128(_mm_add_epi8(a, eight), low),
                        _mm_and_si128(_mm_slli_epi16(_mm_add_epi8(b, eight), 4), high));
  };
  int64_t j0 = 0;
  for (; j0 + 4 <= half; j0 += 4) // 4 channel pairs' 4 dot steps: their words transposed
    for (int64_t t0 = 0; t0 < steps; t0 += 16) {
      __m128i r[4] = {joined(j0, t0), joined(j0 + 1, t0), joined(j0 + 2, t0), joined(j0 + 3, t0)};
      transposeWords(r);
      for (int64_t w = 0; w < 4; ++w)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (t0 / 4 + w) * stepBytes + 4 * j0), r[w]);
    }
  for (int64_t j = j0; j < half; ++j)
    for (int64_t t0 = 0; t0 < steps; t0 += 16) {
      alignas(16) uint32_t words[4];
      _mm_store_si128(reinterpret_cast<__m128i*>(words), joined(j, t0));
      for (int64_t w = 0; w < 4; ++w) std::memcpy(out + (t0 / 4 + w) * stepBytes + 4 * j, &words[w], 4);
    }
}
#endif

// Dot-product layouts whose dot step of a channel is one 32-bit word (i8 kPack 4, bf16
// kPack 2), `width` channels' words: word u of channel j (at from + j · rowBytes + 4u)
// is word j of dot step u, NR words a dot step from `out`. 4 channels × 4 words are
// transposed at a time (a word at a time, this was most of an i8 × i8 pack's placement).
void placeDotWords(const void* from, int64_t rowBytes, int64_t NR, int64_t width, int64_t words, void* out) {
  const auto* in = static_cast<const unsigned char*>(from);
  auto* to = static_cast<unsigned char*>(out);
  int64_t j0 = 0;
#if defined(__SSE2__)
  for (; j0 + 4 <= width; j0 += 4) {
    int64_t u = 0;
    for (; u + 4 <= words; u += 4) {
      __m128i r[4];
      for (int64_t i = 0; i < 4; ++i)
        r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + (j0 + i) * rowBytes + 4 * u));
      transposeWords(r);
      for (int64_t i = 0; i < 4; ++i) _mm_storeu_si128(reinterpret_cast<__m128i*>(to + ((u + i) * NR + j0) * 4), r[i]);
    }
    for (; u < words; ++u)
      for (int64_t j = j0; j < j0 + 4; ++j) std::memcpy(to + (u * NR + j) * 4, in + j * rowBytes + 4 * u, 4);
  }
#endif
  for (int64_t u = 0; u < words; ++u)
    for (int64_t j = j0; j < width; ++j) std::memcpy(to + (u * NR + j) * 4, in + j * rowBytes + 4 * u, 4);
}

// The sum of n signed bytes: 16 at a time as unsigned (q + 128, psadbw against zero).
int32_t byteSum(const int8_t* q, int64_t n) {
  int64_t i = 0, sum = 0;
#if defined(__SSE2__)
  const __m128i bias = _mm_set1_epi8(static_cast<char>(0x80));
  __m128i acc = _mm_setzero_si128();
  for (; i + 16 <= n; i += 16) {
    const __m128i v = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i)), bias);
    acc = _mm_add_epi64(acc, _mm_sad_epu8(v, _mm_setzero_si128()));
  }
  sum = _mm_cvtsi128_si64(acc) + _mm_cvtsi128_si64(_mm_unpackhi_epi64(acc, acc)) - 128 * i;
#endif
  for (; i < n; ++i) sum += q[i];
  return int32_t(sum);
}

// Steps k0 .. k0 + steps of a panel of `width` channels placed at `panel` (its first
// byte) the fast way its layout has, from the panel's q (i8/i4: channel j's at j · K) or
// the f16/bf16 tile: how many steps, from k0, were placed (the rest are placed one
// element at a time).
int64_t placeSteps(const PanelLayout& L, int64_t width, int64_t k0, int64_t steps, const int8_t* panelQ,
                   const uint16_t* tile16, unsigned char* panel) {
  const int64_t kp = L.kPack, NR = L.NR, half = NR / 2;
  const bool half16 = L.type == DType::F16 || L.type == DType::BF16;
  unsigned char* at = panel + bytesFor(k0 * NR, L.type); // step k0 (k0 a multiple of kPack)
  // A table's panel (rowTableLayout): one row's steps one after another, or i4's two rows
  // a byte; one element at a time, a table packed at 2.0-2.5 ns a weight (bench/pack_bench).
  if (kp == 1 && NR == 1 && L.type != DType::I4) {
    if (half16) std::memcpy(at, tile16, size_t(steps) * 2);
    else std::memcpy(at, panelQ + k0, size_t(steps));
    return steps;
  }
  if (L.type == DType::I4 && kp == 1 && NR == 2) {
    const int8_t *low = panelQ + k0, *high = low + L.K; // the second row's, when the panel has it
    for (int64_t t = 0; t < steps; ++t)
      at[t] = static_cast<unsigned char>(width == 2 ? (unsigned(low[t]) & 0xfu) | (unsigned(high[t]) & 0xfu) << 4
                                                    : unsigned(low[t]) & 0xfu);
    return steps;
  }
#if defined(__SSE2__)
  if (L.type == DType::I4 && kp == 1 && width == NR && (half % 16 == 0 || half == 8)) {
    placeNibbleSteps(panelQ + k0, L.K, half, steps / 16 * 16, at);
    return steps / 16 * 16;
  }
  if (L.type == DType::I4 && kp == 4 && width == NR && k0 % 4 == 0) {
    placeDotNibbleSteps(panelQ + k0, L.K, half, steps / 16 * 16, at);
    return steps / 16 * 16;
  }
  if (L.type == DType::I8 && kp == 1 && width == NR && NR % 16 == 0) {
    placeTransposedSteps(panelQ + k0, L.K, NR, steps / 16 * 16, reinterpret_cast<int8_t*>(at));
    return steps / 16 * 16;
  }
  if (half16 && kp == 1 && width == NR && NR % 8 == 0) {
    placeTransposedSteps(tile16, kTileSteps, NR, steps / 8 * 8, reinterpret_cast<uint16_t*>(at));
    return steps / 8 * 8;
  }
#endif
  if (L.type == DType::I8 && kp == 4 && k0 % 4 == 0) {
    placeDotWords(panelQ + k0, L.K, NR, width, steps / 4, at);
    return steps / 4 * 4;
  }
  if (L.type == DType::BF16 && kp == 2 && k0 % 2 == 0) {
    placeDotWords(tile16, kTileSteps * 2, NR, width, steps / 2, at);
    return steps / 2 * 2;
  }
  return 0;
}
} // namespace

void packWeightsPanel(const PanelLayout& L, const float* W, void* out, const PackOptions& quant) {
  packWeightRows(L, rowPointers(L, W).data(), out, quant);
}

void packWeightRows(const PanelLayout& L, const float* const* W, void* out, const PackOptions& quant) {
  if (L.rowPointers) {
    if (L.type != DType::F32) throw std::invalid_argument("weights in place are f32");
    auto* table = static_cast<const float**>(out);
    for (int64_t n = 0; n < L.N; ++n) table[n] = W[L.sourceRow(n)];
    return;
  }
  if (L.type == DType::F32) return packRowsF32(L, W, static_cast<float*>(out), quant.readRows);
  if (L.hasRowTail()) throw std::invalid_argument("low-precision weights have no row-tail layout");
  if (L.kPack != 1 && !((L.type == DType::BF16 && L.kPack == 2) || (L.type == DType::I8 && L.kPack == 4) ||
                        (L.type == DType::I4 && L.kPack == 4)))
    throw std::invalid_argument(fmt::format("no dot-product layout of {} weights in groups of {} k steps",
                                            dtypeName(L.type), L.kPack));
  const bool half16 = L.type == DType::F16 || L.type == DType::BF16;
  if (!half16 && L.type != DType::I8 && L.type != DType::I4)
    throw std::invalid_argument(fmt::format("no packing for weight dtype {}", dtypeName(L.type)));
  // Each panel's rows are checked (and i8/i4 ones quantised) just before they are packed,
  // while they are in cache: the source is read from memory once. A row that does not
  // pass sends the whole tensor through checkStorable, which names the first bad weight
  // in row-major order (a gated panel's rows are not in that order).
  const float storable = storableLimit(L);
  if (L.type == DType::I8 && quant.perTensor) checkStorable(L, W); // before the tensor's max
  std::optional<Scales> scales;
  if (!half16) scales.emplace(L, W, quant);
  auto* bytes = static_cast<unsigned char*>(out);
  std::memset(bytes, 0, size_t(L.totalBytes()));
  auto* out16 = reinterpret_cast<uint16_t*>(bytes);
  int32_t* sums = L.hasSums() ? reinterpret_cast<int32_t*>(bytes + L.sumsOffsetBytes()) : nullptr;
  const int64_t kp = L.kPack, NR = L.NR, half = NR / 2;
  std::vector<uint16_t> tile16(half16 ? size_t(NR * kTileSteps) : 0);
  std::vector<int8_t> panelQ(half16 ? 0 : size_t(NR * L.K)); // i8/i4: channel j's q at j · K
  std::vector<float> copies;
  std::vector<const float*> rowsOfPanel;
  for (int64_t p = 0; p < L.panels(); ++p) {
    const int64_t width = std::min<int64_t>(NR, L.N - p * NR);
    const float* const* rows = panelRows(L, W, p, width, quant.readRows, copies, rowsOfPanel);
    for (int64_t j = 0; j < width; ++j) {
      const int64_t row = L.sourceRow(p * NR + j);
      int8_t* q = half16 ? nullptr : &panelQ[size_t(j * L.K)];
      if (!(scales ? quantizeRow(*scales, row, rows[j], L.K, q) : rowStorable(rows[j], L.K, storable))) {
        checkStorable(L, W);
        throw std::logic_error("packWeightRows: a row failed the storable check that the whole tensor passed");
      }
      if (sums) sums[p * NR + j] = 128 * byteSum(q, L.K);
    }
    for (int64_t k0 = 0; k0 < L.K; k0 += kTileSteps) {
      const int64_t steps = std::min(kTileSteps, L.K - k0);
      // f16/bf16's tile: channel j's steps k0 .. k0 + steps at j · kTileSteps.
      for (int64_t j = 0; half16 && j < width; ++j) {
        const float* w = rows[j];
        (L.type == DType::F16 ? halfBits : bf16Bits)(w + k0, steps, &tile16[size_t(j * kTileSteps)]);
      }
      // Placed at their offsets (PackLayout.h): element (n, k) at offset(n, k).
      const int64_t panelBase = p * L.panelElements();
      const int64_t placed = placeSteps(L, width, k0, steps, panelQ.data(), tile16.data(), bytes + bytesFor(panelBase, L.type));
      for (int64_t k = k0 + placed; k < k0 + steps; ++k) {
        // (kPack 1, the tables' layout, without a division by a variable a step)
        const int64_t t = k - k0, stepBase = kp == 1 ? panelBase + k * NR : panelBase + (k / kp) * (NR * kp) + k % kp;
        if (half16)
          for (int64_t j = 0; j < width; ++j) out16[stepBase + j * kp] = tile16[size_t(j * kTileSteps + t)];
        else if (L.type == DType::I8)
          for (int64_t j = 0; j < width; ++j) bytes[stepBase + j * kp] = static_cast<unsigned char>(panelQ[size_t(j * L.K + k)]);
        else { // i4: one byte holds channels j (low nibble) and j + NR/2 (high), j < NR/2
          // (kPack 4, for i8 dot products: byte j·4 + k % 4 of the dot step's NR·2, as
          // q + 8; else byte j of the k step, two's complement)
          const int64_t first = kp == 4 ? (panelBase / 4 + k / 4 * NR) * 2 + k % 4 : (panelBase + k * NR) / 2;
          const int64_t stride = kp == 4 ? 4 : 1;
          const int offset = kp == 4 ? 8 : 0;
          for (int64_t j = 0; j < half && j < width; ++j) {
            const unsigned low = unsigned(panelQ[size_t(j * L.K + k)] + offset) & 0xfu;
            const unsigned high = j + half < width ? unsigned(panelQ[size_t((j + half) * L.K + k)] + offset) & 0xfu : 0u;
            bytes[first + j * stride] = static_cast<unsigned char>(low | high << 4);
          }
        }
      }
    }
  }
  if (!L.scaleCount()) return;
  // Channel n's group g at scaleIndex(n, g) = scaleIndex(n, 0) + g · NR: the index found
  // once a channel, not once a scale (three divisions each, 34 M scales in TinyLlama at i4).
  unsigned char* scaleOut = bytes + L.scalesOffsetBytes();
  const int64_t groups = scales->groups;
  for (int64_t n = 0; n < L.N; ++n) {
    const float* from = &scales->values[size_t(L.sourceRow(n) * groups)];
    const int64_t first = L.scaleIndex(n, 0);
    for (int64_t g = 0; g < groups; ++g) {
      const float s = from[g];
      if (scales->bf16) {
        const uint16_t bits = floatToBf16(s); // exact: s is a bf16 value already
        std::memcpy(scaleOut + (first + g * NR) * 2, &bits, 2);
      } else
        std::memcpy(scaleOut + (first + g * NR) * 4, &s, 4);
    }
  }
}

std::vector<float> storedWeightValues(const PanelLayout& L, const float* W, const PackOptions& quant) {
  const int64_t count = L.N * L.K;
  if (L.type == DType::F32) return std::vector<float>(W, W + count);
  const std::vector<const float*> rows = rowPointers(L, W);
  checkStorable(L, rows.data());
  std::vector<float> out(static_cast<size_t>(count));
  if (L.type == DType::F16 || L.type == DType::BF16) {
    std::vector<uint16_t> bits(size_t(L.K));
    for (int64_t n = 0; n < L.N; ++n) {
      if (L.type == DType::F16) halfBits(W + n * L.K, L.K, bits.data());
      else
        for (int64_t k = 0; k < L.K; ++k) bits[size_t(k)] = floatToBf16(W[n * L.K + k]);
      for (int64_t k = 0; k < L.K; ++k)
        out[size_t(n * L.K + k)] = L.type == DType::F16 ? halfToFloat(bits[size_t(k)]) : bf16ToFloat(bits[size_t(k)]);
    }
    return out;
  }
  Scales s(L, rows.data(), quant);
  std::vector<int8_t> q(size_t(L.K));
  for (int64_t n = 0; n < L.N; ++n) {
    if (!quantizeRow(s, n, W + n * L.K, L.K, q.data())) throw std::logic_error("storedWeightValues: a weight failed the storable check that the whole tensor passed");
    const float* rowScales = &s.values[size_t(n * s.groups)];
    for (int64_t k = 0; k < L.K; ++k) out[size_t(n * L.K + k)] = float(q[size_t(k)]) * rowScales[k / s.groupSteps];
  }
  return out;
}

} // namespace nnc::codegen
