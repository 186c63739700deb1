// AffineChainLintPass: warns when two dense layers meet with no nonlinearity between
// them (only identity, dropout or flatten), because they collapse into one layer
// (page 000): x·W1 + b1 then ·W2 + b2 equals x·(W1·W2) + (b1·W2 + b2), a dense
// layer in1 → out2 with in1·out2 + out2 parameters.
// Assumes: shape inference ran. Guarantees: one warning per such pair, at the second
// layer, naming both and the single layer they equal.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "compiler/passes/Pass.h"

namespace nnc::passes {
using ir::OpKind;

namespace {
class AffineChainLintPass : public Pass {
public:
  const char *name() const override { return "lint-affine-chains"; }
  bool run(ir::Graph &g, PassContext &ctx) override {
    ctx.analysis.lints.clear();
    std::optional<std::vector<std::vector<std::string>>> chains; // found at the first pair
    // What the run does with the pair: the length of the folded chain holding both (0: none).
    auto foldedWith = [&](const std::string &a, const std::string &b) -> size_t {
      if (!chains) chains = linearChainsToFold(g);
      for (const auto &c : *chains)
        if (std::find(c.begin(), c.end(), a) != c.end() && std::find(c.begin(), c.end(), b) != c.end())
          return c.size();
      return 0;
    };
    std::vector<int> readers(g.ops.size(), 0);
    for (const auto &op : g.ops)
      for (ir::ValueId v : op.inputs) ++readers[size_t(v)];
    for (size_t i = 1; i < g.ops.size(); ++i) {
      const ir::Op &second = g.ops[i];
      if (second.kind != OpKind::Dense) continue;
      // Walk back through ops that change nothing.
      ir::ValueId v = second.inputs[0];
      while (g.op(v).kind == OpKind::Identity || g.op(v).kind == OpKind::Dropout)
        v = g.op(v).inputs[0];
      const ir::Op &first = g.op(v);
      if (first.kind != OpKind::Dense || readers[size_t(v)] != 1) continue;
      int64_t in = first.attrs.in, mid = first.attrs.out, out = second.attrs.out;
      // Sizes passed shape inference, but in·out can exceed in·mid + mid·out: count in double.
      double params = double(in) * double(out) + ((first.attrs.bias || second.attrs.bias) ? out : 0);
      const size_t fold = foldedWith(first.name, second.name);
      std::string msg = fmt::format(
          "layers '{}' (dense {} → {}) and '{}' (dense {} → {}) meet with no nonlinearity between them: "
          "together they equal one dense layer {} → {} with {} parameters (W = W1·W2, b = b1·W2 + b2){}",
          first.name, in, mid, second.name, mid, out, in, out, params < 9e18 ? withCommas(int64_t(params)) : fmt::format("{:.3g}", params),
          fold == 2 ? "; nnc runs them as that one layer"
          : fold > 2 ? fmt::format("; nnc runs them folded into one layer with {} more of the chain", fold - 2)
                     : std::string());
      ctx.diags.warning(second.loc, msg);
      ctx.diags.note(first.loc, "the first layer is here; put an activation (e.g. relu) between them");
      ctx.analysis.lints.push_back({size_t(v), i, msg});
    }
    return true;
  }
};
} // namespace

std::unique_ptr<Pass> createAffineChainLintPass() { return std::make_unique<AffineChainLintPass>(); }

} // namespace nnc::passes
