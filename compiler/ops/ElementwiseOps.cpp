// Elementwise layers: the activations relu … silu and softmax (over the last axis),
// identity and dropout (the identity at inference), and add (the join of residual and
// shortcut, which the frontend inserts).
//   shape:  f32 in, the same shape out; add: both operands of one shape.
//   cost:   one operation per output element (identity, dropout: none).
//   lower:  one ElementwiseSpec kernel over rows of the last axis; identity and
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

void lowerActivation(lower::LoweringContext &cx, const ir::Op &op) {
  auto [rows, cols] = rowsCols(op.type);
  cx.step(op, codegen::ElementwiseSpec{codegen::ElementwiseSpec::Activation, activationOf(op.kind), rows, cols},
          {cx.in(op), Operand::none(), cx.out(op)});
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
  auto [rows, cols] = rowsCols(op.type);
  cx.step(op, codegen::ElementwiseSpec{codegen::ElementwiseSpec::Add, codegen::Activation::None, rows, cols},
          {cx.in(op, 0), cx.in(op, 1), cx.out(op)});
}

} // namespace nnc::ops::elementwise
