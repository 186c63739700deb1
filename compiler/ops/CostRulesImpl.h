// The cost rule functions the op table (OpTable.cpp) names; see CostRules.cpp.
#pragma once
#include "compiler/ops/OpTable.h"

namespace nnc::ops::cost {
OpWork none(const ir::Graph &g, const ir::Op &op);       // input, views, lookups
OpWork perElement(const ir::Graph &g, const ir::Op &op); // one op per output element
OpWork dense(const ir::Graph &g, const ir::Op &op);
OpWork conv(const ir::Graph &g, const ir::Op &op);       // conv2d, depthwise
OpWork pool(const ir::Graph &g, const ir::Op &op);       // maxpool, avgpool
OpWork globalPool(const ir::Graph &g, const ir::Op &op);
OpWork attention(const ir::Graph &g, const ir::Op &op);
OpWork mlp(const ir::Graph &g, const ir::Op &op);
OpWork gatedMlp(const ir::Graph &g, const ir::Op &op);
} // namespace nnc::ops::cost
