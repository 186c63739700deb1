// Packing W[N][K] into NR-wide k-major panels (layout in PackLayout.h), in f32 or in a
// low-precision storage dtype (rounded, or quantised with per-channel / per-group scales).
#include "compiler/codegen/PackLayout.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "runtime/io/HalfFloat.h"

namespace nnc::codegen {

void packWeightsPanelF32(const PanelLayout& L, const float* W, float* out) {
  const int64_t panels = L.hasRowTail() ? L.fullPanels() : L.panels();
  for (int64_t p = 0; p < panels; ++p) {
    float* panel = out + p * L.panelElements();
    int64_t n0 = p * L.NR;
    int64_t width = std::min<int64_t>(L.NR, L.N - n0);
    for (int64_t k = 0; k < L.K; ++k) {
      float* row = panel + k * L.NR;
      for (int64_t j = 0; j < width; ++j) row[j] = W[L.sourceRow(n0 + j) * L.K + k];
      std::fill(row + width, row + L.NR, 0.0f);
    }
  }
  if (!L.hasRowTail()) return;
  for (int64_t j = 0; j < L.tailColumns(); ++j) {
    float* row = out + L.tailOffset() + j * L.tailStride();
    std::copy_n(W + L.sourceRow(L.fullPanels() * L.NR + j) * L.K, L.K, row);
    std::fill(row + L.K, row + L.tailStride(), 0.0f);
  }
}

namespace {
constexpr float kHalfMax = 65504.0f;

// x rounded to the nearest integer, ties to even, for |x| <= 2^22: adding and taking
// away 1.5 · 2^23 leaves no fraction bits (IEEE round to nearest even; std::nearbyint
// is a library call per weight on a baseline x86-64 build).
inline float roundEven(float x) {
  constexpr float kMagic = 0x1.8p23f;
  return (x + kMagic) - kMagic;
}

// max |p[i]| over n floats, with 8 running maxima: one chain of maxss waits on the last
// (4 cycles a weight), which made the scale search most of an i8/i4 load. Exact: the
// order of the max does not change it.
float maxAbs(const float* p, int64_t n) {
  float m[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) m[j] = std::max(m[j], std::fabs(p[i + j]));
  for (; i < n; ++i) m[0] = std::max(m[0], std::fabs(p[i]));
  return *std::max_element(m, m + 8);
}

// W in layout.type: the 16-bit patterns (f16, bf16) or the integers q and their
// scales (i8, i4: scale of channel n, group g at n · groups + g; i8 has one group).
struct Stored {
  std::vector<uint16_t> bits;
  std::vector<int8_t> q;
  std::vector<float> scales;
  int64_t groupSteps = 0; // K steps per scale group
};

Stored store(const PanelLayout& L, const float* W, const QuantOptions& quant) {
  const int64_t count = L.N * L.K;
  for (int64_t i = 0; i < count; ++i) {
    if (!std::isfinite(W[i]))
      throw std::domain_error(fmt::format("weight [{}, {}] is {}, which {} cannot store", i / L.K, i % L.K, W[i],
                                          dtypeName(L.type)));
    if (L.type == DType::F16 && std::fabs(W[i]) > kHalfMax)
      throw std::domain_error(fmt::format("weight [{}, {}] = {} is beyond f16's range (±65504)", i / L.K, i % L.K,
                                          W[i]));
  }
  Stored s;
  if (L.type == DType::F16 || L.type == DType::BF16) {
    s.bits.resize(size_t(count));
    for (int64_t i = 0; i < count; ++i) s.bits[size_t(i)] = L.type == DType::F16 ? floatToHalf(W[i]) : floatToBf16(W[i]);
    return s;
  }
  if (L.type != DType::I8 && L.type != DType::I4)
    throw std::invalid_argument(fmt::format("no packing for weight dtype {}", dtypeName(L.type)));
  const float limit = L.type == DType::I8 ? 127.0f : 7.0f;
  s.groupSteps = L.type == DType::I4 ? L.group : L.K;
  const int64_t groups = (L.K + s.groupSteps - 1) / s.groupSteps;
  s.scales.resize(size_t(L.N * groups));
  const float tensorMax = L.type == DType::I8 && quant.perTensor ? maxAbs(W, count) : 0.0f;
  for (int64_t n = 0; n < L.N; ++n)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t k0 = g * s.groupSteps, k1 = std::min(L.K, k0 + s.groupSteps);
      float m = maxAbs(W + n * L.K + k0, k1 - k0);
      if (L.type == DType::I8 && quant.perTensor) m = tensorMax;
      s.scales[size_t(n * groups + g)] = m / limit;
    }
  s.q.resize(size_t(count));
  // Group by group, so that the inner loop is one scale over contiguous weights and
  // vectorises (a division per weight by k / groupSteps took most of an i4 load).
  for (int64_t n = 0; n < L.N; ++n)
    for (int64_t g = 0; g < groups; ++g) {
      const float scale = s.scales[size_t(n * groups + g)];
      const int64_t k0 = g * s.groupSteps, k1 = std::min(L.K, k0 + s.groupSteps);
      const float* w = W + n * L.K;
      int8_t* q = s.q.data() + n * L.K;
      if (scale > 0)
        for (int64_t k = k0; k < k1; ++k) q[k] = int8_t(std::clamp(roundEven(w[k] / scale), -limit, limit));
      else
        std::fill(q + k0, q + k1, int8_t(0));
    }
  return s;
}
} // namespace

