// Emits one row-wise elementwise kernel (activation, softmax over the last axis, or
// add) as an llvm::Module, specialised on the column count.
//
// The function (elementwiseFunctionName(spec)) has the C signature ElementwiseKernelFn:
//   void f(const float* x, const float* y, float* out, int64_t rowBegin, int64_t rowEnd,
//          int64_t past)
// and processes rows [rowBegin, rowEnd) of rows×cols row-major tensors (y is read only
// by Add and GatedProduct, same shape, and AddPositions: row r reads the table's row
// past + r mod period — a decoder's later positions start at its cache's length; the
// others ignore past). The row is an index into the table's own layout, which below
// f32 holds scales after the rows and two i4 rows a byte: no pointer offset can say it. cols is a constant: whole vectors in a loop, the tail as masked vector ops.
// out may equal x or y: every element is read before it is written (softmax's later
// passes re-read only out).
// Softmax is max-subtracted: out = exp(x - max) / sum(exp(x - max)); NaN propagates.
#pragma once
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <memory>
#include <string>

#include "compiler/codegen/CpuTable.h"
#include "compiler/codegen/KernelSpec.h"

namespace nnc::codegen {

using ElementwiseKernelFn = void (*)(const float* x, const float* y, float* out,
                                     int64_t rowBegin, int64_t rowEnd, int64_t past);

std::string elementwiseFunctionName(const ElementwiseSpec& spec);

// Throws std::invalid_argument when rows < 0 or cols < 1.
void validateElementwiseSpec(const ElementwiseSpec& spec);

std::unique_ptr<llvm::Module> emitElementwiseModule(llvm::LLVMContext& ctx,
                                                    const ElementwiseSpec& spec,
                                                    const MicroKernelShape& shape);

} // namespace nnc::codegen
