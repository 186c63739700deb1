// The op table (OpTable.h): one row per OpKind, in the enum's order.
#include "compiler/ops/OpTable.h"

#include <stdexcept>

#include "compiler/ops/Options.h"
#include "compiler/ops/Rules.h"

namespace nnc::ops {
using K = ir::OpKind;
using A = ir::LayerAttrs;
using option::requiredInt; using option::intOption; using option::intFrom; using option::requiredPair;
using option::pairOption; using option::pairFrom; using option::boolOption; using option::floatOption; using option::nonNegativeFloat;
using option::activationOption; using option::layerNameOption; using option::dtypeOption;

namespace {
const std::vector<OptionSpec> kPool = {
    requiredPair("kernel", &A::kh, &A::kw),
    pairFrom("stride", &A::sh, &A::sw, "kernel", 1),
    pairOption("pad", &A::ph, &A::pw, 0, 0),
};

const std::vector<OpInfo> &table() {
  static const std::vector<OpInfo> rows = {
      // kind, options, shape rule, cost rule, view, lowering rule
      {K::Input, {}, inputShape, noCost, true, nullptr},
      {K::Dense,
       {requiredInt("out", &A::out), intFrom("in", &A::in, nullptr), boolOption("bias", &A::bias, true),
        layerNameOption("tie", &A::tie), dtypeOption()},
       dense::shape, dense::cost, false, dense::lower},
      {K::Conv2d,
       {requiredInt("out", &A::out), requiredPair("kernel", &A::kh, &A::kw), pairOption("stride", &A::sh, &A::sw, 1, 1),
        pairOption("pad", &A::ph, &A::pw, 0, 0), intOption("groups", &A::groups, 1), boolOption("bias", &A::bias, true),
        dtypeOption()},
       conv::shape, conv::cost, false, conv::lower},
      {K::Depthwise,
       {requiredPair("kernel", &A::kh, &A::kw), pairOption("stride", &A::sh, &A::sw, 1, 1),
        pairOption("pad", &A::ph, &A::pw, 0, 0), intOption("multiplier", &A::multiplier, 1),
        boolOption("bias", &A::bias, true), dtypeOption()},
       conv::shape, conv::cost, false, conv::lower},
      {K::MaxPool, kPool, pool::shape, pool::cost, false, pool::lower},
      {K::AvgPool, kPool, pool::shape, pool::cost, false, pool::lower},
      {K::GlobalAvgPool, {}, pool::globalShape, pool::globalCost, false, pool::globalLower},
      {K::Flatten, {}, pool::flattenShape, noCost, true, nullptr},
      {K::Relu, {}, elementwise::shape, perElementCost, false, elementwise::lowerActivation},
      {K::Relu6, {}, elementwise::shape, perElementCost, false, elementwise::lowerActivation},
      {K::Sigmoid, {}, elementwise::shape, perElementCost, false, elementwise::lowerActivation},
      {K::Tanh, {}, elementwise::shape, perElementCost, false, elementwise::lowerActivation},
      {K::Gelu, {}, elementwise::shape, perElementCost, false, elementwise::lowerActivation},
      {K::GeluTanh, {}, elementwise::shape, perElementCost, false, elementwise::lowerActivation},
      {K::Silu, {}, elementwise::shape, perElementCost, false, elementwise::lowerActivation},
      {K::Softmax, {}, elementwise::shape, perElementCost, false, elementwise::lowerSoftmax},
      {K::Identity, {}, elementwise::shape, noCost, true, nullptr},
      {K::Dropout, {floatOption("p", &A::p, 0.5, /*below=*/1, "probability")}, elementwise::shape, noCost, true, nullptr},
      {K::Lrn,
       {requiredInt("size", &A::size), floatOption("alpha", &A::alpha, 1e-4), floatOption("beta", &A::beta, 0.75),
        nonNegativeFloat("k", &A::k, 1, "k (added to the scaled sum of squares)")},
       norm::lrnShape, perElementCost, false, norm::lrnLower},
      {K::BatchNorm, {nonNegativeFloat("eps", &A::eps, 1e-5, "eps (added to the variance)"), dtypeOption()}, norm::batchNormShape, perElementCost, false,
       norm::batchNormLower},
      {K::LayerNorm, {nonNegativeFloat("eps", &A::eps, 1e-5, "eps (added to the variance)"), boolOption("bias", &A::bias, true), dtypeOption()},
       norm::layerNormShape, perElementCost, false, norm::lower},
      {K::RmsNorm, {nonNegativeFloat("eps", &A::eps, 1e-6, "eps (added to the mean square)"), dtypeOption()}, norm::rmsNormShape, perElementCost, false,
       norm::lower},
      {K::Embedding, {requiredInt("vocab", &A::vocab), requiredInt("dim", &A::dim), dtypeOption()},
       sequence::embeddingShape, noCost, false, sequence::embeddingLower}, // a lookup: no arithmetic
      {K::PosEmbedding, {requiredInt("max_len", &A::maxLen), dtypeOption()}, sequence::posEmbeddingShape,
       perElementCost, false, sequence::posEmbeddingLower},
      {K::Attention,
       {requiredInt("heads", &A::heads), intFrom("kv_heads", &A::kvHeads, "heads"), boolOption("bias", &A::bias, false),
        boolOption("causal", &A::causal, true), boolOption("rope", &A::rope, false),
        floatOption("rope_theta", &A::ropeTheta, 10000), dtypeOption()},
       sequence::attentionShape, sequence::attentionCost, false, sequence::attentionLower},
      {K::Mlp,
       {requiredInt("hidden", &A::hidden), activationOption("act", &A::act, K::Gelu), boolOption("bias", &A::bias, true),
        dtypeOption()},
       sequence::mlpShape, sequence::mlpCost, false, sequence::mlpLower},
      {K::GatedMlp,
       {requiredInt("hidden", &A::hidden), activationOption("act", &A::act, K::Silu),
        boolOption("bias", &A::bias, false), dtypeOption()},
       sequence::mlpShape, sequence::gatedMlpCost, false, sequence::mlpLower},
      {K::Add, {}, elementwise::addShape, perElementCost, false, elementwise::lowerAdd},
  };
  return rows;
}
} // namespace

const OpInfo &opInfo(ir::OpKind kind) {
  const auto &rows = table();
  if (size_t(kind) >= rows.size() || rows[size_t(kind)].kind != kind)
    throw std::logic_error("op table: no row for op kind " + std::string(ir::opKindName(kind)));
  return rows[size_t(kind)];
}

size_t opTableSize() { return table().size(); }

} // namespace nnc::ops