void packWeightsPanel(const PanelLayout& L, const float* W, void* out, const QuantOptions& quant) {
  if (L.type == DType::F32) return packWeightsPanelF32(L, W, static_cast<float*>(out));
  if (L.hasRowTail()) throw std::invalid_argument("low-precision weights have no row-tail layout");
  if (L.kPack != 1 && !((L.type == DType::BF16 && L.kPack == 2) || (L.type == DType::I8 && L.kPack == 4) ||
                        (L.type == DType::I4 && L.kPack == 4)))
    throw std::invalid_argument(fmt::format("no dot-product layout of {} weights in groups of {} k steps",
                                            dtypeName(L.type), L.kPack));
  const Stored s = store(L, W, quant);
  auto* bytes = static_cast<unsigned char*>(out);
  std::memset(bytes, 0, size_t(L.totalBytes()));
  const int64_t half = L.NR / 2;
  // put(step, j, i): channel j of panel step `step` (= p·K + k) is element i of W.
  auto forEach = [&](auto&& put) {
    for (int64_t p = 0; p < L.panels(); ++p) {
      const int64_t width = std::min<int64_t>(L.NR, L.N - p * L.NR);
      for (int64_t k = 0; k < L.K; ++k)
        for (int64_t j = 0; j < width; ++j) put(p * L.K + k, j, L.sourceRow(p * L.NR + j) * L.K + k);
    }
  };
  // Where channel j of panel step `step` goes (the offset formula, kPack included).
  const int64_t kp = L.kPack;
  auto at = [&](int64_t step, int64_t j) {
    if (kp == 1) return step * L.NR + j;
    const int64_t p = step / L.K, k = step % L.K;
    return p * L.panelElements() + k / kp * (L.NR * kp) + j * kp + k % kp;
  };
  if (L.type == DType::F16 || L.type == DType::BF16) {
    auto* out16 = reinterpret_cast<uint16_t*>(bytes);
    forEach([&](int64_t step, int64_t j, int64_t i) { out16[at(step, j)] = s.bits[size_t(i)]; });
  } else if (L.type == DType::I8) {
    forEach([&](int64_t step, int64_t j, int64_t i) { bytes[at(step, j)] = static_cast<unsigned char>(s.q[size_t(i)]); });
  } else if (kp == 4) { // i4 for i8 dot products: element e of a dot step's NR·4 is in byte
    // e % (NR·2), low nibble for e < NR·2, as q + 8 (PackLayout.h)
    const int64_t stepElements = L.NR * 4;
    forEach([&](int64_t step, int64_t j, int64_t i) {
      const int64_t at4 = at(step, j), e = at4 % stepElements, byte = at4 / stepElements * (stepElements / 2) + e % (2 * L.NR);
      const unsigned nibble = static_cast<unsigned>(s.q[size_t(i)] + 8) & 0xfu;
      bytes[byte] |= static_cast<unsigned char>(e < 2 * L.NR ? nibble : nibble << 4);
    });
  } else { // i4: byte b of the k step holds channels b (low nibble) and b + NR/2 (high)
    forEach([&](int64_t step, int64_t j, int64_t i) {
      const unsigned nibble = static_cast<unsigned>(s.q[size_t(i)]) & 0xfu;
      bytes[step * half + j % half] |= static_cast<unsigned char>(j < half ? nibble : nibble << 4);
    });
  }
  if (!L.scaleCount()) return;
  auto* scales = reinterpret_cast<float*>(bytes + L.scalesOffsetBytes());
  const int64_t groups = L.groups();
  for (int64_t n = 0; n < L.N; ++n)
    for (int64_t g = 0; g < groups; ++g) scales[L.scaleIndex(n, g)] = s.scales[size_t(L.sourceRow(n) * groups + g)];
  if (!L.hasSums()) return;
  auto* sums = reinterpret_cast<int32_t*>(bytes + L.sumsOffsetBytes());
  for (int64_t n = 0; n < L.N; ++n) {
    int32_t sum = 0;
    for (int64_t k = 0; k < L.K; ++k) sum += s.q[size_t(L.sourceRow(n) * L.K + k)];
    sums[n] = 128 * sum;
  }
}

std::vector<float> storedWeightValues(const PanelLayout& L, const float* W, const QuantOptions& quant) {
  const int64_t count = L.N * L.K;
  if (L.type == DType::F32) return std::vector<float>(W, W + count);
  const Stored s = store(L, W, quant);
  std::vector<float> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    if (L.type == DType::F16) out[size_t(i)] = halfToFloat(s.bits[size_t(i)]);
    else if (L.type == DType::BF16) out[size_t(i)] = bf16ToFloat(s.bits[size_t(i)]);
    else {
      const int64_t groups = (L.K + s.groupSteps - 1) / s.groupSteps;
      out[size_t(i)] = float(s.q[size_t(i)]) * s.scales[size_t((i / L.K) * groups + (i % L.K) / s.groupSteps)];
    }
  }
  return out;
}

} // namespace nnc::codegen
