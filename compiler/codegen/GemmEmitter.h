// Emits one shape-specialised GEMM function as an llvm::Module.
//
// The function (named gemmFunctionName(spec)) has the C signature GemmKernelFn:
//   void f(const float* A, const void* Bpacked, const float* bias,
//          const float* residual, float* C, int64_t panelBegin, int64_t panelEnd)
// and computes, for the output columns of panels [panelBegin, panelEnd) (PackLayout.h)
// and all M rows:  C = act(A · W^T + bias) + residual.
// M, N, K, all strides and both tails are constants in the IR; the runtime values are
// only the pointers and the panel range (so a thread pool can split N).
//
// Assumes: A is M×K row-major, Bpacked is in the PanelLayout{N, K, shape.NR} layout and
// 64-byte aligned, bias has N floats (read only if spec.bias), residual is M×N (read
// only if spec.residual; it may be the same buffer as C), C is M×N. A, Bpacked, bias
// do not overlap C.
// Structure: for each panel → for each MR-row block (runtime loop, then the M tail as
// its own code) → MR×NR register block of accumulators, K loop unrolled ×4 with the K
// remainder straight-line, epilogue on the accumulators, then full or masked stores
// (the N-tail panel has its own code).
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
                              int64_t panelEnd);

std::string gemmFunctionName(const GemmSpec& spec);

// Throws std::invalid_argument for a spec the emitter cannot build (non-positive
// sizes, a weight dtype not implemented yet).
void validateGemmSpec(const GemmSpec& spec);

std::unique_ptr<llvm::Module> emitGemmModule(llvm::LLVMContext& ctx, const GemmSpec& spec,
                                             const MicroKernelShape& shape);

} // namespace nnc::codegen
