// Test helpers: parse, expand and analyse a .nn program held in a string.
#pragma once
#include <map>
#include <optional>
#include <string>

#include "compiler/frontend/Expander.h"
#include "compiler/frontend/Parser.h"
#include "compiler/passes/Pipeline.h"

namespace nnc::test {

struct Compiled {
  std::optional<ir::Graph> graph;
  passes::ModelAnalysis analysis;
  std::string diagnostics; // rendered, without colour
  bool ok = false;
  const ir::Op *op(const std::string &name) const {
    for (const auto &o : graph->ops)
      if (o.name == name) return &o;
    return nullptr;
  }
  const passes::OpCosts &costs(const std::string &name) const {
    for (size_t i = 0; i < graph->ops.size(); ++i)
      if (graph->ops[i].name == name) return analysis.ops[i];
    throw std::runtime_error("no op " + name);
  }
};

inline Compiled compile(const std::string &source, std::map<std::string, int64_t> sets = {},
                        bool lower = false, std::string model = "") {
  Compiled c;
  SourceFile file("test.nn", source);
  DiagnosticEngine diags(&file);
  auto prog = parseProgram(file, diags);
  if (prog) {
    c.graph = expandModel(*prog, ExpandOptions{model, std::move(sets), std::nullopt}, diags);
    if (c.graph) {
      passes::PassContext ctx{diags, c.analysis};
      c.ok = passes::runPipeline(passes::analysisPipeline(), *c.graph, ctx);
      if (c.ok && lower) c.ok = passes::runPipeline(passes::loweringPipeline(), *c.graph, ctx);
    }
  }
  c.ok = c.ok && !diags.hasErrors();
  c.diagnostics = diags.render(false);
  return c;
}

} // namespace nnc::test
