// What a lowering rule (compiler/ops/LoweringRules.cpp) sees and calls: the op's input
// and output buffers, and builders for scratch, constants (weight recipes) and steps.
// The lowering driver (Lower.cpp) makes the op's output buffer before calling its rule.
#pragma once
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "compiler/lower/KernelProgram.h"
#include "compiler/support/CheckedMath.h"

namespace nnc::lower {

// How a feature map ([batch, c, h, w] in the IR) lies in its buffer (docs/lowering.md,
// "Feature-map layouts"): NCHW planes as the IR and PyTorch say, or NHWC pixels
// ([batch·h·w, c] rows: a conv GEMM's result, kept that way for the layers that read it
// so). Values of any other rank are always Planes.
enum class MapLayout : uint8_t { Planes, Pixels };

class LoweringContext {
public:
  LoweringContext(const ir::Graph &g, KernelProgram &p, const std::vector<BufferId> &valueBuffer)
      : g_(g), p_(p), valueBuffer_(valueBuffer), layout_(g.ops.size(), MapLayout::Planes),
        otherCopy_(g.ops.size(), -1) {}

  const ir::Graph &graph() const { return g_; }
  // A decoder's program: the KV cache's positions (Lower.h), else 0.
  int64_t kvContext() const { return p_.kvContext; }
  DType kvType() const { return p_.kvType; }
  const Quantisation &quant() const { return p_.quant; }
  const ir::TensorType &typeOf(ir::ValueId v) const { return g_.op(v).type; }
  MapLayout layoutOf(ir::ValueId v) const { return layout_.at(size_t(v)); }
  // Value v in `want`'s layout, for a step of `forOp`: its buffer, or a copy converted
  // once (a step of forOp's; later readers share the copy).
  Operand value(ir::ValueId v, const ir::Op &forOp, MapLayout want = MapLayout::Planes) {
    if (layoutOf(v) == want) return Operand::buffer(valueBuffer_.at(size_t(v)));
    BufferId &copy = otherCopy_.at(size_t(v));
    if (copy < 0) copy = convert(v, forOp, want);
    return Operand::buffer(copy);
  }
  Operand in(const ir::Op &op, size_t i = 0, MapLayout want = MapLayout::Planes) {
    return value(op.inputs.at(i), op, want);
  }
  // The residual a layer adds in its epilogue (none without one), in `want`'s layout.
  Operand residual(const ir::Op &op, MapLayout want = MapLayout::Planes) {
    return op.residualInput >= 0 ? value(op.residualInput, op, want) : Operand::none();
  }
  // The op's output buffer, which then holds the value in `layout`.
  Operand out(const ir::Op &op, MapLayout layout = MapLayout::Planes) {
    layout_.at(size_t(valueOf(op))) = layout;
    return Operand::buffer(valueBuffer_.at(size_t(valueOf(op))));
  }

  // Working memory for one step of `op`, planned in the arena like activations.
  Operand scratch(const ir::Op &op, int64_t elements) {
    p_.buffers.push_back(Buffer{"scratch of " + op.name, Buffer::Role::Scratch, elements, {elements}});
    return Operand::buffer(BufferId(p_.buffers.size() - 1));
  }
  // Memory kept between calls (a KV cache), outside the arena.
  Operand state(std::string name, std::vector<int64_t> shape) {
    int64_t elements = 1;
    for (int64_t d : shape) elements = mulChecked(elements, d);
    p_.buffers.push_back(Buffer{std::move(name), Buffer::Role::State, elements, std::move(shape)});
    return Operand::buffer(BufferId(p_.buffers.size() - 1));
  }
  // A constant made at load by `recipe`; the same recipe twice (all but its name) is one
  // constant, found by its key (a scan of the constants per layer was quadratic).
  Operand constant(WeightRecipe recipe) {
    std::string key = fmt::format("{} {} {} {} {} {} {} {:a} {:a} {}", int(recipe.source), fmt::join(recipe.tensors, "\n"),
                                  dtypeName(recipe.storage), fmt::join(recipe.shape, "x"), recipe.rowBegin,
                                  recipe.kernelTaps, recipe.transposed, recipe.eps, recipe.ropeTheta,
                                  recipe.packFor ? recipe.packFor->key() : std::string("-"));
    if (auto found = constantIds_.find(key); found != constantIds_.end()) return Operand::constant(found->second);
    p_.constants.push_back(std::move(recipe));
    const ConstantId id = ConstantId(p_.constants.size() - 1);
    constantIds_.emplace(std::move(key), id);
    return Operand::constant(id);
  }
  // A file tensor, read as plain f32 (e.g. a bias), or stored below f32 in
  // rowTableLayout (PackLayout.h: an embedding's table, a norm's scale).
  Operand tensor(const std::string &name, std::vector<int64_t> shape, DType storage = DType::F32) {
    WeightRecipe r;
    r.name = name;
    r.storage = storage;
    r.tensors = {name};
    r.shape = std::move(shape);
    return constant(std::move(r));
  }

  void step(const ir::Op &op, codegen::KernelSpec kernel, std::vector<Operand> operands) {
    Step s = base(op);
    s.kernel = std::move(kernel);
    s.operands = std::move(operands);
    p_.steps.push_back(std::move(s));
  }
  // The layer has no kernel yet: the step still writes its output (so the plan's
  // memory is the model's), and compiling the program is refused with `why`.
  void notRunnable(const ir::Op &op, std::string why, Step::Blocker blocker = Step::Blocker::NoKernelYet) {
    Step s = base(op);
    s.blocker = blocker;
    s.whyNotRunnable = std::move(why);
    s.operands = {in(op), out(op)};
    p_.steps.push_back(std::move(s));
  }

private:
  ir::ValueId valueOf(const ir::Op &op) const { return ir::ValueId(&op - g_.ops.data()); }
  // A copy of map v in layout `to`: NHWC → NCHW is the conv's ToPlanes over all
  // channels, NCHW → NHWC its 1×1 im2col (a transpose of each image).
  BufferId convert(ir::ValueId v, const ir::Op &forOp, MapLayout to) {
    const ir::TensorType &t = typeOf(v);
    const BufferId from = valueBuffer_.at(size_t(v));
    const Buffer &b = p_.buffers.at(size_t(from));
    p_.buffers.push_back(Buffer{b.name + (to == MapLayout::Pixels ? " (NHWC)" : " (NCHW)"), Buffer::Role::Activation,
                                b.elements, b.shape});
    const BufferId id = BufferId(p_.buffers.size() - 1);
    codegen::LayoutSpec spec;
    spec.kind = to == MapLayout::Pixels ? codegen::LayoutSpec::Im2col : codegen::LayoutSpec::ToPlanes;
    spec.batch = t.shape.at(0), spec.c = t.shape.at(1), spec.h = t.shape.at(2), spec.w = t.shape.at(3);
    spec.cg = spec.c;
    step(forOp, spec, {Operand::buffer(from), Operand::none(), Operand::buffer(id)});
    return id;
  }
  Step base(const ir::Op &op) const {
    Step s;
    s.layer = op.name;
    s.opKind = ir::opKindName(op.kind);
    s.line = op.loc.begin.line;
    return s;
  }
  const ir::Graph &g_;
  KernelProgram &p_;
  const std::vector<BufferId> &valueBuffer_;
  std::vector<MapLayout> layout_;  // per value
  std::vector<BufferId> otherCopy_; // per value: its copy in the other layout, or -1
  std::unordered_map<std::string, ConstantId> constantIds_; // constant(): recipe key → its constant
};

} // namespace nnc::lower
