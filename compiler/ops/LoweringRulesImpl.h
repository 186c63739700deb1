// The lowering rule functions the op table (OpTable.cpp) names; see LoweringRules.cpp.
#pragma once
#include "compiler/ops/OpTable.h"

namespace nnc::ops::lowering {
void dense(lower::LoweringContext &cx, const ir::Op &op);
void activation(lower::LoweringContext &cx, const ir::Op &op); // relu … silu
void softmax(lower::LoweringContext &cx, const ir::Op &op);
void add(lower::LoweringContext &cx, const ir::Op &op);        // residual / shortcut join
void norm(lower::LoweringContext &cx, const ir::Op &op);       // layernorm, rmsnorm
void pool(lower::LoweringContext &cx, const ir::Op &op);       // maxpool, avgpool
void notYet(lower::LoweringContext &cx, const ir::Op &op);     // no kernel yet: refused at compile
} // namespace nnc::ops::lowering
