// Test helpers: a .nn program held in a string, through the compiler driver
// (compiler/driver/Driver.h) as the command line takes it.
#pragma once
#include <map>
#include <optional>
#include <string>

#include "compiler/driver/Driver.h"

namespace nnc::test {

struct Compiled {
  std::optional<driver::AnalyzedModel> model; // set when the program compiled
  std::optional<ir::Graph> graph;             // as written, or lowered when asked
  passes::ModelAnalysis analysis;
  std::string diagnostics; // rendered, without colour
  bool ok = false;
  const lower::KernelProgram &program() const { return model->program; }
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

// `lower`: graph is the IR after the lowering passes (folds, fused epilogues).
inline Compiled compile(const std::string &source, std::map<std::string, int64_t> sets = {},
                        bool lower = false, std::string model = "") {
  Compiled c;
  auto collect = [&c](const DiagnosticEngine &d) { c.diagnostics += d.render(false); };
  try {
    auto compiler = driver::Compiler::fromSource("test.nn", source, collect);
    driver::CompileOptions options;
    options.model = model;
    options.sets = std::move(sets);
    c.model = compiler.analyze(options);
    c.graph = lower ? c.model->lowered : c.model->graph;
    c.analysis = c.model->analysis;
    c.ok = true;
  } catch (const driver::CompileError &) {
    c.ok = false;
  }
  return c;
}

} // namespace nnc::test
