#include "compiler/ops/OpTable.h"

#include <array>
#include <stdexcept>

#include "compiler/ops/CostRulesImpl.h"
#include "compiler/ops/LoweringRulesImpl.h"

namespace nnc::ops {
using K = ir::OpKind;
namespace c = cost;
namespace l = lowering;

namespace {
// One row per OpKind, in the enum's order (checked below and by a test).
//                   kind              view   cost            lowering
const OpInfo kTable[] = {
    {K::Input,         true,  c::none,        nullptr},
    {K::Dense,         false, c::dense,       l::dense},
    {K::Conv2d,        false, c::conv,        l::notYet},
    {K::Depthwise,     false, c::conv,        l::notYet},
    {K::MaxPool,       false, c::pool,        l::pool},
    {K::AvgPool,       false, c::pool,        l::pool},
    {K::GlobalAvgPool, false, c::globalPool,  l::notYet},
    {K::Flatten,       true,  c::none,        nullptr},
    {K::Relu,          false, c::perElement,  l::activation},
    {K::Relu6,         false, c::perElement,  l::activation},
    {K::Sigmoid,       false, c::perElement,  l::activation},
    {K::Tanh,          false, c::perElement,  l::activation},
    {K::Gelu,          false, c::perElement,  l::activation},
    {K::GeluTanh,      false, c::perElement,  l::activation},
    {K::Silu,          false, c::perElement,  l::activation},
    {K::Softmax,       false, c::perElement,  l::softmax},
    {K::Identity,      true,  c::none,        nullptr},
    {K::Dropout,       true,  c::none,        nullptr}, // the identity at inference
    {K::Lrn,           false, c::perElement,  l::notYet},
    {K::BatchNorm,     false, c::perElement,  l::notYet},
    {K::LayerNorm,     false, c::perElement,  l::norm},
    {K::RmsNorm,       false, c::perElement,  l::norm},
    {K::Embedding,     false, c::none,        l::notYet}, // a lookup: no arithmetic
    {K::PosEmbedding,  false, c::perElement,  l::notYet},
    {K::Attention,     false, c::attention,   l::notYet},
    {K::Mlp,           false, c::mlp,         l::notYet},
    {K::GatedMlp,      false, c::gatedMlp,    l::notYet},
    {K::Add,           false, c::perElement,  l::add},
};
constexpr size_t kRows = sizeof(kTable) / sizeof(kTable[0]);
static_assert(kRows == size_t(K::Add) + 1, "the op table needs one row per OpKind");
} // namespace

const OpInfo &opInfo(ir::OpKind kind) {
  const OpInfo &row = kTable[size_t(kind)];
  if (row.kind != kind) throw std::logic_error("op table out of order");
  return row;
}

size_t opTableSize() { return kRows; }

} // namespace nnc::ops
