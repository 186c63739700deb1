// Emits one row-gather kernel (GatherSpec in KernelSpec.h: an embedding's lookup) as an
// llvm::Module, specialised on the vocabulary and the row width.
//
// The function (gatherFunctionName(spec)) has the C signature GatherKernelFn:
//   void f(const int32_t* ids, const float* table, float* out, int64_t rowBegin, int64_t rowEnd)
// and writes rows [rowBegin, rowEnd) of out[rows, cols]: out[r, :] = table[ids[r], :].
// An id outside [0, vocab) reads nothing and writes a row of zeros (the runtime refuses
// such ids before the step; the kernel only guarantees no read out of bounds). Each row
// is copied in vectors of the CPU's width, the tail masked.
#pragma once
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <memory>
#include <string>

#include "compiler/codegen/CpuTable.h"
#include "compiler/codegen/KernelSpec.h"

namespace nnc::codegen {

using GatherKernelFn = void (*)(const int32_t* ids, const float* table, float* out, int64_t rowBegin,
                                int64_t rowEnd);

std::string gatherFunctionName(const GatherSpec& spec);

// Throws std::invalid_argument when rows < 0, vocab < 1, cols < 1 or seq < 1.
void validateGatherSpec(const GatherSpec& spec);

std::unique_ptr<llvm::Module> emitGatherModule(llvm::LLVMContext& ctx, const GatherSpec& spec,
                                               const MicroKernelShape& shape);

} // namespace nnc::codegen
