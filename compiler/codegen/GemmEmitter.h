// Emits one shape-specialised GEMM function as an llvm::Module.
//
// The function (named gemmFunctionName(spec, shape)) has the C signature GemmKernelFn:
//   void f(const float* A, const void* Bpacked, const float* bias,
//          const float* residual, float* C, int64_t panelBegin, int64_t panelEnd,
//          int64_t rowBlockBegin, int64_t rowBlockEnd)
// and computes, for the output columns of panels [panelBegin, panelEnd) (PackLayout.h)
// and the rows of row blocks [rowBlockBegin, rowBlockEnd) (GemmPlan.h):
//   C = act(A · W^T + bias) + residual.
// M, N, K, all strides and both tails are constants in the IR; the runtime values are
// only the pointers and the two ranges (so a thread pool can split N and M).
//
// Assumes: A is M×K row-major, Bpacked is in the gemmPanelLayout(spec, shape) layout and
// 64-byte aligned, bias has N floats (read only if spec.bias), residual is M×N (read
// only if spec.residual; it may be the same buffer as C), C is M×N. A, Bpacked, bias
// do not overlap C.
// Structure: the cache-blocked loop nest of ResolvedBlocking (GemmPlan.h); innermost, for each
// panel → each MR-row block (runtime loop, then the M tail as its own code) → rows×NR
// register block of accumulators, K loop unrolled ×4 (and marked not to be unrolled
// further) with the K remainder straight-line, epilogue (last K block) on the
// accumulators, then full or partial stores (PartialVector.h; masked stores on a row
// with shape.maskedStores, i.e. AVX-512) (the N-tail panel has its own code,
// computing only the vectors that hold columns; with no full panel, only that code).
// Only the paths the constant shapes reach are emitted, since optimisation and codegen time
// grow with the IR: e.g. no M-tail code when MR divides M; K blocks are two copies of the
// block's code, the blocks before the last (the first one told apart at run time, where
// its epilogue starts the sums instead of adding to C's) and the last.
// Conv windows (GemmSpec::windows, an implicit GEMM): A is the conv's NHWC input, and a
// row block reads its rows where they lie instead of from an im2col copy. K is walked
// tap by tap (ky, kx): per tap each row's pointer is its input pixel (or a row of zeros
// when the tap falls in the padding), then the tap's c channels are ordinary k steps.
// K stays whole (no K blocks, no packed A) and there is no narrow-tail path; the k
// steps, their order and their accumulator sets are those of the same GEMM over the
// im2col rows, so the results are bit-identical to it. With windows.rows (few channels,
// the map padded beforehand) a run is a whole window row of kw·c floats instead of a
// tap, with no padding check; its kw·c % 4 remainder steps follow the unrolled ones.
// Blocks of few rows (M = 1, 2, 3, and such M tails) would leave the FMA pipes idle
// waiting on 2-6 dependent accumulator chains; they get kSets independent
// accumulator sets, k step k feeding set k % kSets, summed in a fixed order before the
// epilogue, so every block keeps >= kMinFmaChains FMAs in flight and a batch-1 layer
// streams its weights at load bandwidth instead of FMA latency.
// A narrow N tail (useRowTail) is not a panel: its channels are [n][k] rows and the
// kernel computes dot products along K (emitDotBlock): blocks of dotTailRows rows × up to
// kDotColumns channels of accumulators, each a vector over K, reduced horizontally
// once at the end (fixed order), then the usual epilogue on the whole K. The row
// blocks are a runtime loop (one copy of the code, plus one for M % dotTailRows rows
// when M has such a remainder) and the K loop stays a loop.
#pragma once
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <memory>
#include <string>

#include "compiler/codegen/GemmPlan.h"

namespace nnc::codegen {

// aPack: the caller's buffer of GemmPlan::packedAFloats floats, 64-byte aligned, which
// the kernel packs rows of A into (null when packedAFloats is 0); each concurrent call
// needs its own.
using GemmKernelFn = void (*)(const float* A, const void* Bpacked, const float* bias,
                              const float* residual, float* C, float* aPack, int64_t panelBegin,
                              int64_t panelEnd, int64_t rowBlockBegin, int64_t rowBlockEnd);

// features: what the target has beyond the row (F16C: f16 weights widen with
// vcvtph2ps; without it, with integer vector code).
std::unique_ptr<llvm::Module> emitGemmModule(llvm::LLVMContext& ctx, const GemmSpec& spec,
                                             const MicroKernelShape& shape, const CpuFeatures& features = {});

} // namespace nnc::codegen
