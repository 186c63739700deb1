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

std::vector<double> timeStreamedGemms(const std::vector<const Gemm*>& gemms) {
  int64_t bytes = 0;
  for (const Gemm* gemm : gemms) {
    if (gemm->spec().M != 1) throw std::invalid_argument("timeStreamedGemms: GEMMs of one row only (got " + gemm->spec().key() + ")");
    bytes = std::max(bytes, gemm->layout().totalBytes());
  }
  std::shared_ptr<void> storage(allocateLarge(size_t(bytes), 64), &std::free);
  if (!storage) throw std::bad_alloc();
  // Written, so that every page is its own (an untouched mapping reads the zero page):
  // 0x3c3c is the f16 1.0586 and the bf16 0.0115; 0x3c holds the nibbles 3 and 12.
  std::memset(storage.get(), 0x3c, size_t(bytes));
  std::vector<PackedWeights> weights;
  int64_t longestRow = 0;
  for (const Gemm* gemm : gemms) {
    weights.push_back(PackedWeights::view(gemm->layout(), storage.get(), storage));
    longestRow = std::max({longestRow, gemm->spec().K, gemm->spec().N});
  }
  std::vector<float> A(static_cast<size_t>(longestRow), 0.5f), C(static_cast<size_t>(longestRow));
  auto seconds = [&](size_t i) {
    auto start = std::chrono::steady_clock::now();
    gemms[i]->run(A.data(), weights[i], nullptr, nullptr, C.data());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  constexpr int kRounds = 4;
  std::vector<double> best(gemms.size(), 1e30);
  for (int round = -1; round < kRounds; ++round) // round -1 warms up
    for (size_t i = 0; i < gemms.size(); ++i) {
      const double s = seconds(i);
      if (round >= 0) best[i] = std::min(best[i], s);
    }
  return best;
}

WeightPrefetchTimes timeWeightPrefetch(const Gemm& withPrefetch, const Gemm& withoutPrefetch,
                                       const Gemm* withShortPrefetch) {
  const codegen::PanelLayout& layout = withPrefetch.layout();
  if (!(withoutPrefetch.layout() == layout) || (withShortPrefetch && !(withShortPrefetch->layout() == layout)))
    throw std::invalid_argument("timeWeightPrefetch: the GEMMs pack their weights differently");
  std::vector<const Gemm*> gemms{&withPrefetch, &withoutPrefetch};
  if (withShortPrefetch) gemms.push_back(withShortPrefetch);
  const std::vector<double> best = timeStreamedGemms(gemms);
  return {best[0], best[1], withShortPrefetch ? best[2] : 0.0};
}

codegen::GemmSpec panelPairingCalibrationSpec(const codegen::CacheSizes& caches) {
  codegen::GemmSpec spec = weightPrefetchCalibrationSpec(caches);
  spec.N *= 4; // half a byte a weight, not two
  spec.weightType = DType::I4;
  spec.quantGroup = 32;
  return spec;
}

codegen::GemmSpec dotPrefetchCalibrationSpec(const codegen::CacheSizes& caches) {
  codegen::GemmSpec spec = panelPairingCalibrationSpec(caches);
  spec.activationType = DType::I8;
  return spec;
}

bool keepsDotWeightPrefetch(double secondsWith, double secondsWithout) {
  return secondsWithout > secondsWith * (1.0 - kPrefetchOffMargin);
}

bool keepsPanelPairs(double secondsPaired, double secondsSingle) {
  return secondsSingle > secondsPaired * (1.0 - kSinglePanelMargin);
}

std::string panelPairingLine(bool paired) { return paired ? "paired-panels" : "single-panels"; }

std::optional<bool> parsePanelPairingLine(const std::string& line) {
  for (bool paired : {true, false})
    if (line == panelPairingLine(paired)) return paired;
  return std::nullopt;
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
