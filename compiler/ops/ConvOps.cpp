// conv2d(out, kernel, stride, pad, groups) and depthwise(kernel, stride, pad,
// multiplier) over NCHW feature maps (PyTorch nn.Conv2d; depthwise is groups = c).
//   shape:  [c, h, w] → [out, ho, wo], ho = (h + 2·pad − kh) / stride + 1 ≥ 1; groups
//           divide c and out; W is [out, c / groups, kh, kw], b is [out].
//   cost:   out · (c / groups) · kh · kw · ho · wo MACs; out·ho·wo bias adds.
//   lower:  groups = 1: one GEMM over im2col rows of the input (none for a 1×1 stride-1
//           unpadded conv: the NHWC map is the GEMM's A; none either from an NHWC map
//           with channels a multiple of 4: the GEMM reads its conv windows in place,
//           GemmSpec::windows; from NCHW planes, the map is first copied to NHWC with
//           its padding made and the GEMM reads whole window rows) against W viewed as
//           [out, c·kh·kw] (packed at load), bias and the fused activation and residual
//           in its epilogue; its [batch·ho·wo, out] result is the output, left NHWC for
//           the layers after it (lower::MapLayout; docs/lowering.md, "Feature-map
//           layouts"). The im2col reads the input where it lies: NCHW (PyTorch's
//           flattening of W) or NHWC ((tap, channel) columns, W's reordered at load),
//           a chunk of rows at a time into an L2-sized scratch, each multiplied as soon
//           as it is made (one ConvGemmSpec step).
//           groups > 1: per group g of cg = c / groups input channels, the same over the
//           NCHW input into scratch [batch·ho·wo, out / groups], then back to the
//           output's NCHW planes of the group's channels, adding the fused residual
//           (LayoutSpec ToPlanes). A batchnorm FuseEpilogues folded in changes W and b at
//           load. One input channel per group (depthwise, or conv2d with groups =
//           channels): one DepthwiseSpec kernel instead, bias, activation and residual
//           fused — over the NHWC map a conv left (multiplier 1, f32 weights, stored
//           transposed), else over NCHW planes; but a conv2d over one channel with a
//           window of more than 64 taps is the GEMM above, and a depthwise conv of more
//           than 1024 taps goes group by group as groups > 1 does.
#include <fmt/format.h>

#include <algorithm>

#include "compiler/lower/LoweringContext.h"
#include "compiler/ops/LayerConstants.h"
#include "compiler/ops/RuleHelpers.h"
#include "compiler/ops/Rules.h"
#include "compiler/ops/ShapeContext.h"

