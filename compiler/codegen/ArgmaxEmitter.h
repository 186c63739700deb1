// Emits one argmax kernel (ArgmaxSpec in KernelSpec.h) as an llvm::Module.
//
// The function (argmaxFunctionName(spec)) has the C signature ArgmaxKernelFn:
//   void f(const float* x, int32_t* out, int64_t rowBegin, int64_t rowEnd)
// and writes out[r] = the first index of the largest value of row r of x (cols floats)
// for r in [rowBegin, rowEnd); NaN never wins, a row with no other value gives 0.
// Vectorised with the CPU row's width W: W lanes each keep a running maximum and its
// first column, then a fixed-order reduction over the lanes (largest value, the
// smaller column on ties) gives the row's first maximum.
#pragma once
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <memory>
#include <string>

#include "compiler/codegen/CpuTable.h"
#include "compiler/codegen/KernelSpec.h"

namespace nnc::codegen {

using ArgmaxKernelFn = void (*)(const float* x, int32_t* out, int64_t rowBegin, int64_t rowEnd);

std::string argmaxFunctionName(const ArgmaxSpec& spec);

// The columns an argmax kernel takes: i32 indices, with room for the lanes' index
// vector and the "no column yet" mark past the last column.
inline constexpr int64_t kArgmaxMaxCols = (int64_t(1) << 31) - 64;

// Throws std::invalid_argument for rows < 0 or cols outside [1, kArgmaxMaxCols].
void validateArgmaxSpec(const ArgmaxSpec& spec);

std::unique_ptr<llvm::Module> emitArgmaxModule(llvm::LLVMContext& ctx, const ArgmaxSpec& spec,
                                               const MicroKernelShape& shape);

} // namespace nnc::codegen
