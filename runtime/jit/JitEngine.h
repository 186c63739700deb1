// The kernel JIT: one ORC LLJIT for the host CPU, a cache of compiled kernels, and
// textual views (LLVM IR, assembly) of any kernel for `--emit llvm|asm`.
//
// Guarantees: the target is the host's CPU name and features as LLVM detects them
// (JITTargetMachineBuilder::detectHost), so the code is correct on any x86-64 and
// uses FMA/AVX2 only when present. Every kernel is its own module (own context),
// through a short new-pass-manager pipeline (O3's passes that matter for this
// already-vectorised IR; see JitEngine.cpp), then codegen (LLVM's SimpleCompiler) to an
// object that the LLJIT links; independent kernels compile on parallel threads, each
// with its own TargetMachine. Each distinct kernel key (spec key
// + CPU + features) is made ready once per engine; kernel() is thread-safe
// and return the same address for the same spec. Compiled code lives as long as the
// engine. Every kernel family goes through the same three calls (kernel, prepare,
// emit); codegen/KernelModules.h maps a spec to its emitter. Errors (bad spec, LLVM failure) throw std::runtime_error/invalid_argument.
//
// Object cache: with a cache directory (by default from the environment, see
// kernelCacheDirFromEnvironment in ObjectCache.h) each compiled kernel is also written
// there as an object file, and a later engine — typically a later process — that
// needs the same kernel links that file instead: no IR emission, no optimisation, no codegen.
// The file is chosen by the spec key, CPU name, CPU features and a fingerprint of the
// code that generates kernels (CodeFingerprint.h), so a different machine, LLVM or nnc
// build never reuses an object. A bad file is ignored and recompiled; a directory that
// cannot be written warns once (KernelCacheOptions::onWarning) and the engine compiles as
// without a cache.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compiler/codegen/CpuTable.h"
#include "compiler/codegen/KernelSpec.h"

namespace llvm::orc {
class JITTargetMachineBuilder;
}