namespace nnc::ops::conv {
using Role = ir::ParamTensor::Role;

bool shape(ShapeContext &cx, ir::Op &op) {
  if (!cx.requireFloat(op) || !cx.requireRank(op, 3, "a [channels, height, width] feature map")) return false;
  const ir::TensorType &in = cx.in(op);
  ir::LayerAttrs &a = op.attrs;
  const int64_t c = in.shape[1];
  if (op.kind == ir::OpKind::Depthwise) {
    a.groups = c;
    a.out = mulChecked(c, a.multiplier);
  }
  if (c % a.groups != 0)
    return cx.fail(cx.at(op, "groups"),
                   fmt::format("groups={} must divide the {} input channels: {} / {} leaves {}; input is {}", a.groups,
                               c, c, a.groups, c % a.groups, cx.producer(op.inputs[0])));
  if (a.out % a.groups != 0)
    return cx.fail(cx.at(op, "groups"), fmt::format("groups={} must divide the {} output channels: {} / {} leaves {}",
                                                    a.groups, a.out, a.out, a.groups, a.out % a.groups));
  auto ho = cx.spatial(op, "height", in.shape[2], a.kh, a.sh, a.ph);
  auto wo = cx.spatial(op, "width", in.shape[3], a.kw, a.sw, a.pw);
  if (!ho || !wo) return false;
  a.in = c;
  op.type.shape = {in.shape[0], a.out, *ho, *wo};
  cx.param(op, "weight", {a.out, c / a.groups, a.kh, a.kw});
  if (a.bias) cx.param(op, "bias", {a.out}, Role::Bias);
  return true;
}

OpWork cost(const ir::Graph &, const ir::Op &op) {
  const ir::LayerAttrs &a = op.attrs;
  const int64_t ho = op.type.shape[2], wo = op.type.shape[3];
  OpWork w;
  w.macsPerExample = mulChecked(a.out, a.in / a.groups, a.kh, a.kw, ho, wo);
  if (a.bias) w.otherOpsPerExample = perExample(op.type);
  w.macFormula = fmt::format("{} × ({} / {}) × {} × {} × {} × {}", n(a.out), n(a.in), a.groups, a.kh, a.kw, n(ho), n(wo));
  w.paramFormula = fmt::format("{} × ({} / {}) × {} × {}{}", n(a.out), n(a.in), a.groups, a.kh, a.kw,
                               a.bias ? fmt::format(" + {}", n(a.out)) : "");
  return w;
}

namespace {
using lower::MapLayout;

// Rows of A per chunk of a conv's im2col (ConvGemmSpec): about half of L2, so the chunk
// just written is still there when the GEMM reads it (ResNet-18's 3×3 convs at batch 8:
// 206 GFLOP/s on an L2-sized A against 138 on the whole 57 MB one, 1 thread); at least
// 64 rows (several row blocks), at most all of them; and at least N rows, since every
// chunk streams all of W again: a chunk's A then weighs at least W (ResNet-18's last
// convs at batch 8, W 9.4 MB: chunks of 64 rows ran at 144-154 GFLOP/s, one of 392 at
// 165+ on 1 thread, 236-246 -> 289 on 2).
int64_t convChunkRows(const codegen::GemmSpec &gemm) {
  const int64_t l2 = codegen::hostL2BytesOr(512 * 1024);
  return std::min(gemm.M, std::max({int64_t(64), l2 / 2 / (4 * gemm.K), gemm.N}));
}

// groups = 1: one GEMM whose [batch·pixels, out] result is the NHWC output map, bias,
// activation and the residual (NHWC too) in its epilogue. Its A: the NHWC input itself
// for a 1×1 stride-1 unpadded conv (a NCHW input is transposed once), else an im2col
// into scratch from the input where it lies — from NHWC in (tap, channel) order, the
// weight's columns reordered to match at load.
void lowerOneGroup(lower::LoweringContext &cx, const ir::Op &op) {
  const ir::TensorType &in = cx.typeOf(op.inputs[0]);
  const ir::LayerAttrs &a = op.attrs;
  const int64_t batch = in.shape[0], c = in.shape[1];
  codegen::GemmSpec gemm;
  gemm.M = batch * op.type.shape[2] * op.type.shape[3];
  gemm.N = a.out;
  gemm.K = c * a.kh * a.kw;
  gemm.bias = a.bias || !op.foldedNorm.empty();
  gemm.act = activationOf(op.epilogue);
  gemm.residual = op.residualInput >= 0;
  gemm.actAfterResidual = activationOf(op.afterResidual);
  storeWeightsAsLayer(cx.quant(), op, gemm, /*rowsAsStored=*/false);
  const bool pointwise = a.kh == 1 && a.kw == 1 && a.sh == 1 && a.sw == 1 && a.ph == 0 && a.pw == 0;
  const bool fromPixels = cx.layoutOf(op.inputs[0]) == MapLayout::Pixels;
  if (pointwise) {
    const lower::Operand input = cx.in(op, 0, MapLayout::Pixels);
    auto [weights, bias] = gemmConstants(cx, op, gemm, op.name + ".weight", 0);
    cx.step(op, gemm, {input, weights, bias, cx.residual(op, MapLayout::Pixels), cx.out(op, MapLayout::Pixels)});
    return;
  }
  // A strided 1×1 conv (ResNet's downsample) takes its A rows through the chunked
  // im2col below instead: with one tap, K is just c, and the implicit GEMM's per-row
  // window addressing and scattered pixel reads weigh on few k steps (64×56×56 -> 128,
  // stride 2, batch 8, 1 thread: 0.70-0.87 ms as windows, 0.53-0.64 copied first).
  const bool oneTap = a.kh == 1 && a.kw == 1; // strided or padded: pointwise returned above
  if (fromPixels && !oneTap && c % codegen::kWindowChannelMultiple == 0 && gemm.activationType == DType::F32) {
    // An NHWC input: the GEMM reads its conv windows in place (an implicit GEMM).
    gemm.windows = {in.shape[2], in.shape[3], c, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw};
    const lower::Operand input = cx.in(op, 0, MapLayout::Pixels);
    auto [weights, bias] = gemmConstants(cx, op, gemm, op.name + ".weight", 0, a.kh * a.kw);
    cx.step(op, gemm, {input, weights, bias, cx.residual(op, MapLayout::Pixels), cx.out(op, MapLayout::Pixels)});
    return;
  }
  if (!fromPixels && gemm.activationType == DType::F32) {
    // NCHW planes (the image a first conv reads): the map copied to NHWC with its padding
    // made (a 1×1 im2col), then a GEMM reading each window row as one run of kw·c floats.
    codegen::LayoutSpec pad;
    pad.kind = codegen::LayoutSpec::Im2col;
    pad.batch = batch, pad.c = c, pad.h = in.shape[2], pad.w = in.shape[3], pad.cg = c, pad.ph = a.ph, pad.pw = a.pw;
    const int64_t hp = in.shape[2] + 2 * a.ph, wp = in.shape[3] + 2 * a.pw;
    gemm.windows = {hp, wp, c, a.kh, a.kw, a.sh, a.sw, 0, 0, true};
    const lower::Operand padded = cx.scratch(op, batch * hp * wp * c);
    cx.step(op, pad, {cx.in(op, 0, MapLayout::Planes), lower::Operand::none(), padded});
    auto [weights, bias] = gemmConstants(cx, op, gemm, op.name + ".weight", 0, a.kh * a.kw);
    cx.step(op, gemm, {padded, weights, bias, cx.residual(op, MapLayout::Pixels), cx.out(op, MapLayout::Pixels)});
    return;
  }
  codegen::ConvGemmSpec conv;
  conv.gemm = gemm;
  codegen::LayoutSpec &im = conv.im2col;
  im.kind = fromPixels ? codegen::LayoutSpec::PixelsIm2col : codegen::LayoutSpec::Im2col;
  im.batch = batch, im.c = c, im.h = in.shape[2], im.w = in.shape[3], im.cg = c;
  im.kh = a.kh, im.kw = a.kw, im.sh = a.sh, im.sw = a.sw, im.ph = a.ph, im.pw = a.pw;
  conv.chunkRows = convChunkRows(gemm);
  const lower::Operand input = cx.in(op, 0, fromPixels ? MapLayout::Pixels : MapLayout::Planes);
  auto [weights, bias] = gemmConstants(cx, op, gemm, op.name + ".weight", 0, fromPixels ? a.kh * a.kw : 1);
  const lower::Operand scratch = cx.scratch(op, conv.scratchFloats());
  cx.step(op, conv,
          {input, weights, bias, cx.residual(op, MapLayout::Pixels), scratch, cx.out(op, MapLayout::Pixels)});
}
} // namespace

// Taps beyond which a conv2d over one channel goes to the GEMM.
constexpr int64_t kMaxDepthwiseGemmTaps = 64;

void lower(lower::LoweringContext &cx, const ir::Op &op) {
  const ir::TensorType &in = cx.typeOf(op.inputs[0]);
  const ir::LayerAttrs &a = op.attrs;
  const int64_t batch = in.shape[0], c = in.shape[1];
  const int64_t cg = c / a.groups, ng = a.out / a.groups, pixels = op.type.shape[2] * op.type.shape[3];
  // A conv2d over one channel with a wide window (a 1-D signal's [1, 1, length] with a
  // 400-tap window, 64 outputs) is a GEMM over its im2col rows, whose outputs share each
  // row of taps: conv2d(64, (1, 400), stride=(1, 160)) over 16,000 samples runs 50 µs so.
  // A depthwise conv of any window takes its own kernel, whose code grows with at most
  // 32 window columns (DepthwiseEmitter.cpp): a 33×33 window over 32 64×64 planes ran
  // 67 ms group by group as GEMMs, 1.4 ms there.
  const bool viaGemm = a.groups == 1 && a.kh * a.kw > kMaxDepthwiseGemmTaps;
  if (cg == 1 && !viaGemm) { // depthwise (or a conv2d with groups = channels): a kernel of its own
    codegen::DepthwiseSpec dw;
    dw.weightType = op.weightDType; // a table of one row per output plane (rowTableLayout)
    dw.group = op.weightDType == DType::I4 ? cx.quant().group : 0;
    dw.batch = batch, dw.c = c, dw.multiplier = ng, dw.h = in.shape[2], dw.w = in.shape[3];
    dw.kh = a.kh, dw.kw = a.kw, dw.sh = a.sh, dw.sw = a.sw, dw.ph = a.ph, dw.pw = a.pw;
    dw.bias = a.bias || !op.foldedNorm.empty();
    dw.act = activationOf(op.epilogue);
    dw.residual = op.residualInput >= 0;
    // On the NHWC map a conv left, channels are the vectors (weights transposed at load).
    dw.pixels = cx.layoutOf(op.inputs[0]) == MapLayout::Pixels && ng == 1 && dw.weightType == DType::F32;
    const MapLayout layout = dw.pixels ? MapLayout::Pixels : MapLayout::Planes;
    auto [weights, bias] = layerConstants(cx, op, op.name + ".weight", a.out, a.kh * a.kw, 0, dw.bias, std::nullopt,
                                          dw.weightType, 1, dw.pixels);
    cx.step(op, dw, {cx.in(op, 0, layout), weights, bias, cx.residual(op, layout), cx.out(op, layout)});
    return;
  }
  if (a.groups == 1) return lowerOneGroup(cx, op);
  const lower::Operand input = cx.in(op), residual = cx.residual(op), output = cx.out(op);
  for (int64_t g = 0; g < a.groups; ++g) {
    codegen::LayoutSpec im;
    im.kind = codegen::LayoutSpec::Im2col;
    im.batch = batch, im.c = c, im.h = in.shape[2], im.w = in.shape[3], im.c0 = g * cg, im.cg = cg;
    im.kh = a.kh, im.kw = a.kw, im.sh = a.sh, im.sw = a.sw, im.ph = a.ph, im.pw = a.pw;
    codegen::GemmSpec gemm;
    gemm.M = batch * pixels;
    gemm.N = ng;
    gemm.K = cg * a.kh * a.kw;
    gemm.bias = a.bias || !op.foldedNorm.empty();
    gemm.act = activationOf(op.epilogue);
    storeWeightsAsLayer(cx.quant(), op, gemm, /*rowsAsStored=*/false);
    lower::Operand cols = cx.scratch(op, gemm.M * gemm.K);
    cx.step(op, im, {input, lower::Operand::none(), cols});
    auto [weights, bias] = gemmConstants(cx, op, gemm, op.name + ".weight", g * ng);
    lower::Operand result = cx.scratch(op, gemm.M * gemm.N);
    cx.step(op, gemm, {cols, weights, bias, lower::Operand::none(), result});
    codegen::LayoutSpec back;
    back.kind = codegen::LayoutSpec::ToPlanes;
    back.batch = batch, back.c = a.out, back.h = op.type.shape[2], back.w = op.type.shape[3];
    back.c0 = g * ng, back.cg = ng, back.residual = op.residualInput >= 0;
    cx.step(op, back, {result, residual, output});
  }
}

} // namespace nnc::ops::conv
