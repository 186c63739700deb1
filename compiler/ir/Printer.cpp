#include "compiler/ir/Printer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace nnc::ir {

namespace {
std::string attrs(const Op &op) {
  const LayerAttrs &a = op.attrs;
  std::vector<std::string> out;
  auto pair = [](int64_t h, int64_t w) { return h == w ? fmt::format("{}", h) : fmt::format("({}, {})", h, w); };
  switch (op.kind) {
  case OpKind::Dense:
    out.push_back(fmt::format("in={}", a.in));
    out.push_back(fmt::format("out={}", a.out));
    if (!a.bias) out.push_back("bias=false");
    if (!a.tie.empty()) out.push_back("tie=" + a.tie);
    break;
  case OpKind::Conv2d: case OpKind::Depthwise:
    out.push_back(fmt::format("in={}", a.in));
    out.push_back(fmt::format("out={}", a.out));
    out.push_back("kernel=" + pair(a.kh, a.kw));
    out.push_back("stride=" + pair(a.sh, a.sw));
    out.push_back("pad=" + pair(a.ph, a.pw));
    out.push_back(fmt::format("groups={}", a.groups));
    if (!a.bias) out.push_back("bias=false");
    break;
  case OpKind::MaxPool: case OpKind::AvgPool:
    out.push_back("kernel=" + pair(a.kh, a.kw));
    out.push_back("stride=" + pair(a.sh, a.sw));
    out.push_back("pad=" + pair(a.ph, a.pw));
    break;
  case OpKind::Dropout: out.push_back(fmt::format("p={}", a.p)); break;
  case OpKind::Lrn:
    out.push_back(fmt::format("size={}, alpha={}, beta={}, k={}", a.size, a.alpha, a.beta, a.k));
    break;
  case OpKind::BatchNorm: case OpKind::LayerNorm: case OpKind::RmsNorm:
    out.push_back(fmt::format("eps={}", a.eps));
    break;
  case OpKind::Embedding: out.push_back(fmt::format("vocab={}, dim={}", a.vocab, a.dim)); break;
  case OpKind::PosEmbedding: out.push_back(fmt::format("max_len={}", a.maxLen)); break;
  case OpKind::Attention:
    out.push_back(fmt::format("heads={}, kv_heads={}, causal={}, rope={}", a.heads, a.kvHeads, a.causal, a.rope));
    if (a.rope) out.push_back(fmt::format("rope_theta={}", a.ropeTheta));
    if (a.bias) out.push_back("bias=true");
    break;
  case OpKind::Mlp: case OpKind::GatedMlp:
    out.push_back(fmt::format("hidden={}, act={}", a.hidden, opKindName(a.act)));
    if (a.bias != (op.kind == OpKind::Mlp)) out.push_back(fmt::format("bias={}", a.bias));
    break;
  default: break;
  }
  if (!op.foldedFrom.empty()) out.push_back(fmt::format("folded=[{}]", fmt::join(op.foldedFrom, ", ")));
  if (op.epilogue != OpKind::Identity) out.push_back(fmt::format("epilogue={}", opKindName(op.epilogue)));
  if (op.residualInput >= 0) out.push_back(fmt::format("residual=%{}", op.residualInput));
  return out.empty() ? "" : fmt::format(" {{{}}}", fmt::join(out, ", "));
}
} // namespace

std::string printGraph(const Graph &g) {
  std::string s = fmt::format("model {} (batch = {}) {{\n", g.modelName, g.batch);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op &op = g.ops[i];
    std::vector<std::string> ins;
    for (ValueId v : op.inputs) ins.push_back(fmt::format("%{}", v));
    std::string line = fmt::format("  %{} = {} \"{}\"", i, opKindName(op.kind), op.name);
    if (!ins.empty()) line += fmt::format("({})", fmt::join(ins, ", "));
    line += attrs(op);
    line += " : " + (op.typed ? op.type.str() : std::string("<untyped>"));
    if (!op.params.empty()) {
      std::vector<std::string> ps;
      for (const auto &p : op.params)
        ps.push_back(fmt::format("{}[{}]", p.name.substr(op.name.size() + 1), fmt::join(p.shape, ", ")));
      line += fmt::format("  params {}:{{{}}}", dtypeName(op.weightDType), fmt::join(ps, ", "));
    }
    if (op.loc.begin.valid()) line += fmt::format("  # line {}", op.loc.begin.line);
    s += line + "\n";
  }
  s += fmt::format("  return %{}\n}}\n", g.output);
  return s;
}

} // namespace nnc::ir
