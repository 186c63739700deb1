// The pass pipeline: the one place that says which passes run, in which order.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "compiler/passes/Pass.h"

namespace nnc::passes {

// Shape inference, the verifier, and every analysis the report renders.
std::vector<std::unique_ptr<Pass>> analysisPipeline();
// Rewrites applied before code generation (after the analyses: the report describes
// the program as written).
std::vector<std::unique_ptr<Pass>> loweringPipeline();

// Names of every pass, for --print-after.
std::vector<std::string> passNames();

// Runs passes in order; stops at the first that fails. `after(name, graph)` is called
// after each pass that succeeded (for --emit ir --print-after).
bool runPipeline(const std::vector<std::unique_ptr<Pass>> &passes, ir::Graph &g, PassContext &ctx,
                 const std::function<void(const char *, const ir::Graph &)> &after = nullptr);

} // namespace nnc::passes
