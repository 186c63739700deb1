// ParamCountPass and MacCountPass.
//
// Assume: shape inference succeeded (every op typed, parameters listed).
// Guarantee: analysis.ops[i] and analysis.totals hold parameters (all; weights = all
//   but biases; buffers apart), storage bytes per dtype, and MACs per example and per
//   batch; attention-score MACs apart from `macs`. Overflow is an error, not a wrap.
// Formulas: see CostRules.cpp (one rule per OpKind) and ir::ParamTensor shapes.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/ops/OpTable.h"
#include "compiler/passes/Pass.h"
#include "compiler/support/CheckedMath.h"

namespace nnc::passes {
using ir::OpKind;

namespace {

bool isMatrixOp(OpKind k) {
  return k == OpKind::Dense || k == OpKind::Conv2d || k == OpKind::Depthwise || k == OpKind::Attention ||
         k == OpKind::Mlp || k == OpKind::GatedMlp;
}

bool overflowError(DiagnosticEngine &d, const ir::Op &op, const std::string &what) {
  d.error(op.loc, fmt::format("layer '{}' ({}): too large to count in 64 bits: {}; expected at most {}", op.name,
                              ir::opKindName(op.kind), what, withCommas(INT64_MAX)));
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
    __int128 bitsStored = 0; // Σ params · bits over layers of different dtypes
    for (size_t i = 0; i < g.ops.size(); ++i) {
      const ir::Op &op = g.ops[i];
      OpCosts &c = an.ops[i];
      c.params = c.weights = c.buffers = 0;
      for (const auto &p : op.params) {
        int64_t n = 0;
        try {
          n = p.count();
        } catch (const CountOverflow &) {
          return overflowError(ctx.diags, op, fmt::format("the element count of '{}' [{}]", p.name,
                                                          fmt::join(p.shape, ", ")));
        }
        try {
          if (p.role == ir::ParamTensor::Role::Buffer) {
            c.buffers = addChecked(c.buffers, n);
            continue;
          }
          c.params = addChecked(c.params, n);
          if (p.role == ir::ParamTensor::Role::Weight) {
            c.weights = addChecked(c.weights, n);
          }
        } catch (const CountOverflow &) {
          return overflowError(ctx.diags, op, "the parameter count");
        }
      }
      try {
        c.weightBytesStored = bytesFor(c.params, op.weightDType);
      } catch (const CountOverflow &) {
        return overflowError(ctx.diags, op, fmt::format("the weight bytes ({} parameters at {})",
                                                        withCommas(c.params), dtypeName(op.weightDType)));
      }
      try {
        t.params = addChecked(t.params, c.params);
        t.weights = addChecked(t.weights, c.weights);
        t.buffers = addChecked(t.buffers, c.buffers);
        if (isMatrixOp(op.kind)) t.matrixParams = addChecked(t.matrixParams, c.weights);
      } catch (const CountOverflow &) {
        return overflowError(ctx.diags, op, fmt::format("the model's parameter count ({} before this layer, {} in it)",
                                                        withCommas(t.params), withCommas(c.params)));
      }
      bitsStored += __int128(c.params) * dtypeBits(op.weightDType);
    }
    for (DType dt : kWeightDTypes) {
      try {
        t.weightBytes[dt] = bytesFor(t.params, dt);
      } catch (const CountOverflow &) {
        return overflowError(ctx.diags, g.ops.back(), fmt::format("the model's weight bytes at {} ({} parameters)",
                                                                  dtypeName(dt), withCommas(t.params)));
      }
    }
    __int128 storedBytes = (bitsStored + 7) / 8;
    if (storedBytes > INT64_MAX)
      return overflowError(ctx.diags, g.ops.back(), "the model's stored weight bytes");
    t.weightBytesStored = int64_t(storedBytes);
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
        ops::OpWork w = ops::opInfo(op.kind).cost(g, op);
        c.macsPerExample = w.macsPerExample;
        c.macs = mulChecked(w.macsPerExample, g.batch);
        c.attentionMacs = mulChecked(w.attentionMacsPerExample, g.batch);
        c.otherOps = mulChecked(w.otherOpsPerExample, g.batch);
        t.macsPerExample = addChecked(t.macsPerExample, c.macsPerExample);
        t.macs = addChecked(t.macs, c.macs);
        t.attentionMacs = addChecked(t.attentionMacs, c.attentionMacs);
        t.otherOps = addChecked(t.otherOps, c.otherOps);
      } catch (const CountOverflow &e) {
        if (!e.what.empty()) return overflowError(ctx.diags, op, e.what + " per example");
        return overflowError(ctx.diags, op, fmt::format("the multiply-accumulate count (per example {}, batch {}, "
                                                        "model so far {})",
                                                        c.macsPerExample ? withCommas(c.macsPerExample) : "more than 2^63",
                                                        g.batch, withCommas(t.macs)));
      }
      if (t.macs > INT64_MAX / 2) // the MACs fit, FLOPs = 2 × MACs must too: say which one does not
        return overflowError(ctx.diags, op, fmt::format("the FLOP count (2 × {} MACs for the model so far)",
                                                        withCommas(t.macs)));
    }
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createParamCountPass() { return std::make_unique<ParamCountPass>(); }
std::unique_ptr<Pass> createMacCountPass() { return std::make_unique<MacCountPass>(); }

} // namespace nnc::passes
