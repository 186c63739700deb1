// conv2d(out, kernel, stride, pad, groups) and depthwise(kernel, stride, pad,
// multiplier) over NCHW feature maps (PyTorch nn.Conv2d; depthwise is groups = c).
//   shape:  [c, h, w] → [out, ho, wo], ho = (h + 2·pad − kh) / stride + 1 ≥ 1; groups
//           divide c and out; W is [out, c / groups, kh, kw], b is [out].
//   cost:   out · (c / groups) · kh · kw · ho · wo MACs; out·ho·wo bias adds.
//   lower:  not yet (issue: conv nets run).
#include <fmt/format.h>

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

} // namespace nnc::ops::conv
