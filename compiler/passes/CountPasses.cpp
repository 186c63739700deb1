// ParamCountPass and MacCountPass.
//
// Assume: shape inference succeeded (every op typed, parameters listed).
// Guarantee: analysis.ops[i] and analysis.totals hold parameters (all; weights = all
//   but biases; buffers apart), storage bytes per dtype, and MACs per example and per
//   batch; attention-score MACs apart from `macs`. Overflow is an error, not a wrap.
// Formulas: see CostRules.cpp (one rule per OpKind) and ir::ParamTensor shapes.
#include <fmt/format.h>

#include "compiler/passes/CostRules.h"
#include "compiler/passes/Pass.h"
#include "compiler/support/CheckedMath.h"

namespace nnc::passes {
using ir::OpKind;

namespace {

bool isMatrixOp(OpKind k) {
  return k == OpKind::Dense || k == OpKind::Conv2d || k == OpKind::Depthwise || k == OpKind::Attention ||
         k == OpKind::Mlp || k == OpKind::GatedMlp;
}

bool overflowError(DiagnosticEngine &d, const ir::Op &op, const char *what) {
  d.error(op.loc, fmt::format("the {} of layer '{}' and the layers before it do not fit in 64 bits", what, op.name));
  return false;
}

class ParamCountPass : public Pass {
public:
  const char *name() const override { return "count-params"; }
  bool run(ir::Graph &g, PassContext &ctx) override {
    ModelAnalysis &an = ctx.analysis;
    an.ops.resize(g.ops.size());
    Totals &t = an.totals;
    t = Totals{};
    for (DType dt : kWeightDTypes) t.weightBytes[dt] = 0;
    int64_t bitsStored = 0;
    for (size_t i = 0; i < g.ops.size(); ++i) {
      const ir::Op &op = g.ops[i];
      OpCosts &c = an.ops[i];
      try {
        c.params = c.weights = c.buffers = 0;
        for (const auto &p : op.params) {
          int64_t n = p.count();
          if (p.role == ir::ParamTensor::Role::Buffer) {
            c.buffers = addChecked(c.buffers, n);
            continue;
          }
          c.params = addChecked(c.params, n);
          if (p.role == ir::ParamTensor::Role::Weight) {
            c.weights = addChecked(c.weights, n);
            if (isMatrixOp(op.kind)) t.matrixParams = addChecked(t.matrixParams, n);
          }
        }
        c.weightBytesStored = bytesFor(c.params, op.weightDType);
        t.params = addChecked(t.params, c.params);
        t.weights = addChecked(t.weights, c.weights);
        t.buffers = addChecked(t.buffers, c.buffers);
        bitsStored = addChecked(bitsStored, mulChecked(c.params, dtypeBits(op.weightDType)));
      } catch (const CountOverflow &) {
        return overflowError(ctx.diags, op, "parameter count");
      }
    }
    try {
      for (DType dt : kWeightDTypes) t.weightBytes[dt] = bytesFor(t.params, dt);
    } catch (const CountOverflow &) {
      return overflowError(ctx.diags, g.ops.back(), "weight bytes");
    }
    t.weightBytesStored = addChecked(bitsStored, 7) / 8;
    return true;
  }
};

class MacCountPass : public Pass {
public:
  const char *name() const override { return "count-macs"; }
  bool run(ir::Graph &g, PassContext &ctx) override {
    ModelAnalysis &an = ctx.analysis;
    an.ops.resize(g.ops.size());
    Totals &t = an.totals;
    t.macs = t.macsPerExample = t.attentionMacs = t.otherOps = 0;
    for (size_t i = 0; i < g.ops.size(); ++i) {
      const ir::Op &op = g.ops[i];
      OpCosts &c = an.ops[i];
      try {
        OpWork w = opWork(g, op);
        c.macsPerExample = w.macsPerExample;
        c.macs = mulChecked(w.macsPerExample, g.batch);
        c.attentionMacs = mulChecked(w.attentionMacsPerExample, g.batch);
        c.otherOps = mulChecked(w.otherOpsPerExample, g.batch);
        t.macsPerExample = addChecked(t.macsPerExample, c.macsPerExample);
        t.macs = addChecked(t.macs, c.macs);
        t.attentionMacs = addChecked(t.attentionMacs, c.attentionMacs);
        t.otherOps = addChecked(t.otherOps, c.otherOps);
        mulChecked(t.macs, 2); // FLOPs must fit too
      } catch (const CountOverflow &) {
        return overflowError(ctx.diags, op, "multiply-accumulate count");
      }
    }
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createParamCountPass() { return std::make_unique<ParamCountPass>(); }
std::unique_ptr<Pass> createMacCountPass() { return std::make_unique<MacCountPass>(); }

} // namespace nnc::passes
