// Emits one last-position kernel (LastPositionSpec in KernelSpec.h) as an llvm::Module.
//
// The function (lastPositionFunctionName(spec)) has the C signature LastPositionKernelFn:
//   void f(const float* x, float* out, int64_t rowBegin, int64_t rowEnd)
// and copies row b·seq + seq − 1 of x to row b of out for b in [rowBegin, rowEnd), in
// vectors of the CPU's width, the tail masked.
#pragma once
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <memory>
#include <string>

#include "compiler/codegen/CpuTable.h"
#include "compiler/codegen/KernelSpec.h"

namespace nnc::codegen {

using LastPositionKernelFn = void (*)(const float* x, float* out, int64_t rowBegin, int64_t rowEnd);

std::string lastPositionFunctionName(const LastPositionSpec& spec);

// Throws std::invalid_argument for rows < 0, seq < 1 or cols < 1.
void validateLastPositionSpec(const LastPositionSpec& spec);

std::unique_ptr<llvm::Module> emitLastPositionModule(llvm::LLVMContext& ctx, const LastPositionSpec& spec,
                                                     const MicroKernelShape& shape);

} // namespace nnc::codegen
