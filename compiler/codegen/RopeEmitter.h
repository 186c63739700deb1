// Emits one rotary-position-embedding kernel (RopeSpec in KernelSpec.h) as an
// llvm::Module, specialised on the row stride, the heads rotated and the head size.
//
// The function (ropeFunctionName(spec)) has the C signature RopeKernelFn:
//   void f(float* x, const float* table, int64_t rowBegin, int64_t rowEnd, int64_t past)
// and rotates rows [rowBegin, rowEnd) of x in place, reading the table row of each
// row's position past + r mod seq (the caller guarantees the table has that row).
// Each half head is walked in vectors of the CPU's width, the tail masked.
#pragma once
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <memory>
#include <string>

#include "compiler/codegen/CpuTable.h"
#include "compiler/codegen/KernelSpec.h"

namespace nnc::codegen {

using RopeKernelFn = void (*)(float* x, const float* table, int64_t rowBegin, int64_t rowEnd, int64_t past);

std::string ropeFunctionName(const RopeSpec& spec);

// Throws std::invalid_argument for an odd or non-positive head size, heads < 1, seq < 1,
// rows < 0, or heads that do not fit in a row (heads·headDim > ld).
void validateRopeSpec(const RopeSpec& spec);

std::unique_ptr<llvm::Module> emitRopeModule(llvm::LLVMContext& ctx, const RopeSpec& spec,
                                             const MicroKernelShape& shape);

} // namespace nnc::codegen
