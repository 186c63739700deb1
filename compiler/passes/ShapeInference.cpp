// ShapeInferencePass: gives every op its output TensorType and its parameter tensors,
// by the op's shape rule in the op table (compiler/ops/OpTable.h; the rules of each
// family sit in compiler/ops/*Ops.cpp with their formulas).
//
// Assumes: the graph came from the expander (kinds, attributes, inputs set; the Input
//   op typed).
// Guarantees: every op is typed, or an error naming the op's source position says what
//   was expected and what was found. An op whose input failed is left untyped without
//   a second error, so one mistake is reported once; independent mistakes all are.
//   Any count that does not fit in 64 bits is an error.
#include <fmt/format.h>

#include "compiler/ops/OpTable.h"
#include "compiler/ops/ShapeContext.h"
#include "compiler/passes/Pass.h"
#include "compiler/support/CheckedMath.h"

namespace nnc::passes {

namespace {
class ShapeInferencePass : public Pass {
public:
  const char *name() const override { return "shape-inference"; }
  bool run(ir::Graph &g, PassContext &ctx) override {
    ops::ShapeContext cx(g, ctx.diags);
    ir::Op &input = g.ops[0];
    input.typed = true;
    try {
      input.type.elements();
    } catch (const CountOverflow &) {
      long double count = 1; // about: it does not fit in 64 bits
      for (int64_t d : input.type.shape) count *= (long double)d;
      return cx.fail(input.loc, fmt::format("the input '{}' of shape {} with batch {} has too many elements: about "
                                            "{:.3g}, expected at most {} (2^63 - 1)",
                                            input.name, ops::perExampleDims(input.type.shape), g.batch,
                                            double(count), withCommas(INT64_MAX)));
    }
    bool ok = true;
    for (size_t i = 1; i < g.ops.size(); ++i) {
      ir::Op &op = g.ops[i];
      bool inputsTyped = true;
      for (ir::ValueId v : op.inputs) inputsTyped &= g.op(v).typed;
      if (!inputsTyped) {
        ok = false;
        continue;
      }
      op.type = g.op(op.inputs[0]).type;
      op.params.clear();
      try {
        op.typed = ops::opInfo(op.kind).shape(cx, op);
        if (op.typed) op.type.elements(); // throws if the whole tensor overflows
      } catch (const CountOverflow &) {
        cx.fail(op.loc, fmt::format("a size in layer '{}' ({}) does not fit in 64 bits: expected at most {} "
                                    "(2^63 - 1); the layer receives shape {}: {}",
                                    op.name, ir::opKindName(op.kind), withCommas(INT64_MAX),
                                    ops::perExampleDims(g.op(op.inputs[0]).type.shape), cx.producer(op.inputs[0])));
        op.typed = false;
      }
      ok &= op.typed;
    }
    return ok && !ctx.diags.hasErrors();
  }
};
} // namespace

std::unique_ptr<Pass> createShapeInferencePass() { return std::make_unique<ShapeInferencePass>(); }

} // namespace nnc::passes
