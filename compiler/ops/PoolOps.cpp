// maxpool / avgpool(kernel, stride = kernel, pad), global_avgpool and flatten over NCHW
// feature maps (PyTorch nn.MaxPool2d, nn.AvgPool2d with count_include_pad=True,
// AdaptiveAvgPool2d(1) + flatten, nn.Flatten).
//   shape:  [c, h, w] → [c, ho, wo] (pad ≤ kernel / 2, floor division); global:
//           [c, h, w] → [c]; flatten: [...] → [prod].
//   cost:   one compare / add per window element (ho·wo·c·kh·kw); global: one per input.
//   lower:  pooling: one PoolSpec kernel over the batch × channel planes, or over the
//           NHWC map a conv left (channels as vectors; the output stays NHWC); flatten
//           is a view (of the planes); global_avgpool is an average pool whose window is
//           the whole map.
#include <fmt/format.h>

#include "compiler/codegen/CpuTable.h"
#include "compiler/codegen/PoolEmitter.h"
#include "compiler/lower/LoweringContext.h"
#include "compiler/ops/RuleHelpers.h"
#include "compiler/ops/Rules.h"
#include "compiler/ops/ShapeContext.h"

namespace nnc::ops::pool {

bool shape(ShapeContext &cx, ir::Op &op) {
  if (!cx.requireFloat(op) || !cx.requireRank(op, 3, "a [channels, height, width] feature map")) return false;
  const ir::TensorType &in = cx.in(op);
  const ir::LayerAttrs &a = op.attrs;
  if (2 * a.ph > a.kh || 2 * a.pw > a.kw)
    return cx.fail(cx.at(op, "pad"),
                   fmt::format("{} pad must be at most half the kernel: kernel ({}, {}) allows pad up to ({}, {}), "
                               "found ({}, {})",
                               ir::opKindName(op.kind), a.kh, a.kw, a.kh / 2, a.kw / 2, a.ph, a.pw));
  auto ho = cx.spatial(op, "height", in.shape[2], a.kh, a.sh, a.ph);
  auto wo = cx.spatial(op, "width", in.shape[3], a.kw, a.sw, a.pw);
  if (!ho || !wo) return false;
  op.type.shape = {in.shape[0], in.shape[1], *ho, *wo};
  return true;
}

OpWork cost(const ir::Graph &, const ir::Op &op) {
  OpWork w;
  w.otherOpsPerExample = mulChecked(perExample(op.type), op.attrs.kh, op.attrs.kw);
  return w;
}

namespace {
// The pool over the input where it lies: NCHW planes, or the NHWC map a conv left
// (lower::MapLayout), whose channels are then the kernel's vectors.
codegen::PoolSpec poolOver(lower::LoweringContext &cx, const ir::Op &op) {
  const ir::TensorType &in = cx.typeOf(op.inputs[0]);
  codegen::PoolSpec spec;
  const bool pixels = cx.layoutOf(op.inputs[0]) == lower::MapLayout::Pixels;
  spec.planes = pixels ? in.shape[0] : in.shape[0] * in.shape[1];
  spec.channels = pixels ? in.shape[1] : 0;
  spec.h = in.shape[2];
  spec.w = in.shape[3];
  return spec;
}
// Planes whose window the planes' kernel would unroll into too much code (a wide
// window with many border columns: codegen::planesUnrolledTaps) are pooled as NHWC
// images of one channel each, which in memory they are; that kernel loops.
void loopWideWindows(codegen::PoolSpec &spec) {
  if (spec.channels == 0 && codegen::planesUnrolledTaps(spec) > codegen::kMaxPlanesUnrolledTaps) spec.channels = 1;
}
// NHWC pools group 8 full pixels (PoolSpec::pixelGroup) where the map stays in the
// caches, 2 where it is streamed from memory: more than half the last-level cache.
// Measured (Zen 4, 1 thread, maxpool 3×3 after a conv, the kernel's time): 64 × 112 ×
// 112 at batch 8, stride 2: 4.4 ms in groups of 8, 2.0 in groups of 2 (and 1.4 for the
// same planes in NCHW); stride 1 6.3 → 3.6 ms; 512 × 56 × 56, stride 2, 5.2 → 4.6 ms;
// SPPF's 5×5 stride 1 over 512 × 20 × 20 (6.5 MB at batch 8) keeps 8: 2.15 ms, 2.7 in 2s.
// Whole-row pools (codegen::poolsWholeRows) fold channel vectors, not pixel groups.
void groupPixelsByWhereTheMapLies(codegen::PoolSpec &spec) {
  if (spec.channels == 0 || codegen::poolsWholeRows(spec)) return;
  const codegen::CacheSizes &caches = codegen::hostCacheSizes();
  const int64_t lastLevel = caches.l3 > 0 ? caches.l3 : caches.l2;
  const long double mapBytes = 4.0L * spec.planes * spec.h * spec.w * spec.channels;
  if (lastLevel > 0 && mapBytes > lastLevel / 2) spec.pixelGroup = 2;
}
// The map's layout: Pixels for the NHWC map a conv left; Planes otherwise (also for
// planes pooled as one-channel images).
lower::MapLayout layoutOf(lower::LoweringContext &cx, const ir::Op &op) { return cx.layoutOf(op.inputs[0]); }
} // namespace

void lower(lower::LoweringContext &cx, const ir::Op &op) {
  const ir::LayerAttrs &a = op.attrs;
  codegen::PoolSpec spec = poolOver(cx, op);
  spec.kind = op.kind == ir::OpKind::MaxPool ? codegen::PoolSpec::Max : codegen::PoolSpec::Avg;
  spec.kh = a.kh, spec.kw = a.kw, spec.sh = a.sh, spec.sw = a.sw, spec.ph = a.ph, spec.pw = a.pw;
  const lower::MapLayout layout = layoutOf(cx, op);
  loopWideWindows(spec);
  groupPixelsByWhereTheMapLies(spec);
  cx.step(op, spec, {cx.in(op, 0, layout), cx.out(op, layout)});
}

void globalLower(lower::LoweringContext &cx, const ir::Op &op) {
  codegen::PoolSpec spec = poolOver(cx, op);
  spec.kind = codegen::PoolSpec::Avg;
  spec.doubleSum = true; // a mean of up to h·w values: f32 adds in order lost 2.7e-6 over 56 × 56
  spec.kh = spec.h;
  spec.kw = spec.w;
  const lower::MapLayout layout = layoutOf(cx, op);
  loopWideWindows(spec);
  // [batch, c, 1, 1] from either layout is [batch, c] in memory: the output is plain.
  cx.step(op, spec, {cx.in(op, 0, layout), cx.out(op)});
}

bool globalShape(ShapeContext &cx, ir::Op &op) {
  if (!cx.requireFloat(op) || !cx.requireRank(op, 3, "a [channels, height, width] feature map")) return false;
  op.type.shape = {cx.in(op).shape[0], cx.in(op).shape[1]};
  return true;
}

OpWork globalCost(const ir::Graph &g, const ir::Op &op) {
  OpWork w;
  w.otherOpsPerExample = perExample(g.op(op.inputs[0]).type);
  return w;
}

bool flattenShape(ShapeContext &cx, ir::Op &op) {
  op.type.shape = {cx.in(op).shape[0], perExample(cx.in(op))};
  return true;
}

} // namespace nnc::ops::pool
