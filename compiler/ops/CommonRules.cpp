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

bool refusedBelowF32(lower::LoweringContext &cx, const ir::Op &op) {
  if (op.weightDType == DType::F32) return false;
  cx.notRunnable(op,
                 fmt::format("stores its weights as {}: nnc runs {} layers with f32 weights only for now (below f32 "
                             "it runs every other weighted layer; reports cover every dtype)",
                             dtypeName(op.weightDType), ir::opKindName(op.kind)),
                 lower::Step::Blocker::StorageDType);
  return true;
}

} // namespace nnc::ops
