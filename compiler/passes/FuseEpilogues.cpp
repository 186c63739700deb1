// FuseEpiloguesPass (a rewrite for codegen): a dense layer's following activation and
// a residual add that consumes it move into the layer's GEMM epilogue, applied to
// the accumulators before the store: C = act(A·Wᵀ + b) + residual.
// Conditions: the dense output has exactly one reader; for the residual, the other
// operand is computed before the dense runs (so it exists when the epilogue reads it).
#include "compiler/ir/GraphEdit.h"
#include "compiler/passes/Pass.h"

namespace nnc::passes {
using ir::OpKind;

namespace {
class FuseEpiloguesPass : public Pass {
public:
  const char *name() const override { return "fuse-epilogues"; }
  bool run(ir::Graph &g, PassContext &) override {
    for (size_t i = 1; i < g.ops.size(); ++i) {
      ir::Op &op = g.ops[i];
      if (op.inputs.empty()) continue;
      ir::ValueId src = op.inputs[0];
      ir::Op &dense = g.op(src);
      if (dense.kind != OpKind::Dense || ir::countReaders(g, src) != 1 || dense.residualInput >= 0) continue;
      if (ir::isElementwiseActivation(op.kind) && dense.epilogue == OpKind::Identity) {
        dense.epilogue = op.kind;
        ir::replaceAllUses(g, ir::ValueId(i), src);
        op.inputs.clear(); // dead now; must not count as a reader
      } else if (op.kind == OpKind::Add && op.inputs[1] < src) {
        dense.residualInput = op.inputs[1];
        ir::replaceAllUses(g, ir::ValueId(i), src);
        op.inputs.clear();
      }
    }
    ir::removeDeadOps(g);
    return true;
  }
};
} // namespace

std::unique_ptr<Pass> createFuseEpiloguesPass() { return std::make_unique<FuseEpiloguesPass>(); }

} // namespace nnc::passes
