// A pass has one job and a name; the pipeline (Pipeline.cpp) is the single list that
// says their order. Analyses write into ModelAnalysis; rewrites change the Graph.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/Ir.h"
#include "compiler/passes/Analysis.h"
#include "compiler/support/Diagnostics.h"

namespace nnc::passes {

struct PassContext {
  DiagnosticEngine &diags;
  ModelAnalysis &analysis;
};

class Pass {
public:
  virtual ~Pass() = default;
  virtual const char *name() const = 0;
  // Returns false when the graph cannot go further (errors were reported).
  virtual bool run(ir::Graph &g, PassContext &ctx) = 0;
};

std::unique_ptr<Pass> createShapeInferencePass();
std::unique_ptr<Pass> createVerifierPass(const char *name = "verify");
std::unique_ptr<Pass> createParamCountPass();
std::unique_ptr<Pass> createMacCountPass();
std::unique_ptr<Pass> createMemoryPass();
std::unique_ptr<Pass> createTrafficPass();
std::unique_ptr<Pass> createAffineChainLintPass();
std::unique_ptr<Pass> createFoldLinearChainsPass();
// Whether FoldLinearChains runs dense `first` then `second` (nothing nonlinear between)
// as one layer: neither tied, no fused epilogue, one storage dtype, and no added work
// (in·out ≤ in·mid + mid·out). The lint's "nnc runs them as that one layer" says so.
bool foldsIntoOneLayer(const ir::Op &first, const ir::Op &second);
std::unique_ptr<Pass> createFuseEpiloguesPass();

} // namespace nnc::passes
