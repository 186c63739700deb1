// Micro-kernel parameters per CPU family, as data (BLIS style): the GEMM emitter reads
// one row of this table and nothing else about the machine.
//
// Assumes: the feature string is LLVM's host feature list ("+avx2,+fma,-avx512f,...").
// Guarantees: selectMicroKernel and executableRows only return rows whose features
// the input has (canExecute); the SSE2 row needs nothing beyond x86-64's baseline.
// Which of several executable rows is fastest is a measurement, not a rule (an
// AVX-512 host may run its 256-bit row faster, e.g. Zen 4): JitEngine calibrates the
// host's engine (JitEngine.h); selectMicroKernel is the widest row, for explicit
// targets. kernelFeatureOverrides says how to keep a row's kernels in its
// instruction set.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nnc::codegen {

// Bytes ahead that decode rows of f16/bf16 weights prefetch (GemmEmitter.cpp: prefetchB):
// every line of a step, 4 KiB ahead by default (best on the Zen 5 and Sapphire Rapids
// guests), 1 KiB where the host's calibration finds that faster (runtime/jit/WeightPrefetch.h).
inline constexpr int64_t kHalfWeightPrefetchBytes = 4096;
inline constexpr int64_t kShortHalfWeightPrefetchBytes = 1024;

struct MicroKernelShape {
  const char* family;  // name of the table row, for reports and NNC_ISA
  int vectorFloats;    // f32 lanes per vector register (4 SSE, 8 AVX, 16 AVX-512)
  int MR, NR;          // register block: MR rows of A × NR columns of W (NR % vectorFloats == 0)
  int KC, MC, NC;      // cache blocks (K slice in L1, rows of A in L2, columns in L3)
  bool fma;            // fused multiply-add available
  int registers = 16;  // vector registers the kernels may allocate (16; 32 with AVX-512)
  // Partial vectors are stored with a constant-mask llvm.masked.store (AVX-512 mask
  // registers: one vmovups {k}) instead of 4+2+1 pieces (PartialVector.h).
  bool maskedStores = false;
  // Measured, not in the table: the host runs this row's FMAs at the next narrower
  // row's rate (512-bit operations issued as two 256-bit halves, Zen 4), so a k step of
  // the register block takes twice the cycles and streams of A and B from L2/L3 keep up
  // with it: gemmBlocking then keeps K whole where full-rate hosts block it; and a
  // 256-bit FMA costs half a 512-bit one, so a tail panel's last vector that holds at
  // most 8 columns is a 256-bit one (GemmEmitter.cpp: narrowsLastVector). Set by
  // JitEngine from its calibration (JitEngine.h: RowChoice::halfRate); names the
  // engine's kernel keys.
  bool halfRate = false;
  // Measured, not in the table: whether weights streamed from DRAM at few rows are
  // prefetched in software — f16/bf16 weights (GemmEmitter.cpp: prefetchB), f32
  // weights read in place (emitRowsDot), and the dot kernels' i8 weights and i4 × i8
  // (DotGemmEmitter.cpp: prefetchSteps); GemmPlan.h: streamPrefetchClass. Set by
  // JitEngine from a calibration per class at the first such kernel (JitEngine.h: WeightPrefetchChoice);
  // names the keys of the kernels it changes.
  bool prefetchesStreamedWeights = true;
  // Measured with it: how far ahead f16/bf16 weights are prefetched when they are,
  // kHalfWeightPrefetchBytes or kShortHalfWeightPrefetchBytes (runtime/jit/WeightPrefetch.h);
  // names the keys of those kernels when not the default.
  int64_t halfWeightPrefetchBytes = kHalfWeightPrefetchBytes;
  // Measured, not in the table: whether one-row GEMMs over vpdpbusd on a row of 32
  // registers read their full panels two at a time (DotGemmEmitter.h: pairsFullPanels).
  // Set by JitEngine from a calibration of its own, as the prefetch's (runtime/jit/
  // WeightPrefetch.h: a one-row i4 GEMM from DRAM both ways); names the keys and symbols
  // of the kernels it changes when off.
  bool pairsOneRowPanels = true;
  // From the host's features, not in the table: the row's vectors have vpdpbusd
  // (AVX512_VNNI on the 16-lane row, AVX-VNNI on the 8-lane one), and GEMMs of i8 or
  // i4 weights under f32 activations multiply through it, the activations cut into
  // three 8-bit digits (DotGemmEmitter.h: digit products; their packed layouts are those
  // of i8 activations, GemmEmitter.h: usesDigitProducts). Set by JitEngine (NNC_DIGIT_PRODUCTS=off turns
  // it off); names the engine's kernel keys when off on a host that has it.
  bool digitProducts = false;
  // From the host's features: the row's byte products are vpmaddubsw pairs, not
  // vpdpbusd (DotGemmEmitter.h: bytePairProducts), where digit products over i8 weights
  // would saturate: digit products then take i4 weights alone, and f32 × i8 widens in
  // the f32 kernel. Set by JitEngine with digitProducts.
  bool bytePairs = false;
};

