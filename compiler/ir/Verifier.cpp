#include "compiler/ir/Verifier.h"

#include <fmt/format.h>

#include <set>

namespace nnc::ir {

std::vector<std::string> verifyGraph(const Graph &g) {
  std::vector<std::string> errs;
  if (g.ops.empty() || g.ops[0].kind != OpKind::Input) {
    errs.push_back("the first op must be the input");
    return errs;
  }
  if (g.output < 0 || size_t(g.output) >= g.ops.size()) errs.push_back("the output is not an op of the graph");
  std::set<std::string> names;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op &op = g.ops[i];
    std::string where = fmt::format("op %{} '{}'", i, op.name);
    if (i > 0 && op.kind == OpKind::Input) errs.push_back(where + ": a second input");
    if (i > 0 && op.inputs.empty()) errs.push_back(where + ": no operands");
    for (ValueId v : op.inputs)
      if (v < 0 || size_t(v) >= i) errs.push_back(where + fmt::format(": operand %{} is not an earlier op", v));
    if (!op.typed) {
      errs.push_back(where + ": untyped");
      continue;
    }
    if (op.type.shape.empty() || op.type.shape[0] != g.batch)
      errs.push_back(where + ": the first axis is not the batch");
    for (int64_t d : op.type.shape)
      if (d < 1) errs.push_back(where + fmt::format(": dimension {} is not positive", d));
    if (op.kind == OpKind::Add &&
        (op.inputs.size() != 2 || g.op(op.inputs[0]).type != g.op(op.inputs[1]).type))
      errs.push_back(where + ": add of different types");
    for (const auto &p : op.params)
      if (!names.insert(p.name).second) errs.push_back(where + ": parameter name repeated: " + p.name);
  }
  return errs;
}

} // namespace nnc::ir
