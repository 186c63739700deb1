// Emits one per-channel kernel over a [batch, c, plane] tensor (ChannelSpec in
// KernelSpec.h: a batchnorm's scale and shift, or PyTorch's LocalResponseNorm) as an
// llvm::Module, specialised on every size of the spec.
//
// The function (channelFunctionName(spec)) has the C signature ChannelKernelFn:
//   void f(const float* x, const float* scale, const float* shift, float* out,
//          int64_t imageBegin, int64_t imageEnd)
// over images [imageBegin, imageEnd). scale and shift (c floats each) are read by
// ScaleShift only. No load or store leaves the images' elements (the plane's tail is
// masked). ScaleShift allows out == x; Lrn needs out not to overlap x.
#pragma once
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <memory>
#include <string>

#include "compiler/codegen/CpuTable.h"
#include "compiler/codegen/KernelSpec.h"

namespace nnc::codegen {

using ChannelKernelFn = void (*)(const float* x, const float* scale, const float* shift, float* out,
                                 int64_t imageBegin, int64_t imageEnd);

std::string channelFunctionName(const ChannelSpec& spec);

// Throws std::invalid_argument for non-positive sizes, an lrn size < 1, or
// non-finite lrn constants.
void validateChannelSpec(const ChannelSpec& spec);

std::unique_ptr<llvm::Module> emitChannelModule(llvm::LLVMContext& ctx, const ChannelSpec& spec,
                                                const MicroKernelShape& shape);

} // namespace nnc::codegen
