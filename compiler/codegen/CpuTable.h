// Micro-kernel parameters per CPU family, as data (BLIS style): the GEMM emitter reads
// one row of this table and nothing else about the machine.
//
// Assumes: the feature string is LLVM's host feature list ("+avx2,+fma,-avx512f,...").
// Guarantees: selectMicroKernel always returns a row that is correct on its input
// features; the SSE2 row needs nothing beyond x86-64's baseline. AVX-512 hosts use
// the AVX2 row for now (no AVX-512 row yet; never assumed).
#pragma once
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

} // namespace nnc::codegen