namespace nnc::runtime {

// A CPU other than the host's, e.g. {"x86-64", ""} for the SSE2 baseline. It must be
// one the host can execute (used by tests to run every CpuTable row on one machine).
struct JitTarget {
  JitTarget(std::string cpuName, std::string featureList, std::string rowName = "", bool atHalfRate = false)
      : cpu(std::move(cpuName)), features(std::move(featureList)), row(std::move(rowName)),
        halfRate(atHalfRate) {}
  std::string cpu;
  std::string features; // LLVM feature list, "+avx2,+fma"
  // The CpuTable row (a family, or "avx2" for avx2_fma); "" = the widest row the
  // target's features allow. A row the features cannot execute throws.
  std::string row;
  // Plan the kernels as for a host that runs the row at half rate
  // (MicroKernelShape::halfRate), which only the host's calibration measures.
  bool halfRate = false;
  // Whether f16/bf16 weights, f32 weights read in place, and the dot kernels' i8 weights
  // and i4 × i8 (from two distances or one; codegen::streamPrefetchClass, both classes) are
  // prefetched in software at few rows (MicroKernelShape::prefetchesStreamedWeights); a
  // target's engine never measures it.
  bool prefetchesStreamedWeights = true;
  // How far ahead f16/bf16 weights are then prefetched (MicroKernelShape::halfWeightPrefetchBytes).
  int64_t halfWeightPrefetchBytes = codegen::kHalfWeightPrefetchBytes;
  // Whether one-row GEMMs over vpdpbusd on a row of 32 registers read their full panels
  // two at a time (MicroKernelShape::pairsOneRowPanels).
  bool pairsOneRowPanels = true;
  // f32 × i8 and f32 × i4 GEMMs as digit products where the row's vectors have vpdpbusd
  // (MicroKernelShape::digitProducts); false: always the f32 kernel (as NNC_DIGIT_PRODUCTS=off).
  bool digitProducts = true;
};

// Where an engine keeps compiled kernels between processes; dir "" = no disk cache.
struct KernelCacheOptions {
  KernelCacheOptions() = default;
  explicit KernelCacheOptions(std::string directory, std::function<void(const std::string &)> warn = {})
      : dir(std::move(directory)), onWarning(std::move(warn)) {}
  std::string dir;
  // Told (once per engine) when the directory cannot be written and the engine goes on
  // without storing kernels; the library itself never prints. Null: not told.
  std::function<void(const std::string &message)> onWarning;
  static KernelCacheOptions fromEnvironment(); // NNC_CACHE, NNC_CACHE_DIR, XDG, HOME
};

// Which CpuTable row the host's engines use (JitEngine::create without a target):
//  - NNC_ISA=avx512|avx2|avx|sse2 (or a family name) forces it; an unknown name or a
//    row this CPU cannot execute throws UsageError (a std::runtime_error), never a
//    silent fallback;
//  - else, when the host can execute both FMA rows (AVX-512 and AVX2), a calibration
//    times one mid-size GEMM (kCalibrationGemm) on each, interleaved, best of several,
//    and keeps the faster (chooseCalibratedRow: the AVX2 row only when it is clearly
//    faster): a few ms of runs plus the two kernels' compile, once per
//    process per CPU; with a kernel cache directory the choice is also stored there
//    (keyed by CPU name, features and the code fingerprint), so later processes on
//    this machine skip it;
//  - else the widest row the host can execute.
// Only rows CpuTable's canExecute allows for the CPU are ever chosen.
struct RowChoice {
  const codegen::MicroKernelShape* row = nullptr;
  std::string how;   // "NNC_ISA", "calibrated", "calibrated (cached)", "widest row"
  double millis = 0; // calibration time in this process (0 when none ran)
  std::vector<std::pair<std::string, double>> gflops; // per row, when measured here
  // The calibration found the widest row no faster than the next (measuresHalfRate): the
  // host issues its 512-bit FMAs as two halves. The engine's row then carries
  // MicroKernelShape::halfRate, which its GEMM blocking follows. Stored with the row.
  bool halfRate = false;
};
// The host's choice: NNC_ISA when set (read on every call), else the calibrated row
// (measured once per process per CPU; thread-safe).
RowChoice hostRowChoice(const KernelCacheOptions& cache);
// Same with `forced` in place of NNC_ISA ("" = not forced).
RowChoice hostRowChoice(const KernelCacheOptions& cache, const std::string& forced);
// The GEMM the calibration times on each row (M×N×K, no bias): multiples of every
// row's MR and NR, compute-bound, its operands (0.6 MiB) in L2.
inline constexpr int64_t kCalibrationGemm[3] = {168, 256, 256};
// Which of the timed rows (GFLOP/s per row, the widest first) the calibration keeps: the
// fastest, but a narrower row only when it beats the widest by more than
// kNarrowerRowMargin. The calibration times f32 FMAs only, where on hosts that run
// 512-bit operations as two halves (Zen 4) the rows tie within the noise, so without a
// margin the choice — and the last bits of every result — changed from process to
// process; and the widest row is the faster one for the low-precision weights there
// (docs/bench.md, "Zen 4 host": i4 GEMV 2.2×, f16 1.4× the AVX2 row's rate).
inline constexpr double kNarrowerRowMargin = 0.05;
size_t chooseCalibratedRow(const std::vector<std::pair<std::string, double>>& gflops);
// Whether the timed rows (widest first) show the widest running at the next row's rate:
// less than kFullRateRatio times its GFLOP/s, where a host that executes the wider
// vectors whole measures about twice (Zen 5: 273 vs 137 GFLOP/s peak) and one that
// splits them about once (Zen 4: 105-116 vs 98-115 in the calibration, docs/bench.md).
inline constexpr double kFullRateRatio = 1.4;
bool measuresHalfRate(const std::vector<std::pair<std::string, double>>& gflops);

// Whether a host engine's f16/bf16 kernels and its f32 decode kernels over weights in
// place (codegen::StreamPrefetchClass::Widened) prefetch their weights in software, and
// whether its decode dot kernels over i8 weights (not i8 × i8 over vpdpbusd) and
// i4 × i8 do (class Dot): two choices (WeightPrefetch.h), each decided at the first
// kernel it concerns (streamPrefetchClass), from NNC_PREFETCH_16BIT=on|off (Widened) or
// NNC_PREFETCH_DOT=on|off (Dot) when set, else measured once per process per CPU and,
// with a kernel cache directory, stored there like the row. Engines for a JitTarget
// take the target's setting for both.
struct WeightPrefetchChoice {
  bool prefetch = true;
  // With prefetch, bytes ahead for f16/bf16 weights (MicroKernelShape::halfWeightPrefetchBytes).
  int64_t bytes = codegen::kHalfWeightPrefetchBytes;
  std::string how;   // "" (not needed yet), "NNC_PREFETCH_16BIT", "measured", "measured, cached", "target"
  double millis = 0; // the measurement's time in this process (0 when none ran)
  // Per call, when measured in this process: 4 KiB ahead, 1 KiB ahead, without.
  double secondsWith = 0, secondsShort = 0, secondsWithout = 0;
  // "software prefetch on, 1 KiB ahead (measured in 96 ms: 1.82 ms a call 1 KiB ahead,
  // 2.00 4 KiB ahead, 1.95 without)"; "software prefetch off (NNC_PREFETCH_16BIT)"; ""
  // when not decided (the engine has built no kernel it concerns).
  std::string describe() const;
};

// Whether a host engine's one-row GEMMs over vpdpbusd on a row of 32 registers read
// their full panels two at a time (codegen::followsPanelPairingChoice,
// MicroKernelShape::pairsOneRowPanels; WeightPrefetch.h): decided the same way, at the
// first kernel it concerns, from NNC_PAIRED_PANELS=on|off when set, else measured once
// per process per CPU and stored next to the kernel cache.
struct PanelPairingChoice {
  bool paired = true;
  std::string how;   // "" (not needed yet), "NNC_PAIRED_PANELS", "measured", "measured, cached", "target"
  double millis = 0; // the measurement's time in this process (0 when none ran)
  double secondsPaired = 0, secondsSingle = 0; // per call, when measured in this process
  // "one-row panels one at a time (measured in 310 ms: 7.12 ms a call paired, 5.22 one
  // at a time)"; "one-row panels paired (NNC_PAIRED_PANELS)"; "" when not decided.
  std::string describe() const;
};

// Where the compile time of an engine went. The stage times are summed over kernels,
// so with concurrent compiles their sum can exceed totalMillis, which is wall time.
struct CompileStats {
  size_t compiled = 0;         // kernels LLVM compiled (emit → optimise → codegen → link)
  size_t fromCache = 0;        // kernels linked from the disk cache
  double emitMillis = 0;       // building the IR (compiled kernels only)
  double optimiseMillis = 0;   // the optimisation pipeline
  double codegenMillis = 0;    // instruction selection … object file
  double linkMillis = 0;       // linking the compiled objects
  double loadMillis = 0;       // reading + linking cached objects
  double totalMillis = 0;      // wall time of all of it
};

class JitEngine {
public:
  // The host CPU, with the cache directory from the environment; throws on failure.
  static std::unique_ptr<JitEngine> create();
  static std::unique_ptr<JitEngine> create(const JitTarget& target);
  static std::unique_ptr<JitEngine> create(const KernelCacheOptions& cache);
  static std::unique_ptr<JitEngine> create(const JitTarget& target, const KernelCacheOptions& cache);
  ~JitEngine();
  JitEngine(const JitEngine&) = delete;
  JitEngine& operator=(const JitEngine&) = delete;

