// Emits one KV-cache append kernel (KvAppendSpec in KernelSpec.h) as an llvm::Module.
//
// The function (kvAppendFunctionName(spec)) has the C signature KvAppendKernelFn:
//   void f(const float* x, float* cache, int64_t rowBegin, int64_t rowEnd, int64_t past)
// and copies the cols floats at column col of rows [rowBegin, rowEnd) of x to their
// cache rows (b·context + past + i). Assumes past + seq <= context. Each row is copied
// in vectors of the CPU's width, the tail masked.
#pragma once
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <memory>
#include <string>

#include "compiler/codegen/CpuTable.h"
#include "compiler/codegen/KernelSpec.h"

namespace nnc::codegen {

using KvAppendKernelFn = void (*)(const float* x, float* cache, int64_t rowBegin, int64_t rowEnd, int64_t past);

std::string kvAppendFunctionName(const KvAppendSpec& spec);

// Throws std::invalid_argument for rows < 0, seq < 1, seq > context, cols < 1, or
// columns outside the rows (col + cols > ld).
void validateKvAppendSpec(const KvAppendSpec& spec);

std::unique_ptr<llvm::Module> emitKvAppendModule(llvm::LLVMContext& ctx, const KvAppendSpec& spec,
                                                 const MicroKernelShape& shape);

} // namespace nnc::codegen
