// TrafficPass: memory traffic and arithmetic intensity per layer at the batch.
//
// Convention of page 001: a layer moves its weights once (biases not counted), its
// inputs and its outputs; intensity = MACs / numbers moved. For 768 → 3072 at batch 1
// that is 2,359,296 + 768 + 3,072 = 2,363,136 numbers, 1.0 MAC per number.
// Bytes count weights at their stored dtype and activations at theirs. A tied dense
// reads the embedding's table, so it moves those weights though it owns none.
// Assumes: shape inference, count-params and count-macs ran.
#include "compiler/passes/Pass.h"
#include "compiler/support/CheckedMath.h"

namespace nnc::passes {

namespace {
class TrafficPass : public Pass {
public:
  const char *name() const override { return "traffic"; }
  bool run(ir::Graph &g, PassContext &ctx) override {
    ModelAnalysis &an = ctx.analysis;
    an.traffic = Traffic{};
    int64_t macs = 0;
    try {
      for (size_t i = 1; i < g.ops.size(); ++i) {
        const ir::Op &op = g.ops[i];
        OpCosts &c = an.ops[i];
        int64_t weights = c.weights;
        if (op.kind == ir::OpKind::Dense && !op.attrs.tie.empty()) weights = mulChecked(op.attrs.out, op.attrs.in);
        int64_t acts = c.outputElements, actBytes = c.outputBytes;
        for (ir::ValueId v : op.inputs) {
          acts = addChecked(acts, an.ops[size_t(v)].outputElements);
          actBytes = addChecked(actBytes, an.ops[size_t(v)].outputBytes);
        }
        c.trafficWeights = weights;
        c.trafficNumbers = addChecked(weights, acts);
        c.trafficBytes = addChecked(bytesFor(weights, op.weightDType), actBytes);
        c.intensity = c.trafficNumbers ? double(c.macs) / double(c.trafficNumbers) : 0;
        c.weightShareOfTraffic = c.trafficNumbers ? double(weights) / double(c.trafficNumbers) : 0;
        an.traffic.numbers = addChecked(an.traffic.numbers, c.trafficNumbers);
        an.traffic.weightNumbers = addChecked(an.traffic.weightNumbers, weights);
        macs = addChecked(macs, c.macs);
      }
    } catch (const CountOverflow &) {
      ctx.diags.error(g.ops.back().loc, "memory traffic of this model does not fit in 64 bits");
      return false;
    }
    an.traffic.intensity = an.traffic.numbers ? double(macs) / double(an.traffic.numbers) : 0;
    return true;
  }
};
} // namespace

std::unique_ptr<Pass> createTrafficPass() { return std::make_unique<TrafficPass>(); }

} // namespace nnc::passes
