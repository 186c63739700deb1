// What a shape rule (compiler/ops/*Ops.cpp) sees and calls: the graph, the op's inputs,
// diagnostics that name the source position and the producer of a bad input, and a
// builder for the op's parameter tensors. ShapeInferencePass (compiler/passes) calls
// the rules in op order; before a rule runs, op.type is its first input's type and
// op.params is empty.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "compiler/ir/Ir.h"
#include "compiler/support/Diagnostics.h"

namespace nnc::ops {

// "[784]" / "[3, 224, 224]": the per-example axes of a shape.
std::string perExampleDims(const std::vector<int64_t> &shape);

class ShapeContext {
public:
  ShapeContext(ir::Graph &g, DiagnosticEngine &d) : g_(g), d_(d) {}

  const ir::Graph &graph() const { return g_; }
  const ir::TensorType &in(const ir::Op &op, size_t i = 0) const { return g_.op(op.inputs.at(i)).type; }
  // "the output of layer 'fc1' (dense, line 3)" / "the model input 'x' (line 2)"
  std::string producer(ir::ValueId v) const;
  // Where option `option` was written, else the layer statement.
  SourceRange at(const ir::Op &op, const char *option) const;
  // Reports an error at r; returns false so a rule can `return ctx.fail(...)`.
  bool fail(SourceRange r, std::string msg);

  // The op's parameter tensor "<op.name>.<suffix>" (PyTorch layout); its fan-in for
  // random init is its elements per output row (a bias: its weight's, added before it).
  void param(ir::Op &op, const std::string &suffix, std::vector<int64_t> shape,
             ir::ParamTensor::Role role = ir::ParamTensor::Role::Weight,
             ir::ParamTensor::Init init = ir::ParamTensor::Init::Uniform);

  // Checks shared by several rules; each reports its own error.
  bool requireFloat(const ir::Op &op);                               // f32 data, not token ids
  bool requireRank(const ir::Op &op, size_t rank, const char *what); // axes per example
  // ho = (h + 2·pad − k) / stride + 1 along one axis, which must be at least 1.
  std::optional<int64_t> spatial(const ir::Op &op, const char *axis, int64_t h, int64_t k, int64_t s, int64_t p);

private:
  ir::Graph &g_;
  DiagnosticEngine &d_;
};

} // namespace nnc::ops
