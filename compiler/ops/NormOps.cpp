// Normalisations: lrn(size, alpha, beta, k) as PyTorch's LocalResponseNorm over
// channels; batchnorm(eps) over channel axis 1 with running statistics (inference);
// layernorm(eps, bias) and rmsnorm(eps) over the last axis (biased variance; rmsnorm
// as Hugging Face's LlamaRMSNorm).
//   shape:  the same shape out; batchnorm: weight, bias [c] and buffers running_mean,
//           running_var [c]; layernorm: weight (+ bias) [d]; rmsnorm: weight [d]. Scales
//           start at one, shifts and means at zero, variances at one (PyTorch's init).
//   cost:   one operation per element.
//   lower:  layernorm, rmsnorm: one NormSpec kernel over the rows of the last axis;
//           lrn: one ChannelSpec kernel over [batch, c, plane]; batchnorm: folded into a
//           conv or dense before it (FuseEpilogues, LayerConstants.h), else a ChannelSpec
//           scale and shift whose coefficients are made at load from its four tensors.
#include <fmt/format.h>

#include "compiler/lower/LoweringContext.h"
#include "compiler/ops/RuleHelpers.h"
#include "compiler/ops/Rules.h"
#include "compiler/ops/ShapeContext.h"

namespace nnc::ops::norm {
using Role = ir::ParamTensor::Role;
using Init = ir::ParamTensor::Init;

bool lrnShape(ShapeContext &cx, ir::Op &op) {
  if (!cx.requireFloat(op)) return false;
  const ir::TensorType &in = cx.in(op);
  if (in.shape.size() < 3)
    return cx.fail(op.loc, fmt::format("lrn expects [channels, ...] with at least 2 axes, found {}: {}",
                                       perExampleDims(in.shape), cx.producer(op.inputs[0])));
  return true;
}

bool batchNormShape(ShapeContext &cx, ir::Op &op) {
  if (!cx.requireFloat(op)) return false;
  const ir::TensorType &in = cx.in(op);
  const int64_t c = in.shape.size() > 1 ? in.shape[1] : 1;
  cx.param(op, "weight", {c}, Role::Weight, Init::Ones);
  cx.param(op, "bias", {c}, Role::Bias, Init::Zeros);
  cx.param(op, "running_mean", {c}, Role::Buffer, Init::Zeros);
  cx.param(op, "running_var", {c}, Role::Buffer, Init::Ones);
  return true;
}

bool layerNormShape(ShapeContext &cx, ir::Op &op) {
  if (!cx.requireFloat(op)) return false;
  const int64_t d = cx.in(op).shape.back();
  cx.param(op, "weight", {d}, Role::Weight, Init::Ones);
  if (op.attrs.bias) cx.param(op, "bias", {d}, Role::Bias, Init::Zeros);
  return true;
}

bool rmsNormShape(ShapeContext &cx, ir::Op &op) {
  if (!cx.requireFloat(op)) return false;
  cx.param(op, "weight", {cx.in(op).shape.back()}, Role::Weight, Init::Ones);
  return true;
}

void lower(lower::LoweringContext &cx, const ir::Op &op) {
  auto [rows, cols] = rowsCols(op.type);
  codegen::NormSpec spec;
  spec.kind = op.kind == ir::OpKind::RmsNorm ? codegen::NormSpec::RmsNorm : codegen::NormSpec::LayerNorm;
  spec.rows = rows;
  spec.cols = cols;
  spec.eps = op.attrs.eps;
  spec.shift = op.kind == ir::OpKind::LayerNorm && op.attrs.bias;
  // Its weight and bias in the layer's dtype (LANGUAGE.md: every weighted layer; the
  // report counts them so), each one row of rowTableLayout, widened in the kernel.
  spec.paramType = op.weightDType;
  spec.group = op.weightDType == DType::I4 ? cx.quant().group : 0;
  lower::Operand gamma = cx.tensor(op.name + ".weight", {cols}, spec.paramType);
  lower::Operand beta = spec.shift ? cx.tensor(op.name + ".bias", {cols}, spec.paramType) : lower::Operand::none();
  cx.step(op, spec, {cx.in(op), gamma, beta, cx.out(op)});
}

namespace {
// A [batch, c, ...] tensor as [batch, c, plane]; a vector [batch] is one channel.
codegen::ChannelSpec channels(const ir::TensorType &t) {
  codegen::ChannelSpec spec;
  spec.batch = t.shape[0];
  spec.c = t.shape.size() > 1 ? t.shape[1] : 1;
  spec.plane = t.elements() / (spec.batch * spec.c);
  return spec;
}
} // namespace

namespace {
// On [seq, d] the channel axis of lrn and batchnorm is the sequence axis (LANGUAGE.md:
// axis 0 of the example), so each position has its own coefficients and lrn mixes
// neighbouring positions. A decoder's step sees only its new positions: such a layer
// cannot decode (it was run with the step's positions as channels 0, 1, ...).
bool refusesDecoding(lower::LoweringContext &cx, const ir::Op &op) {
  if (cx.kvContext() == 0 || op.type.shape.size() != 3) return false;
  cx.notRunnable(op, "normalises across the sequence axis (the channel axis of [seq, d]): a decoder's step sees "
                     "only its new positions");
  return true;
}
} // namespace

void lrnLower(lower::LoweringContext &cx, const ir::Op &op) {
  if (refusesDecoding(cx, op)) return;
  codegen::ChannelSpec spec = channels(op.type);
  spec.kind = codegen::ChannelSpec::Lrn;
  spec.size = op.attrs.size;
  spec.alpha = op.attrs.alpha, spec.beta = op.attrs.beta, spec.k = op.attrs.k;
  cx.step(op, spec, {cx.in(op), lower::Operand::none(), lower::Operand::none(), cx.out(op)});
}

void batchNormLower(lower::LoweringContext &cx, const ir::Op &op) {
  if (refusesDecoding(cx, op)) return;
  codegen::ChannelSpec spec = channels(op.type);
  spec.kind = codegen::ChannelSpec::ScaleShift;
  using Source = lower::WeightRecipe::Source;
  auto coefficient = [&](Source source, const char *what) {
    lower::WeightRecipe r;
    r.name = op.name + " " + what;
    r.source = source;
    r.tensors = {op.name};
    r.shape = {spec.c};
    r.eps = op.attrs.eps;
    return cx.constant(std::move(r));
  };
  cx.step(op, spec, {cx.in(op), coefficient(Source::NormScale, "scale"), coefficient(Source::NormShift, "shift"),
                     cx.out(op)});
}

} // namespace nnc::ops::norm
