// Timing the f16 weight stream with and without software prefetch (WeightPrefetch.h).
#include "runtime/jit/WeightPrefetch.h"
#include "runtime/EnvironmentSwitch.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <vector>

#include "compiler/support/Error.h"
#include "runtime/LargeAllocation.h"

namespace nnc::runtime {

codegen::GemmSpec weightPrefetchCalibrationSpec(const codegen::CacheSizes& caches) {
  constexpr int64_t K = 4096;
  const int64_t bytes = std::clamp(caches.l3 * kStreamL3Multiple, kMinStreamBytes, kMaxStreamBytes);
  codegen::GemmSpec spec;
  spec.M = 1;
  spec.K = K;
  spec.N = bytes / (K * 2) / 64 * 64; // whole panels on every row
  spec.weightType = DType::F16;
  return spec;
}

WeightPrefetchTimes timeWeightPrefetch(const Gemm& withPrefetch, const Gemm& withoutPrefetch,
                                       const Gemm* withShortPrefetch) {
  const codegen::PanelLayout& layout = withPrefetch.layout();
  if (!(withoutPrefetch.layout() == layout) || (withShortPrefetch && !(withShortPrefetch->layout() == layout)))
    throw std::invalid_argument("timeWeightPrefetch: the GEMMs pack their weights differently");
  const size_t bytes = size_t(layout.totalBytes());
  std::shared_ptr<void> storage(allocateLarge(bytes, 64), &std::free);
  if (!storage) throw std::bad_alloc();
  // Written, so that every page is its own (an untouched mapping reads the zero page):
  // 0x3c3c is the f16 1.0586.
  std::memset(storage.get(), 0x3c, bytes);
  const PackedWeights weights = PackedWeights::view(layout, storage.get(), storage);

  const codegen::GemmSpec& spec = withPrefetch.spec();
  std::vector<float> A(size_t(spec.M * spec.K), 0.5f), C(size_t(spec.M * spec.N));
  auto seconds = [&](const Gemm& gemm) {
    auto start = std::chrono::steady_clock::now();
    gemm.run(A.data(), weights, nullptr, nullptr, C.data());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  constexpr int kRounds = 4;
  WeightPrefetchTimes best{1e30, 1e30, withShortPrefetch ? 1e30 : 0.0};
  for (int round = -1; round < kRounds; ++round) { // round -1 warms up
    const double on = seconds(withPrefetch), off = seconds(withoutPrefetch);
    const double shortOn = withShortPrefetch ? seconds(*withShortPrefetch) : 0.0;
    if (round < 0) continue;
    best.withPrefetch = std::min(best.withPrefetch, on);
    best.withoutPrefetch = std::min(best.withoutPrefetch, off);
    if (withShortPrefetch) best.withShortPrefetch = std::min(best.withShortPrefetch, shortOn);
  }
  return best;
}

int64_t chosenWeightPrefetchBytes(const WeightPrefetchTimes& times) {
  const bool shorter = times.withShortPrefetch > 0 &&
                       times.withShortPrefetch < times.withPrefetch * (1.0 - kShortPrefetchMargin);
  return shorter ? codegen::kShortHalfWeightPrefetchBytes : codegen::kHalfWeightPrefetchBytes;
}

bool keepsWeightPrefetch(const WeightPrefetchTimes& times) {
  const double prefetched = chosenWeightPrefetchBytes(times) == codegen::kShortHalfWeightPrefetchBytes
                                ? times.withShortPrefetch
                                : times.withPrefetch;
  return times.withoutPrefetch > prefetched * (1.0 - kPrefetchOffMargin);
}

std::optional<WeightPrefetchSetting> forcedWeightPrefetch() {
  const char* v = std::getenv("NNC_PREFETCH_16BIT");
  for (int64_t bytes : {codegen::kShortHalfWeightPrefetchBytes, codegen::kHalfWeightPrefetchBytes})
    if (v && std::to_string(bytes) == v) return WeightPrefetchSetting{true, bytes};
  try {
    const std::optional<bool> on = environmentSwitch("NNC_PREFETCH_16BIT");
    if (!on) return std::nullopt;
    return WeightPrefetchSetting{*on, codegen::kHalfWeightPrefetchBytes};
  } catch (const UsageError&) {
    throw UsageError(std::string("NNC_PREFETCH_16BIT=") + v +
                     ": expected on or off (or 1 / 0, true / false, yes / no), or the bytes ahead, 1024 or 4096");
  }
}

std::string weightPrefetchLine(const WeightPrefetchSetting& setting) {
  return setting.prefetch ? "prefetch " + std::to_string(setting.bytes) : "no-prefetch";
}

std::optional<WeightPrefetchSetting> parseWeightPrefetchLine(const std::string& line) {
  for (const WeightPrefetchSetting s : {WeightPrefetchSetting{false}, WeightPrefetchSetting{true},
                                        WeightPrefetchSetting{true, codegen::kShortHalfWeightPrefetchBytes}})
    if (line == weightPrefetchLine(s)) return s;
  return std::nullopt;
}

} // namespace nnc::runtime
