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
// The dense chains FoldLinearChains folds in `g` (each its layers' names, in order): the
// affine-chain lint says "nnc runs them as that one layer" (or folded with more of a
// chain) exactly for these.
std::vector<std::vector<std::string>> linearChainsToFold(const ir::Graph &g);
std::unique_ptr<Pass> createFuseEpiloguesPass();

} // namespace nnc::passes
