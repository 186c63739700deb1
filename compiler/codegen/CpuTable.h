// Micro-kernel parameters per CPU family, as data (BLIS style): the GEMM emitter reads
// one row of this table and nothing else about the machine.
//
// Assumes: the feature string is LLVM's host feature list ("+avx2,+fma,-avx512f,...").
// Guarantees: selectMicroKernel always returns a row that is correct on its input
// features; the SSE2 row needs nothing beyond x86-64's baseline. AVX-512 hosts use
// the AVX2 row for now (no AVX-512 row yet; never assumed), and kernelFeatureOverrides
// says how to keep its kernels in the row's instruction set.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace nnc::codegen {

struct MicroKernelShape {
  const char* family;  // name of the table row, for reports
  int vectorFloats;    // f32 lanes per vector register (4 SSE, 8 AVX)
  int MR, NR;          // register block: MR rows of A × NR columns of W (NR % vectorFloats == 0)
  int KC, MC, NC;      // cache blocks (K slice in L1, rows of A in L2, columns in L3)
  bool fma;            // fused multiply-add available
};

// What the emitters need to know about the host, parsed from LLVM's feature string.
struct CpuFeatures {
  bool sse2 = true; // x86-64 baseline
  bool avx = false, avx2 = false, fma = false, avx512f = false;
  static CpuFeatures parse(std::string_view llvmFeatureString);
};

const MicroKernelShape& selectMicroKernel(const CpuFeatures& features);

// LLVM features to turn off for kernels built from `row` on a host with `features`:
// "-avx512f" when the host has AVX-512 and the row is narrower. With AVX-512VL on,
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