  std::string cpuName() const;
  std::string cpuFeatures() const; // LLVM's "+avx2,+fma,..." list, enabled ones only
  const codegen::CpuFeatures& features() const; // that list, parsed (CpuTable.h)
  // The CpuTable row kernels of this engine are built for (fixes the packed layout).
  const codegen::MicroKernelShape& microKernel() const;
  // How that row was chosen: hostRowChoice's `how` for a host engine, "target" or
  // "target row" for an engine built for a JitTarget.
  std::string rowChoice() const;
  // The weight prefetch this engine's kernels use where each choice applies (GemmPlan.h
  // streamPrefetchClass; how "" until one needs it): f16/bf16 and in-place weights, and
  // the decode dot kernels' i8 and i4 × i8 weights.
  WeightPrefetchChoice weightPrefetch() const;
  WeightPrefetchChoice dotWeightPrefetch() const;
  // Whether its one-row GEMMs pair their panels where that choice applies (how "" until one needs it).
  PanelPairingChoice panelPairing() const;
  // The three, for the line "weights streamed at batch 1:" (joined by "; ", the dot
  // kernels' prefetch after "dot kernels: "; "" when none is decided).
  std::string describeStreaming() const;
  // While deferred, the GEMMs the choices apply to do not wait for the weight-prefetch
  // and panel-pairing measurements: they take a choice when it is known, else the row's
  // default (prefetch; pairs). --generate defers them while it compiles the prompt's
  // program, whose one-position GEMMs (after the last attention) run once, so the
  // measurements come with the decode program, after the first token. A kernel built
  // both ways has a symbol for each (codegen::gemmFunctionName).
  void deferWeightPrefetchChoice(bool defer);

