// Elementwise layers: the activations relu … silu and softmax (over the last axis),
// identity and dropout (the identity at inference), and add (the join of residual and
// shortcut, which the frontend inserts).
//   shape:  f32 in, the same shape out; add: both operands of one shape.
//   cost:   one operation per output element (identity, dropout: none).
//   lower:  one ElementwiseSpec kernel over rows of the last axis (an activation or
//           add of a feature map: in the layout its first input has, NHWC rows of
//           channels or NCHW rows; lower::MapLayout); identity and
//           dropout are views; an activation or add that FuseEpilogues moved into a
//           GEMM is gone before lowering.
#include <fmt/format.h>

#include "compiler/lower/LoweringContext.h"
#include "compiler/ops/RuleHelpers.h"
#include "compiler/ops/Rules.h"
#include "compiler/ops/ShapeContext.h"

namespace nnc::ops::elementwise {
using lower::Operand;

bool shape(ShapeContext &cx, ir::Op &op) { return cx.requireFloat(op); }

namespace {
// An activation or add works on a feature map in either layout: it keeps the one its
// first input has (the other input is brought to it), with rows of channels for NHWC.
lower::MapLayout layoutFollowed(lower::LoweringContext &cx, const ir::Op &op) {
  return op.type.shape.size() == 4 ? cx.layoutOf(op.inputs[0]) : lower::MapLayout::Planes;
}
std::pair<int64_t, int64_t> rowsColsIn(lower::MapLayout layout, const ir::TensorType &t) {
  if (layout == lower::MapLayout::Planes) return rowsCols(t);
  return {t.elements() / t.shape[1], t.shape[1]};
}
} // namespace

void lowerActivation(lower::LoweringContext &cx, const ir::Op &op) {
  const lower::MapLayout layout = layoutFollowed(cx, op);
  auto [rows, cols] = rowsColsIn(layout, op.type);
  cx.step(op, codegen::ElementwiseSpec{codegen::ElementwiseSpec::Activation, activationOf(op.kind), rows, cols},
          {cx.in(op, 0, layout), Operand::none(), cx.out(op, layout)});
}

void lowerSoftmax(lower::LoweringContext &cx, const ir::Op &op) {
  auto [rows, cols] = rowsCols(op.type);
  cx.step(op, codegen::ElementwiseSpec{codegen::ElementwiseSpec::Softmax, codegen::Activation::None, rows, cols},
          {cx.in(op), Operand::none(), cx.out(op)});
}

bool addShape(ShapeContext &cx, ir::Op &op) {
  const ir::TensorType &body = cx.in(op, 0), &other = cx.in(op, 1);
  if (body.shape == other.shape) return true;
  const ir::Op &second = cx.graph().op(op.inputs[1]);
  const bool plain = second.kind == ir::OpKind::Input || op.inputs[1] < op.inputs[0];
  return cx.fail(op.loc, fmt::format("residual: the body returns shape {} but {} has shape {}; the two must match to "
                                     "be added (body ends with {})",
                                     perExampleDims(body.shape), plain ? "its input x" : "the shortcut",
                                     perExampleDims(other.shape), cx.producer(op.inputs[0])));
}

void lowerAdd(lower::LoweringContext &cx, const ir::Op &op) {
  const lower::MapLayout layout = layoutFollowed(cx, op);
  auto [rows, cols] = rowsColsIn(layout, op.type);
  cx.step(op, codegen::ElementwiseSpec{codegen::ElementwiseSpec::Add, codegen::Activation::None, rows, cols},
          {cx.in(op, 0, layout), cx.in(op, 1, layout), cx.out(op, layout)});
}

} // namespace nnc::ops::elementwise
