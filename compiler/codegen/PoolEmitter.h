// Emits one 2-D pooling kernel (max or average, PoolSpec in KernelSpec.h) as an
// llvm::Module, specialised on the plane size, window, stride and padding.
//
// The function (poolFunctionName(spec)) has the C signature PoolKernelFn:
//   void f(const float* x, float* out, int64_t planeBegin, int64_t planeEnd)
// and pools planes [planeBegin, planeEnd) of x (planes × h × w, row-major) into out
// (planes × outH × outW); with spec.channels > 0 (NHWC), the range is over units
// (image, output row) of x ([images·h·w, channels]) and out ([images·outH·outW, channels]). Windows that overlap the padding read only the in-bounds
// elements (max: padding never wins, NaN propagates; avg: divides by kh·kw,
// count_include_pad=True); no load touches memory outside x's planes
// [planeBegin, planeEnd), no store outside out's. out must not overlap x.
#pragma once
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <memory>
#include <string>

#include "compiler/codegen/CpuTable.h"
#include "compiler/codegen/KernelSpec.h"

namespace nnc::codegen {

using PoolKernelFn = void (*)(const float* x, float* out, int64_t planeBegin, int64_t planeEnd);

std::string poolFunctionName(const PoolSpec& spec);

// Throws std::invalid_argument for non-positive sizes (h, w, kernel, stride; planes,
// a runtime range, may be 0 but not negative), negative padding, pad > kernel / 2
// (PyTorch's rule, which also keeps every window at least one element inside the
// plane), or an empty output.
void validatePoolSpec(const PoolSpec& spec);

std::unique_ptr<llvm::Module> emitPoolModule(llvm::LLVMContext& ctx, const PoolSpec& spec,
                                             const MicroKernelShape& shape);

// Maps whose one output takes a window of whole rows (outH = outW = 1, no padding,
// kw = w: a global pool, maxpool(7) over 7 × 7) get kernels of their own. NCHW: each
// plane's window is one contiguous run of kh·w values, reduced in vectors, as a max
// or the f64 sum of PoolSpec::doubleSum do not depend on the order the values come in
// (max: NaN propagates as PyTorch's; the sum rounds once); an f32 average keeps
// PyTorch's order and the general kernel. One lane per plane in window order took
// 65× PyTorch's time for global_avgpool over 256 × 56 × 56. NHWC: every kind, blocks
// of channel vectors each folded over the pixels in order.
bool poolsWholeRows(const PoolSpec& spec);

// The NCHW planes' kernel unrolls the border rows, the border columns and a row's taps
// (its full columns and rows are loops): about this many taps for `spec` (channels 0;
// 1 for planes reduced whole, whose code does not grow with the window).
// Past kMaxPlanesUnrolledTaps its code, and LLVM's time on it, grow without bound
// (maxpool((1, 1500), pad=(0, 750)) over 3000 columns: minutes and 6.6 GB), so the
// lowering pools such planes as NHWC images of one channel, whose kernel loops over
// columns and taps (compiler/ops/PoolOps.cpp).
int64_t planesUnrolledTaps(const PoolSpec& spec);
inline constexpr int64_t kMaxPlanesUnrolledTaps = 4096;

} // namespace nnc::codegen
