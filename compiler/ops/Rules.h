// The rule functions the op table (OpTable.cpp) names, by family. Each family's
// shape, cost and lowering rules sit side by side in its file.
#pragma once
#include "compiler/ops/OpTable.h"

namespace nnc::ops {

// Common (CommonRules.cpp): rules several kinds share.
OpWork noCost(const ir::Graph &g, const ir::Op &op);      // input, views, lookups
OpWork perElementCost(const ir::Graph &g, const ir::Op &op); // one op per output element
bool inputShape(ShapeContext &cx, ir::Op &op);            // typed by the expander

namespace dense { // DenseOps.cpp
bool shape(ShapeContext &cx, ir::Op &op);
OpWork cost(const ir::Graph &g, const ir::Op &op);
void lower(lower::LoweringContext &cx, const ir::Op &op);
} // namespace dense

namespace conv { // ConvOps.cpp: conv2d, depthwise
bool shape(ShapeContext &cx, ir::Op &op);
OpWork cost(const ir::Graph &g, const ir::Op &op);
void lower(lower::LoweringContext &cx, const ir::Op &op);
} // namespace conv

namespace pool { // PoolOps.cpp: maxpool, avgpool, global_avgpool, flatten
bool shape(ShapeContext &cx, ir::Op &op);
OpWork cost(const ir::Graph &g, const ir::Op &op);
void lower(lower::LoweringContext &cx, const ir::Op &op);
bool globalShape(ShapeContext &cx, ir::Op &op);
void globalLower(lower::LoweringContext &cx, const ir::Op &op);
OpWork globalCost(const ir::Graph &g, const ir::Op &op);
bool flattenShape(ShapeContext &cx, ir::Op &op);
} // namespace pool

namespace elementwise { // ElementwiseOps.cpp: activations, softmax, identity, dropout, add
bool shape(ShapeContext &cx, ir::Op &op); // f32 in, same shape out
void lowerActivation(lower::LoweringContext &cx, const ir::Op &op);
void lowerSoftmax(lower::LoweringContext &cx, const ir::Op &op);
bool addShape(ShapeContext &cx, ir::Op &op);
void lowerAdd(lower::LoweringContext &cx, const ir::Op &op);
} // namespace elementwise

namespace norm { // NormOps.cpp: lrn, batchnorm, layernorm, rmsnorm
bool lrnShape(ShapeContext &cx, ir::Op &op);
bool batchNormShape(ShapeContext &cx, ir::Op &op);
bool layerNormShape(ShapeContext &cx, ir::Op &op);
bool rmsNormShape(ShapeContext &cx, ir::Op &op);
void lower(lower::LoweringContext &cx, const ir::Op &op); // layernorm, rmsnorm
void lrnLower(lower::LoweringContext &cx, const ir::Op &op);
void batchNormLower(lower::LoweringContext &cx, const ir::Op &op); // one not folded into a layer
} // namespace norm

namespace sequence { // SequenceOps.cpp: embedding, pos_embedding, attention, mlp, gated_mlp
bool embeddingShape(ShapeContext &cx, ir::Op &op);
bool posEmbeddingShape(ShapeContext &cx, ir::Op &op);
bool attentionShape(ShapeContext &cx, ir::Op &op);
OpWork attentionCost(const ir::Graph &g, const ir::Op &op);
void attentionLower(lower::LoweringContext &cx, const ir::Op &op);
bool mlpShape(ShapeContext &cx, ir::Op &op); // mlp, gated_mlp
OpWork mlpCost(const ir::Graph &g, const ir::Op &op);
OpWork gatedMlpCost(const ir::Graph &g, const ir::Op &op);
void embeddingLower(lower::LoweringContext &cx, const ir::Op &op);
void posEmbeddingLower(lower::LoweringContext &cx, const ir::Op &op);
void mlpLower(lower::LoweringContext &cx, const ir::Op &op); // mlp, gated_mlp
} // namespace sequence

} // namespace nnc::ops
