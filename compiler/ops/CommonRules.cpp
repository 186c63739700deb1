// Rules several op kinds share.
#include <fmt/format.h>

#include "compiler/lower/LoweringContext.h"
#include "compiler/ops/RuleHelpers.h"
#include "compiler/ops/Rules.h"

namespace nnc::ops {

OpWork noCost(const ir::Graph &, const ir::Op &) { return {}; }

OpWork perElementCost(const ir::Graph &, const ir::Op &op) {
  OpWork w;
  w.otherOpsPerExample = perExample(op.type);
  return w;
}

bool inputShape(ShapeContext &, ir::Op &) { return true; }

} // namespace nnc::ops
