// Emits one KV-cache append kernel (KvAppendSpec in KernelSpec.h) as an llvm::Module.
//
// The function (kvAppendFunctionName(spec)) has the C signature KvAppendKernelFn:
//   void f(const float* x, float* cache, int64_t rowBegin, int64_t rowEnd, int64_t past)
// and writes the cols floats at column col of rows [rowBegin, rowEnd) of x, head vector
// by head vector, to the planes of their batch entry at position past + i
// (KvCacheLayout) in the spec's dtype (KernelSpec.h: f32 copied, f16/bf16 rounded, i8
// quantised per head vector with its scale). Assumes past + seq <= context. Vectors of the CPU's width, the tail
// masked; f16 narrows with vcvtps2ph when `features` has F16C, else in integer code (the same bits).
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

// Throws std::invalid_argument for rows < 0, seq < 1, seq > context, cols < 1,
// columns outside the rows (col + cols > ld), a dtype other than f32, f16, bf16 and
// i8, or cols that are not an even number of head vectors (2 · kvHeads · headDim).
void validateKvAppendSpec(const KvAppendSpec& spec);

std::unique_ptr<llvm::Module> emitKvAppendModule(llvm::LLVMContext& ctx, const KvAppendSpec& spec,
                                                 const MicroKernelShape& shape, const CpuFeatures& features = {});

} // namespace nnc::codegen
