// Emits one shape-specialised GEMM function as an llvm::Module.
//
// The function (named gemmFunctionName(spec)) has the C signature GemmKernelFn:
//   void f(const float* A, const void* Bpacked, const float* bias,
//          const float* residual, float* C, int64_t panelBegin, int64_t panelEnd,
//          int64_t rowBlockBegin, int64_t rowBlockEnd)
// and computes, for the output columns of panels [panelBegin, panelEnd) (PackLayout.h)
// and the rows of row blocks [rowBlockBegin, rowBlockEnd) (GemmPlan below):
//   C = act(A · W^T + bias) + residual.
// M, N, K, all strides and both tails are constants in the IR; the runtime values are
// only the pointers and the two ranges (so a thread pool can split N and M).
//
// Assumes: A is M×K row-major, Bpacked is in the PanelLayout{N, K, shape.NR} layout and
// 64-byte aligned, bias has N floats (read only if spec.bias), residual is M×N (read
// only if spec.residual; it may be the same buffer as C), C is M×N. A, Bpacked, bias
// do not overlap C.
// Structure: for each panel → for each MR-row block (runtime loop, then the M tail as
// its own code) → rows×NR register block of accumulators, K loop unrolled ×4 with the
// K remainder straight-line, epilogue on the accumulators, then full or masked stores
// (the N-tail panel has its own code, computing only the vectors that hold columns).
// Blocks of few rows (M = 1, 2, 3, and such M tails) would leave the FMA pipes idle
// waiting on 2-6 dependent accumulator chains; they get kSets independent
// accumulator sets, k step k feeding set k % kSets, summed in a fixed order before the
// epilogue, so every block keeps >= kMinFmaChains FMAs in flight and a batch-1 layer
// streams its weights at load bandwidth instead of FMA latency.
#pragma once
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <memory>
#include <string>

#include "compiler/codegen/CpuTable.h"
#include "compiler/codegen/KernelSpec.h"

namespace nnc::codegen {

using GemmKernelFn = void (*)(const float* A, const void* Bpacked, const float* bias,
                              const float* residual, float* C, int64_t panelBegin,
                              int64_t panelEnd, int64_t rowBlockBegin, int64_t rowBlockEnd);

// FMAs in flight needed to cover FMA latency × FMA pipes (4 cycles × 2 on Zen/Haswell).
inline constexpr int kMinFmaChains = 8;

// How the emitted code cuts the problem; the runtime splits work along these units.
struct GemmPlan {
  int64_t rowBlockRows; // MR: rows per row block (the last block may be shorter)
  int64_t rowBlocks;    // ceil(M / MR)
  int64_t panels;       // ceil(N / NR)
  int64_t NR;
};
GemmPlan planGemm(const GemmSpec& spec, const MicroKernelShape& shape);

// Accumulator sets for a block of `rows` rows: enough independent chains
// (rows × NR/W × sets >= kMinFmaChains) within the register budget (<= 12
// accumulators for 16 vector registers, leaving room for the B vectors and the
// broadcast). 1, 2 or 4. vectorsPerRow: vectors the block computes per row (NR/W when
// 0; a tail panel of N % NR <= W columns computes only ceil(columns / W)).
int accumulatorSets(int64_t rows, const MicroKernelShape& shape, int vectorsPerRow = 0);

std::string gemmFunctionName(const GemmSpec& spec);

// Throws std::invalid_argument for a spec the emitter cannot build (non-positive
// sizes, a weight dtype not implemented yet).
void validateGemmSpec(const GemmSpec& spec);

std::unique_ptr<llvm::Module> emitGemmModule(llvm::LLVMContext& ctx, const GemmSpec& spec,
                                             const MicroKernelShape& shape);

} // namespace nnc::codegen
