// Emits one normalisation kernel (layernorm or rmsnorm over the last axis, NormSpec in
// KernelSpec.h) as an llvm::Module, specialised on the column count and eps.
//
// The function (normFunctionName(spec)) has the C signature NormKernelFn:
//   void f(const float* x, const float* gamma, const float* beta, float* out,
//          int64_t rowBegin, int64_t rowEnd)
// and normalises rows [rowBegin, rowEnd) of rows×cols row-major tensors; beta is read
// only by layernorm with spec.shift (rmsnorm never reads it: pass null). Statistics
// are f32 sums over vectors in a fixed order that depends on cols and the CPU row's
// vector width only (so never on how rows are split over threads): the mean first and
// then the variance of (x − mean) (two passes: stable for inputs with a large mean;
// both on the row shifted by its first element, see NormEmitter.cpp); 1/sqrt is a
// correctly rounded sqrt and a division. out may equal x.
#pragma once
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <memory>
#include <string>

#include "compiler/codegen/CpuTable.h"
#include "compiler/codegen/KernelSpec.h"

namespace nnc::codegen {

using NormKernelFn = void (*)(const float* x, const float* gamma, const float* beta, float* out,
                              int64_t rowBegin, int64_t rowEnd);

std::string normFunctionName(const NormSpec& spec);

// Throws std::invalid_argument when rows < 0, cols < 1, or eps is not finite or < 0.
void validateNormSpec(const NormSpec& spec);

std::unique_ptr<llvm::Module> emitNormModule(llvm::LLVMContext& ctx, const NormSpec& spec,
                                             const MicroKernelShape& shape);

} // namespace nnc::codegen
