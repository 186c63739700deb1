// Whether a host's decode-shaped kernels prefetch f16/bf16 weights in software
// (MicroKernelShape::prefetchesStreamedWeights), and how far ahead
// (halfWeightPrefetchBytes): measured, because hosts differ. On the Sapphire Rapids and
// Zen 5 guests prefetching every line 4 KiB ahead took f16 streams from DRAM from
// 0.63-0.92 to 0.90-1.12 of the read probe; on the Zen 4 guest the same prefetches made
// them slower (4096² f16, 1 thread: 1,150-1,164 us without, 1,376-1,423 with; from L3
// there is no difference); on the Xeon guest with AMX 1 KiB ahead beat both (4096² f16
// from DRAM, 1 thread: 1,801-1,822 us, 4 KiB 1,992-2,021, none 1,906-1,954). So the
// choice is timed where the difference is: a batch-1 f16 GEMM over weights several
// times the L3 size, 4 KiB ahead, 1 KiB ahead and without. The same on/off choice
// governs the f32 decode kernels over weights in place (GemmPlan.h: streamPrefetchClass,
// Widened), whose distance is their own. The decode dot kernels over i8 weights and
// i4 × i8 (class Dot) gain and lose on the same hosts but by other amounts, so they
// follow a measurement of their own: a batch-1 i4 × i8 GEMM of as many bytes, with and
// without (dotPrefetchCalibrationSpec).
//
// A calibration of the same kind times what else about streaming weights from DRAM
// differs between hosts: whether one-row GEMMs over vpdpbusd read their full panels two
// at a time (MicroKernelShape::pairsOneRowPanels, DotGemmEmitter.h: pairsFullPanels;
// JitEngine.h: PanelPairingChoice). On the Xeon guest with AMX the pairs streamed
// faster; on the Zen 4 guest one panel at a time did (65536 × 4096 i4, 1 thread:
// 4.9-5.4 ms a call against 6.6-6.9 paired).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/codegen/GemmEmitter.h"
#include "runtime/jit/Gemm.h"

namespace nnc::runtime {

// The decision is "no prefetch" only when the calls without it are at least this much
// faster than the faster distance (best against best): the default stays where the
// host does not clearly say. 1 KiB instead of 4 KiB when its calls are kShortPrefetchMargin
// faster: both prefetch, so a wrong pick between them costs less.
inline constexpr double kPrefetchOffMargin = 0.08;
inline constexpr double kShortPrefetchMargin = 0.03;

// The calibration's GEMM: M = 1, f16 weights of kStreamL3Multiple × L3 bytes, at least
// kMinStreamBytes and at most kMaxStreamBytes, read in the same order every call, so
// each call reads them from DRAM. At 1.5 × L3 part of each call still hit L3 (on the
// Zen 4 guest, 48 MB a call at 38 GB/s against a 33 GB/s DRAM probe), where the two
// ways run alike, and the difference shrank into the margin: 3 of 4 processes kept a
// prefetch that slowed the f16 decode by 13 %. At 4 × L3 the calls took 1.13-1.19 ×
// as long with it, in every process (docs/bench.md, "the prefetch calibration reads 4 × L3").
inline constexpr int64_t kStreamL3Multiple = 4;
inline constexpr int64_t kMinStreamBytes = int64_t(48) << 20, kMaxStreamBytes = int64_t(256) << 20;
codegen::GemmSpec weightPrefetchCalibrationSpec(const codegen::CacheSizes& caches);

struct WeightPrefetchTimes {
  // Seconds per call, best of the rounds: 4 KiB ahead, without, 1 KiB ahead (0: not timed).
  double withPrefetch = 0, withoutPrefetch = 0, withShortPrefetch = 0;
};

// The GEMMs (the calibration spec on engines prefetching 4 KiB ahead, not at all, and,
// when given, 1 KiB ahead) over the same weights, written here with finite f16 values:
// one warm-up call each, then rounds of one call each, interleaved.
WeightPrefetchTimes timeWeightPrefetch(const Gemm& withPrefetch, const Gemm& withoutPrefetch,
                                       const Gemm* withShortPrefetch = nullptr);

// The streaming calls' seconds, best of the rounds, for each GEMM (of one row: others
// throw std::invalid_argument) over the same storage
// (sized for the largest layout, written with 0x3c bytes: finite f16, bf16 and i4
// values and scales; each GEMM reads it in its own layout): one warm-up call each,
// then rounds of one call each, interleaved.
std::vector<double> timeStreamedGemms(const std::vector<const Gemm*>& gemms);

// The pairing's GEMM: M = 1, f32 activations over i4 weights in groups of 32 (digit
// products where the row has them), as many weight bytes as weightPrefetchCalibrationSpec's.
codegen::GemmSpec panelPairingCalibrationSpec(const codegen::CacheSizes& caches);
// One panel at a time only where its calls were this much faster than the pairs'
// (best against best): the default, paired, stays where the host does not clearly say.
inline constexpr double kSinglePanelMargin = 0.05;
bool keepsPanelPairs(double secondsPaired, double secondsSingle);
// The choice's line in the kernel cache ("paired-panels", "single-panels"), parsed back.
std::string panelPairingLine(bool paired);
std::optional<bool> parsePanelPairingLine(const std::string& line);

// True unless the calls without prefetch were kPrefetchOffMargin faster than the faster
// of the timed distances.
bool keepsWeightPrefetch(const WeightPrefetchTimes& times);
// The distance to prefetch at: kShortHalfWeightPrefetchBytes where its calls were
// kShortPrefetchMargin faster than 4 KiB ahead, else kHalfWeightPrefetchBytes.
int64_t chosenWeightPrefetchBytes(const WeightPrefetchTimes& times);

// A choice: whether, and how far ahead (f16/bf16 weights).
struct WeightPrefetchSetting {
  bool prefetch = true;
  int64_t bytes = codegen::kHalfWeightPrefetchBytes;
};

// NNC_PREFETCH_16BIT: on (4 KiB ahead) or off, in environmentSwitch's spellings, or the
// distance in bytes, 1024 or 4096; nullopt when unset. Anything else throws UsageError
// (compiler/support/Error.h) naming the variable and the values it takes.
std::optional<WeightPrefetchSetting> forcedWeightPrefetch();

// The dot kernels' choice (class Dot): timed on an i4 × i8 GEMM of one row, with the
// host's panel pairing, over as many weight bytes as panelPairingCalibrationSpec's (it
// with i8 activations), with and without; off only when the calls without were
// kPrefetchOffMargin faster. Forced by NNC_PREFETCH_DOT=on|off (environmentSwitch).
codegen::GemmSpec dotPrefetchCalibrationSpec(const codegen::CacheSizes& caches);
bool keepsDotWeightPrefetch(double secondsWith, double secondsWithout);

// The measured choice's line in the kernel cache: "no-prefetch", or "prefetch <bytes
// ahead>"; parsed back, nullopt for any other line.
std::string weightPrefetchLine(const WeightPrefetchSetting& setting);
std::optional<WeightPrefetchSetting> parseWeightPrefetchLine(const std::string& line);

} // namespace nnc::runtime
