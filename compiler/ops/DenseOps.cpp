// dense(out, in, bias, tie): y = x · Wᵀ + b over the last axis (PyTorch nn.Linear).
//   shape:  [..., in] → [..., out]; W is [out, in], b is [out]; a tied dense reads an
//           earlier embedding's [vocab, dim] table as W (and owns no weight).
//   cost:   rows · in · out MACs (rows: the axes between batch and last); out bias adds.
//   lower:  one GEMM over all rows, C = act(A · Wᵀ + b) + residual with the activation
//           and residual add FuseEpilogues moved in; W packed at load in the kernel's
//           panel layout; a folded chain (FoldLinearChains) multiplies its layers' W
//           and b out at load; a batchnorm after it (FuseEpilogues) folds into W and b.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/lower/LoweringContext.h"
#include "compiler/ops/LayerConstants.h"
#include "compiler/ops/RuleHelpers.h"
#include "compiler/ops/Rules.h"
#include "compiler/ops/ShapeContext.h"

namespace nnc::ops::dense {
using lower::Operand;
using lower::WeightRecipe;
using Role = ir::ParamTensor::Role;

namespace {
// tie=NAME: an embedding earlier in the model, by full path or by its last components
// (unique: two matches are an error, not the later one taken), whose table is
// [out, in]; the attribute becomes its full path.
bool checkTie(ShapeContext &cx, ir::Op &op) {
  const ir::Op *target = nullptr;
  std::vector<std::string> suffixMatches;
  const std::string &tie = op.attrs.tie;
  for (const auto &o : cx.graph().ops) {
    if (&o == &op) break;
    if (o.kind != ir::OpKind::Embedding) continue;
    const std::string &name = o.name;
    if (name == tie) {
      target = &o; // the full path: no other name can equal it
      suffixMatches.clear();
      break;
    }
    if (name.size() > tie.size() && name.compare(name.size() - tie.size() - 1, std::string::npos, "." + tie) == 0) {
      target = &o;
      suffixMatches.push_back(name);
    }
  }
  if (!target)
    return cx.fail(cx.at(op, "tie"),
                   fmt::format("tie={} must name an embedding layer that comes before this one; none found", tie));
  if (suffixMatches.size() > 1)
    return cx.fail(cx.at(op, "tie"),
                   fmt::format("tie={} is ambiguous: it names the embeddings {}; a tie= names one embedding by its "
                               "name (a path with '.' cannot be written), so give them names that differ",
                               tie, fmt::join(suffixMatches, " and ")));
  if (!target->typed) return false;
  const int64_t vocab = target->attrs.vocab, dim = target->attrs.dim;
  if (vocab != op.attrs.out || dim != op.attrs.in)
    return cx.fail(cx.at(op, "tie"),
                   fmt::format("tie={}: the embedding's table is [{}, {}] but this dense needs [out, in] = [{}, {}]",
                               tie, vocab, dim, op.attrs.out, op.attrs.in));
  op.attrs.tie = target->name;
  return true;
}

} // namespace

bool shape(ShapeContext &cx, ir::Op &op) {
  if (!cx.requireFloat(op)) return false;
  const ir::TensorType &in = cx.in(op);
  ir::LayerAttrs &a = op.attrs;
  if (in.shape.size() < 2) return cx.fail(op.loc, "dense expects at least one axis besides the batch");
  const int64_t last = in.shape.back();
  if (a.in && a.in != last)
    return cx.fail(cx.at(op, "in"), fmt::format("dense expects {} inputs on its last axis (in={}), but receives {}: {}",
                                                a.in, a.in, last, cx.producer(op.inputs[0])));
  a.in = last;
  op.type.shape.back() = a.out;
  if (!a.tie.empty()) {
    if (!checkTie(cx, op)) return false;
  } else {
    cx.param(op, "weight", {a.out, a.in});
  }
  if (a.bias) cx.param(op, "bias", {a.out}, Role::Bias);
  return true;
}

OpWork cost(const ir::Graph &g, const ir::Op &op) {
  const ir::LayerAttrs &a = op.attrs;
  const int64_t r = rowsPerExample(g.op(op.inputs[0]).type);
  const std::string bias = a.bias ? fmt::format(" + {}", n(a.out)) : "";
  OpWork w;
  w.macsPerExample = mulChecked(r, a.in, a.out);
  if (a.bias) w.otherOpsPerExample = perExample(op.type);
  w.macFormula = fmt::format("{} × {} × {}", n(r), n(a.in), n(a.out));
  w.paramFormula = a.tie.empty() ? fmt::format("{} × {}{}", n(a.in), n(a.out), bias)
                                 : fmt::format("0 (weight tied to {}){}", a.tie, bias);
  return w;
}

void lower(lower::LoweringContext &cx, const ir::Op &op) {
  codegen::GemmSpec spec;
  spec.K = op.attrs.in;
  spec.N = op.attrs.out;
  spec.M = cx.typeOf(op.inputs[0]).elements() / spec.K;
  spec.bias = op.attrs.bias || !op.foldedNorm.empty();
  spec.act = activationOf(op.epilogue);
  spec.residual = op.residualInput >= 0;
  spec.actAfterResidual = activationOf(op.afterResidual);
  storeWeightsAsLayer(cx.quant(), op, spec);
  Operand residual = cx.residual(op);
  const bool folded = !op.foldedFrom.empty();
  if (!folded) {
    auto [weights, bias] = gemmConstants(cx, op, spec, (op.attrs.tie.empty() ? op.name : op.attrs.tie) + ".weight", 0);
    cx.step(op, spec, {cx.in(op), weights, bias, residual, cx.out(op)});
    return;
  }
  WeightRecipe w;
  w.shape = {spec.N, spec.K};
  w.packFor = spec;
  w.storage = spec.weightType;
  w.name = fmt::format("{}.weight (folded: {})", op.name, fmt::join(op.foldedFrom, " · "));
  w.source = WeightRecipe::Source::FoldedWeight;
  w.tensors = op.foldedFrom;
  Operand weights = cx.constant(std::move(w));
  Operand bias = Operand::none();
  if (spec.bias) {
    WeightRecipe b;
    b.name = op.name + ".bias (folded)";
    b.source = WeightRecipe::Source::FoldedBias;
    b.tensors = op.foldedFrom;
    b.shape = {spec.N};
    bias = cx.constant(std::move(b));
  }
  cx.step(op, spec, {cx.in(op), weights, bias, residual, cx.out(op)});
}

} // namespace nnc::ops::dense
