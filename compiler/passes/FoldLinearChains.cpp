// FoldLinearChainsPass (a rewrite, page 000): two dense layers with nothing nonlinear
// between them (identity and dropout are skipped) become one dense layer,
//   W = W2·W1 (PyTorch [out, in] layout), b = W2·b1 + b2,
// when that does not add work: in·out ≤ in·mid + mid·out. The folded op keeps the
// second layer's name, lists the originals in `foldedFrom` and their parameter
// tensors in `params` (the runtime loads those and multiplies them out once).
// Assumes: the analyses already ran; the report describes the program as written.
#include "compiler/ir/GraphEdit.h"
#include "compiler/passes/Pass.h"

namespace nnc::passes {
using ir::OpKind;

namespace {
// Neither tied, no fused epilogue, one storage dtype, and no added work.
bool foldsIntoOneLayer(const ir::Op &first, const ir::Op &second) {
  for (const ir::Op *op : {&first, &second})
    if (op->kind != OpKind::Dense || !op->attrs.tie.empty() || op->epilogue != OpKind::Identity) return false;
  const double in = double(first.attrs.in), mid = double(first.attrs.out), out = double(second.attrs.out);
  return first.weightDType == second.weightDType && in * out <= in * mid + mid * out;
}

class FoldLinearChainsPass : public Pass {
public:
  const char *name() const override { return "fold-linear-chains"; }
  bool run(ir::Graph &g, PassContext &) override {
    foldAll(g);
    return true;
  }

  // One pass in order (linear time: 20,000 pairs took minutes when each fold rescanned
  // the graph): each dense folds what feeds it for as long as that folds, so a fold
  // made earlier is folded on (12→5→12→3: 5→12→3, then 12→5 into it), and a fold at op
  // i changes no earlier op. Readers are counted once: a fold swaps the first layer's
  // read of its input for the second's, and leaves the layers between unread.
  static void foldAll(ir::Graph &g) {
    std::vector<int> readers(g.ops.size(), 0);
    if (g.output >= 0) ++readers[size_t(g.output)];
    for (const ir::Op &op : g.ops) {
      for (ir::ValueId in : op.inputs) ++readers[size_t(in)];
      if (op.residualInput >= 0) ++readers[size_t(op.residualInput)];
    }
    bool changed = false;
    for (size_t i = 1; i < g.ops.size(); ++i)
      while (tryFold(g, ir::ValueId(i), readers)) changed = true;
    if (changed) ir::removeDeadOps(g);
  }

private:
  static bool tryFold(ir::Graph &g, ir::ValueId secondId, std::vector<int> &readers) {
    ir::Op &second = g.op(secondId);
    if (second.kind != OpKind::Dense) return false;
    ir::ValueId v = second.inputs[0];
    while ((g.op(v).kind == OpKind::Identity || g.op(v).kind == OpKind::Dropout) && readers[size_t(v)] == 1)
      v = g.op(v).inputs[0];
    ir::Op &first = g.op(v);
    if (readers[size_t(v)] != 1 || !foldsIntoOneLayer(first, second)) return false;
    --readers[size_t(second.inputs[0])]; // the layers between first and second go unread
    // Either side may already be a fold (12→5→12→3 folds 5→12→3 first, then 12→5
    // into it): the chain is all of the first's layers, then all of the second's.
    const auto chainOf = [](const ir::Op &op) {
      return op.foldedFrom.empty() ? std::vector<std::string>{op.name} : op.foldedFrom;
    };
    std::vector<std::string> from = chainOf(first);
    const std::vector<std::string> rest = chainOf(second);
    from.insert(from.end(), rest.begin(), rest.end());
    std::vector<ir::ParamTensor> params = first.params;
    params.insert(params.end(), second.params.begin(), second.params.end());
    second.attrs.in = first.attrs.in;
    second.attrs.bias = first.attrs.bias || second.attrs.bias;
    second.foldedFrom = std::move(from);
    second.params = std::move(params);
    second.inputs = first.inputs;
    return true;
  }
};
} // namespace

std::unique_ptr<Pass> createFoldLinearChainsPass() { return std::make_unique<FoldLinearChainsPass>(); }

std::vector<std::vector<std::string>> linearChainsToFold(const ir::Graph &g) {
  ir::Graph folded = g;
  FoldLinearChainsPass::foldAll(folded);
  std::vector<std::vector<std::string>> chains;
  for (const ir::Op &op : folded.ops)
    if (!op.foldedFrom.empty()) chains.push_back(op.foldedFrom);
  return chains;
}

} // namespace nnc::passes
