#include "compiler/passes/Pipeline.h"

#include <fmt/format.h>

#include "compiler/ir/Verifier.h"

namespace nnc::passes {

std::vector<std::unique_ptr<Pass>> analysisPipeline() {
  std::vector<std::unique_ptr<Pass>> p;
  p.push_back(createShapeInferencePass());
  p.push_back(createVerifierPass());
  p.push_back(createParamCountPass());
  p.push_back(createMacCountPass());
  p.push_back(createMemoryPass());
  p.push_back(createTrafficPass());
  p.push_back(createAffineChainLintPass());
  return p;
}

std::vector<std::unique_ptr<Pass>> loweringPipeline() {
  std::vector<std::unique_ptr<Pass>> p;
  p.push_back(createFoldLinearChainsPass());
  p.push_back(createFuseEpiloguesPass());
  p.push_back(createVerifierPass("verify-lowered")); // its own name: --print-after picks one pass
  return p;
}

std::vector<std::string> passNames() {
  std::vector<std::string> names;
  for (const auto &p : analysisPipeline()) names.push_back(p->name());
  for (const auto &p : loweringPipeline()) names.push_back(p->name());
  return names;
}

bool runPipeline(const std::vector<std::unique_ptr<Pass>> &passes, ir::Graph &g, PassContext &ctx,
                 const std::function<void(const char *, const ir::Graph &)> &after) {
  for (const auto &p : passes) {
    if (!p->run(g, ctx)) return false;
    if (after) after(p->name(), g);
  }
  return true;
}

namespace {
// Checks the IR's invariants; a violation is an internal error (a bug in a pass).
class VerifierPass : public Pass {
public:
  explicit VerifierPass(const char *name) : name_(name) {}
  const char *name() const override { return name_; }
  bool run(ir::Graph &g, PassContext &) override {
    auto errs = ir::verifyGraph(g);
    if (errs.empty()) return true;
    std::string all;
    for (const auto &e : errs) all += "\n  " + e;
    throw std::logic_error("IR verifier failed:" + all);
  }

private:
  const char *name_;
};
} // namespace

std::unique_ptr<Pass> createVerifierPass(const char *name) { return std::make_unique<VerifierPass>(name); }

} // namespace nnc::passes
