// FuseEpiloguesPass (a rewrite for codegen): what follows a dense or conv layer moves
// into the layer's GEMM, in this order:
//   - a batchnorm folds into its weights and bias at load (inference: running
//     statistics), W' = W·s, b' = (b − mean)·s + β with s = γ/sqrt(var + eps) per
//     output channel; the batchnorm's tensors move to the layer (they are still read);
//   - an activation, applied to the accumulators before the store;
//   - a residual add that consumes it: C = act(A·Wᵀ + b) + residual;
//   - for a dense or a conv2d lowered to one GEMM (groups 1, more than one input
//     channel), an activation after that add: C = act2(act(A·Wᵀ + b) + residual)
//     (ResNet's relu after each block's add), which saves a pass over the map.
// Conditions: the layer's output has exactly one reader; for the residual, the other
// operand is computed before the layer runs (so it exists when the epilogue reads it;
// an add is commutative, so it goes to the layer of its later operand);
// a batchnorm only before any activation or residual, on the layer's channel axis
// (a dense's output must be [batch, features]), and not into a folded dense chain.
// Conv2d and depthwise convs take all three (ConvOps.cpp applies them); mlp and
// gated_mlp take the activation and the residual into their down GEMM, attention into
// its output projection (SequenceOps.cpp).
#include "compiler/ir/GraphEdit.h"
#include "compiler/passes/Pass.h"

namespace nnc::passes {
using ir::OpKind;

namespace {
bool fusesEpilogue(const ir::Op &op) {
  return op.kind == OpKind::Dense || op.kind == OpKind::Conv2d || op.kind == OpKind::Depthwise ||
         op.kind == OpKind::Mlp || op.kind == OpKind::GatedMlp || op.kind == OpKind::Attention;
}

bool foldsNorm(const ir::Op &layer) {
  if (layer.kind == OpKind::Mlp || layer.kind == OpKind::GatedMlp || layer.kind == OpKind::Attention)
    return false; // its last GEMM (down, o) takes the rest
  if (layer.epilogue != OpKind::Identity || layer.residualInput >= 0 || !layer.foldedNorm.empty()) return false;
  if (layer.kind == OpKind::Dense) return layer.foldedFrom.empty() && layer.attrs.tie.empty() && layer.type.shape.size() == 2;
  return true;
}

// The layers whose one GEMM applies an activation after the residual (GemmSpec::
// actAfterResidual); a grouped conv adds its residual in a layout step, a depthwise
// conv in its own kernel.
bool takesActivationAfterResidual(const ir::Op &layer) {
  return layer.kind == OpKind::Dense ||
         (layer.kind == OpKind::Conv2d && layer.attrs.groups == 1 && layer.attrs.in > 1);
}

class FuseEpiloguesPass : public Pass {
public:
  const char *name() const override { return "fuse-epilogues"; }
  bool run(ir::Graph &g, PassContext &) override {
    ir::UseLists uses(g);
    for (size_t i = 1; i < g.ops.size(); ++i) {
      ir::Op &op = g.ops[i];
      if (op.inputs.empty()) continue;
      ir::ValueId src = op.inputs[0];
      const ir::ValueId other = op.inputs.size() > 1 ? op.inputs[1] : -1;
      // An add takes its later operand's layer (a + b is b + a, bit for bit): a
      // shortcut branch computed after the residual branch takes that branch's output.
      if (op.kind == OpKind::Add && other > src) src = other;
      const ir::ValueId residual = op.kind == OpKind::Add ? (src == other ? op.inputs[0] : other) : -1;
      ir::Op &layer = g.op(src);
      if (!fusesEpilogue(layer) || uses.readers(src) != 1) continue;
      if (layer.residualInput >= 0) {
        if (!ir::isElementwiseActivation(op.kind) || layer.afterResidual != OpKind::Identity ||
            !takesActivationAfterResidual(layer))
          continue;
        layer.afterResidual = op.kind;
      } else if (op.kind == OpKind::BatchNorm && foldsNorm(layer)) {
        layer.foldedNorm = op.name;
        layer.foldedNormEps = op.attrs.eps;
        layer.params.insert(layer.params.end(), op.params.begin(), op.params.end());
        op.params.clear();
      } else if (ir::isElementwiseActivation(op.kind) && layer.epilogue == OpKind::Identity) {
        layer.epilogue = op.kind;
      } else if (op.kind == OpKind::Add && residual < src) {
        layer.residualInput = residual;
        uses.addRead(residual, src);
      } else {
        continue;
      }
      uses.dropReads(g, ir::ValueId(i)); // dead now; must not count as a reader
      uses.replaceAllUses(g, ir::ValueId(i), src);
      op.inputs.clear();
    }
    ir::removeDeadOps(g);
    return true;
  }
};
} // namespace

std::unique_ptr<Pass> createFuseEpiloguesPass() { return std::make_unique<FuseEpiloguesPass>(); }

} // namespace nnc::passes