// What the emitters need to know about the host, parsed from LLVM's feature string.
struct CpuFeatures {
  bool sse2 = true; // x86-64 baseline
  bool avx = false, avx2 = false, fma = false, avx512f = false;
  bool f16c = false; // vcvtph2ps: f16 weights widen in one instruction (else integer code)
  // Dot-product instructions for low-precision activations (DotGemmEmitter.h):
  bool avx512bf16 = false; // vdpbf16ps
  bool avx512vnni = false; // vpdpbusd on zmm
  bool avxvnni = false;    // vpdpbusd on ymm (VEX), hosts without AVX-512
  // AMX tiles (DotGemmEmitter.h: usesTiles): AMX-TILE with AMX-BF16 (tdpbf16ps) /
  // AMX-INT8 (tdpbusd). JitEngine turns them off when the OS refuses the process
  // the tile state (Linux arch_prctl ARCH_REQ_XCOMP_PERM).
  bool amxBf16 = false;
  bool amxInt8 = false;
  static CpuFeatures parse(std::string_view llvmFeatureString);
};

// Every row of the table, widest first: avx512, avx2_fma, avx, sse2.
const std::vector<const MicroKernelShape*>& allMicroKernels();
// Whether a host with `features` can execute the row's kernels.
bool canExecute(const CpuFeatures& features, const MicroKernelShape& row);
// The rows a host with `features` can execute, widest first (sse2 always last).
std::vector<const MicroKernelShape*> executableRows(const CpuFeatures& features);
// The executable rows with FMA (avx512, avx2_fma), widest first: the ones JitEngine
// times against each other when there are two.
std::vector<const MicroKernelShape*> rowsToCalibrate(const CpuFeatures& features);
// The widest executable row.
const MicroKernelShape& selectMicroKernel(const CpuFeatures& features);
// The row named `name` (a family, or the NNC_ISA short name "avx2" for avx2_fma);
// null when there is none.
const MicroKernelShape* findMicroKernel(std::string_view name);

// LLVM features to turn off for kernels built from `row` on a host with `features`
// (comma-separated), so that a row forced on a wider host (NNC_ISA) compiles the code
// that a host with only the row's instructions would run, and tests of every row test
// that: "-avx512f" when the host has AVX-512 and the row is AVX2's (the AVX-512 row
// keeps all of them: 32 registers, mask registers); "-avx2,-fma" for the AVX row (no
// AVX-VNNI byte products, no FMA; F16C stays, as on Ivy Bridge); "-sse3" for the SSE2
// row (x86-64's baseline: no VEX encodings, no F16C, no SSE4.1). With AVX-512VL on,
// LLVM also allocates ymm16-31, whose EVEX-encoded broadcast loads take an FMA pipe
// slot on Zen 4 (llvm-mca -mcpu=znver4: 27.5 instead of 24 cycles per 4 k steps of
// the 6x16 block); kept to the 16 VEX registers the row was sized for, square GEMM
// measured 2-3 % faster (256-2048, 1 thread, same process A/B). "" otherwise.
std::string kernelFeatureOverrides(const CpuFeatures& features, const MicroKernelShape& row);

// Data cache sizes in bytes (0 = unknown).
struct CacheSizes {
  int64_t l1d = 0, l2 = 0, l3 = 0;
};
// The host's caches, read once: /sys/devices/system/cpu/cpu0/cache/index*/ (the
// kernel's per-cache view), then sysconf(_SC_LEVEL{1D,2,3}_CACHE_SIZE) for what sysfs
// does not say. sysfs first because glibc's sysconf can overstate L3 on AMD parts
// (this 2-vCPU Zen 4 guest: 320 MiB from sysconf, 32 MiB in sysfs and in CPUID).
const CacheSizes& hostCacheSizes();
// hostCacheSizes().l2, or `fallback` where the host does not say.
inline int64_t hostL2BytesOr(int64_t fallback) { return hostCacheSizes().l2 > 0 ? hostCacheSizes().l2 : fallback; }
// "l1_32k_l2_1024k_l3_32768k": the cache sizes as a kernel-key fragment ([a-z0-9_]).
std::string cacheSizesTag(const CacheSizes& caches);

// Cache blocks for the GEMM loop nest (BLIS's rules of thumb), each falling back to
// the table row's value when the cache size is unknown:
//   KC: a KC×NR slice of a packed B panel fills half of L1 (multiple of 8, 64..512);
//   MC: an MC×KC block of A fills half of L2 (multiple of MR, MR..1020);
//   NC: a KC×NC slice of packed B fills a quarter of L3 (multiple of NR, NR..8192).
struct GemmBlocking {
  int64_t KC, MC, NC;
};
GemmBlocking chooseBlocking(const MicroKernelShape& shape, const CacheSizes& caches);

} // namespace nnc::codegen
