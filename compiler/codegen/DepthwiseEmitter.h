// Emits one depthwise convolution kernel (DepthwiseSpec in KernelSpec.h) as an
// llvm::Module, specialised on every size of the spec: a GEMM of one channel (K = kh·kw,
// N = multiplier) is the wrong shape, so this kernel walks the planes directly.
//
// The function (depthwiseFunctionName(spec)) has the C signature DepthwiseKernelFn:
//   void f(const float* x, const float* W, const float* bias, const float* residual,
//          float* out, int64_t planeBegin, int64_t planeEnd)
// and computes output planes [planeBegin, planeEnd) (plane p = b·c·multiplier + o);
// with spec.pixels, output rows [planeBegin, planeEnd) (row b·outH + i) of NHWC maps.
// bias is read only with spec.bias, residual only with spec.residual (it may be out).
// No load leaves x's planes (padding taps load a clamped in-plane address and select
// 0), no store leaves out's planes [planeBegin, planeEnd).
#pragma once
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <memory>
#include <string>

#include "compiler/codegen/CpuTable.h"
#include "compiler/codegen/KernelSpec.h"

namespace nnc::codegen {

using DepthwiseKernelFn = void (*)(const float* x, const float* W, const float* bias, const float* residual,
                                   float* out, int64_t planeBegin, int64_t planeEnd);

std::string depthwiseFunctionName(const DepthwiseSpec& spec);

// Throws std::invalid_argument for non-positive sizes, negative padding or an empty output.
void validateDepthwiseSpec(const DepthwiseSpec& spec);

std::unique_ptr<llvm::Module> emitDepthwiseModule(llvm::LLVMContext& ctx, const DepthwiseSpec& spec,
                                                  const MicroKernelShape& shape);

} // namespace nnc::codegen
