// Emits one data-movement kernel of a convolution lowered onto the GEMM (LayoutSpec in
// KernelSpec.h: im2col from NCHW or NHWC, or the GEMM's [pixels, channels] result back
// to NCHW planes)
// as an llvm::Module, specialised on every size of the spec.
//
// The function (layoutFunctionName(spec)) has the C signature LayoutKernelFn:
//   void f(const float* x, const float* residual, float* out, int64_t unitBegin, int64_t unitEnd)
// and moves units [unitBegin, unitEnd) of spec.units() (Im2col: output rows (b, i);
// ToPlanes: tiles of kToPlanesTile pixels of one image). residual is read only by
// ToPlanes with spec.residual. The whole map's pointers (the im2col kinds: x; ToPlanes:
// residual and out) point at channel spec.c0 of image 0: the code does not depend on c0, so one
// kernel serves every group of a conv (layoutChannelOffset says how far to move them).
// No load touches memory outside x (padding taps load a
// clamped in-plane address and select 0), no store outside out's units. out must not
// overlap x; residual may be out itself.
#pragma once
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <memory>
#include <string>

#include "compiler/codegen/CpuTable.h"
#include "compiler/codegen/KernelSpec.h"

namespace nnc::codegen {

using LayoutKernelFn = void (*)(const float* x, const float* residual, float* out, int64_t unitBegin,
                                int64_t unitEnd);

// Pixels per ToPlanes unit: a tile of kToPlanesTile rows × cg channels of the GEMM's
// result is read while it is in L1, and written as cg runs of contiguous floats.
inline constexpr int64_t kToPlanesTile = 16;

// Units of the runtime range (what a thread pool splits).
int64_t layoutUnits(const LayoutSpec& spec);
// Floats from the whole map's start to channel c0 of image 0 (NCHW: c0·h·w; NHWC: c0).
inline int64_t layoutChannelOffset(const LayoutSpec& spec) {
  return spec.kind == LayoutSpec::PixelsIm2col ? spec.c0 : spec.c0 * spec.h * spec.w;
}

std::string layoutFunctionName(const LayoutSpec& spec);

// Throws std::invalid_argument for non-positive sizes, a group outside the channels,
// negative padding or an empty output.
void validateLayoutSpec(const LayoutSpec& spec);

std::unique_ptr<llvm::Module> emitLayoutModule(llvm::LLVMContext& ctx, const LayoutSpec& spec,
                                               const MicroKernelShape& shape);

} // namespace nnc::codegen
