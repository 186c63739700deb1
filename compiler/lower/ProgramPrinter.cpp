#include "compiler/lower/ProgramPrinter.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/support/Diagnostics.h"

namespace nnc::lower {

namespace {
struct Names {
  std::vector<const char *> operator()(const codegen::GemmSpec &) const { return {"A", "B", "bias", "residual", "C"}; }
  std::vector<const char *> operator()(const codegen::ConvGemmSpec &) const {
    return {"x", "B", "bias", "residual", "scratch", "C"};
  }
  std::vector<const char *> operator()(const codegen::ElementwiseSpec &) const { return {"x", "y", "out"}; }
  std::vector<const char *> operator()(const codegen::NormSpec &) const { return {"x", "gamma", "beta", "out"}; }
  std::vector<const char *> operator()(const codegen::PoolSpec &) const { return {"x", "out"}; }
  std::vector<const char *> operator()(const codegen::LayoutSpec &) const { return {"x", "residual", "out"}; }
  std::vector<const char *> operator()(const codegen::DepthwiseSpec &) const {
    return {"x", "W", "bias", "residual", "out"};
  }
  std::vector<const char *> operator()(const codegen::ChannelSpec &) const { return {"x", "scale", "shift", "out"}; }
  std::vector<const char *> operator()(const codegen::GatherSpec &) const { return {"ids", "table", "out"}; }
  std::vector<const char *> operator()(const codegen::RopeSpec &) const { return {"x", "table", "out"}; }
  std::vector<const char *> operator()(const codegen::KvAppendSpec &) const { return {"x", "cache"}; }
  std::vector<const char *> operator()(const codegen::LastPositionSpec &) const { return {"x", "out"}; }
  std::vector<const char *> operator()(const codegen::ArgmaxSpec &) const { return {"x", "ids"}; }
  std::vector<const char *> operator()(const codegen::AttentionSpec &) const {
    return {"q", "k", "v", "scratch", "out"};
  }
};

std::string bytes(int64_t floats) { return withCommas(floats * 4) + " B"; }

const char *sourceText(WeightRecipe::Source s) {
  switch (s) {
  case WeightRecipe::Source::Tensor: return "tensor";
  case WeightRecipe::Source::FoldedWeight: return "fold the chain's weights (W_k · … · W_0, in f64)";
  case WeightRecipe::Source::FoldedBias: return "fold the chain's biases (W_k · (… + b_(k-1)) + b_k, in f64)";
  case WeightRecipe::Source::NormFoldedWeight: return "fold the batchnorm into the weights (W · γ/sqrt(var+eps), in f64)";
  case WeightRecipe::Source::NormFoldedBias: return "fold the batchnorm into the bias ((b − mean) · γ/sqrt(var+eps) + β, in f64)";
  case WeightRecipe::Source::NormScale: return "batchnorm scale (γ/sqrt(var+eps), in f64)";
  case WeightRecipe::Source::NormShift: return "batchnorm shift (β − mean · γ/sqrt(var+eps), in f64)";
  case WeightRecipe::Source::Concat: return "the tensors' rows, one after another";
  case WeightRecipe::Source::RopeTable: return "rotary cos and sin per position (Hugging Face's f32 angles)";
  }
  return "?";
}
} // namespace

std::vector<const char *> operandNames(const codegen::KernelSpec &spec) { return std::visit(Names{}, spec); }

std::string printProgram(const KernelProgram &p) {
  std::string s = fmt::format("kernel program of model {} at batch {}: {} step{}, {} constant{}; arena {} ({:.2f} MB)\n",
                              p.model, p.batch, p.steps.size(), p.steps.size() == 1 ? "" : "s", p.constants.size(),
                              p.constants.size() == 1 ? "" : "s", bytes(p.arenaFloats),
                              double(p.arenaBytes()) / 1e6);
  if (p.kvContext)
    s += fmt::format("a decoder's program: KV cache of {} positions, state {} kept between calls\n", p.kvContext,
                     bytes(p.stateFloats));
  s += "\nbuffers (offset and size in the arena; live over steps first..last):\n";
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const Buffer &b = p.buffers[i];
    const char *role = b.role == Buffer::Role::Input     ? "input"
                       : b.role == Buffer::Role::Scratch ? "scratch"
                       : b.role == Buffer::Role::State   ? "state"
                                                         : "value";
    std::string where = b.role == Buffer::Role::State ? fmt::format("state @{} +{}", bytes(b.offset), bytes(b.elements))
                        : b.viewOf >= 0 ? fmt::format("view of b{}", b.viewOf)
                        : b.offset < 0 ? std::string("unused")
                                       : fmt::format("@{} +{}  steps {}..{}", bytes(b.offset), bytes(b.elements),
                                                     b.firstStep,
                                                     size_t(b.lastStep) >= p.steps.size() ? std::string("end")
                                                                                         : std::to_string(b.lastStep));
    s += fmt::format("  b{:<3} {:<7} {:<28} [{}]  {}{}\n", i, role, b.name, fmt::join(b.shape, ", "), where,
                     BufferId(i) == p.output ? "  (model output)" : "");
  }
  s += "\nconstants (weight recipes, made once when the weights load):\n";
  if (p.constants.empty()) s += "  (none)\n";
  for (size_t i = 0; i < p.constants.size(); ++i) {
    const WeightRecipe &c = p.constants[i];
    s += fmt::format("  c{:<3} {} [{}] {}: {}", i, c.name, fmt::join(c.shape, ", "), dtypeName(c.storage),
                     sourceText(c.source));
    if (!c.tensors.empty()) s += fmt::format(" of {}", fmt::join(c.tensors, ", "));
    if (c.source == WeightRecipe::Source::RopeTable) s += fmt::format(", theta {}", c.ropeTheta);
    if (c.rowBegin > 0) s += fmt::format("; rows from {}", c.rowBegin);
    if (c.kernelTaps > 1) s += fmt::format("; columns in (tap, channel) order, {} taps", c.kernelTaps);
    if (c.transposed) s += "; stored transposed";
    if (c.packFor) s += fmt::format("; packed for {}", c.packFor->key());
    s += "\n";
  }
  s += "\nsteps:\n";
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const Step &st = p.steps[i];
    s += fmt::format("  {:<3} {} ({}, line {}): ", i, st.layer, st.opKind, st.line);
    if (!st.kernel) {
      s += fmt::format("no kernel: {}\n", st.whyNotRunnable);
      continue;
    }
    s += codegen::kernelKey(*st.kernel) + "\n       ";
    std::vector<const char *> names = operandNames(*st.kernel);
    for (size_t k = 0; k < st.operands.size() && k < names.size(); ++k) {
      const Operand &o = st.operands[k];
      if (o.kind == Operand::Kind::None) continue;
      s += fmt::format(" {} {}{}", names[k], o.kind == Operand::Kind::Buffer ? "b" : "c", o.id);
    }
    s += "\n";
  }
  return s;
}

} // namespace nnc::lower
