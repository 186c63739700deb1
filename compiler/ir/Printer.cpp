#include "compiler/ir/Printer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/ops/OpTable.h"

namespace nnc::ir {

namespace {
// The op's options as the op table stores them (compiler/ops/OpTable.h), then what the
// rewrites set.
std::string attrs(const Op &op) {
  std::vector<std::string> out;
  for (const ops::OptionSpec &o : ops::opInfo(op.kind).options) {
    std::string text = ops::optionValueText(o, op);
    if (!text.empty()) out.push_back(std::move(text));
  }
  if (!op.foldedFrom.empty()) out.push_back(fmt::format("folded=[{}]", fmt::join(op.foldedFrom, ", ")));
  if (!op.foldedNorm.empty()) out.push_back(fmt::format("norm={}", op.foldedNorm));
  if (op.epilogue != OpKind::Identity) out.push_back(fmt::format("epilogue={}", opKindName(op.epilogue)));
  if (op.residualInput >= 0) out.push_back(fmt::format("residual=%{}", op.residualInput));
  if (op.afterResidual != OpKind::Identity) out.push_back(fmt::format("then={}", opKindName(op.afterResidual)));
  return out.empty() ? "" : fmt::format(" {{{}}}", fmt::join(out, ", "));
}
} // namespace

std::string printGraph(const Graph &g) {
  std::string s = fmt::format("model {} (batch = {}) {{\n", g.modelName, g.batch);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op &op = g.ops[i];
    std::vector<std::string> ins;
    for (ValueId v : op.inputs) ins.push_back(fmt::format("%{}", v));
    std::string line = fmt::format("  %{} = {} \"{}\"", i, opKindName(op.kind), op.name);
    if (!ins.empty()) line += fmt::format("({})", fmt::join(ins, ", "));
    line += attrs(op);
    line += " : " + (op.typed ? op.type.str() : std::string("<untyped>"));
    if (!op.params.empty()) {
      std::vector<std::string> ps;
      for (const auto &p : op.params)
        ps.push_back(fmt::format("{}[{}]", p.name.substr(op.name.size() + 1), fmt::join(p.shape, ", ")));
      line += fmt::format("  params {}:{{{}}}", dtypeName(op.weightDType), fmt::join(ps, ", "));
    }
    if (op.loc.begin.valid()) line += fmt::format("  # line {}", op.loc.begin.line);
    s += line + "\n";
  }
  s += fmt::format("  return %{}\n}}\n", g.output);
  return s;
}

} // namespace nnc::ir