  // Compiles (once per key) and returns the kernel's entry point, whose C type is the
  // family's (codegen::GemmKernelFn, ElementwiseKernelFn, NormKernelFn, PoolKernelFn).
  void* kernel(const codegen::KernelSpec& spec);
  // The bytes of stack the kernel for `spec` takes (made ready first, as kernel()): the
  // frames of its object's functions, as LLVM laid them out (StackSizes.h). Its scratch
  // lives there: converted rows, widened panels, tile sums (runtime/KernelStack.h).
  size_t stackBytes(const codegen::KernelSpec& spec);
  // Makes all these kernels ready at once, so that kernel() then returns at once:
  // cached ones are linked, the others compiled concurrently, one thread per CPU at
  // most. A model calls it with all its kernels before building its steps.
  void prepare(const std::vector<codegen::KernelSpec>& specs);

  // The optimised IR or the assembly of the kernel for `spec`, as it is compiled here.
  enum class EmitForm { LLVM, Assembly };
  std::string emit(const codegen::KernelSpec& spec, EmitForm form);

  // Kernels this engine has made ready: compiled by LLVM or linked from the disk
  // cache (compileStats() tells them apart).
  size_t kernelsCompiled() const;
  size_t kernelsFromCache() const;
  double compileMillis() const; // total time spent building + compiling + loading kernels
  CompileStats compileStats() const;
  std::string cacheDir() const; // "" when this engine has no disk cache

private:
  struct Impl;
  static std::unique_ptr<JitEngine> createFor(llvm::orc::JITTargetMachineBuilder jtmb,
                                              const KernelCacheOptions& cache,
                                              const std::string& row, const std::string& how,
                                              bool halfRate = false, bool prefetchesStreamedWeights = true,
                                              bool measuresWeightPrefetch = false, bool digitProducts = true,
                                              int64_t halfWeightPrefetchBytes = codegen::kHalfWeightPrefetchBytes,
                                              bool pairsOneRowPanels = true);
  friend RowChoice hostRowChoice(const KernelCacheOptions& cache, const std::string& forced);
  explicit JitEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace nnc::runtime
