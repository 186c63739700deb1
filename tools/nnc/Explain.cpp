// `--explain`: every count written out as the course pages do it
// ("784 × 256 + 256 = 200,960"), from the same attributes the passes used.
#include <fmt/format.h>

#include "Report.h"
#include "compiler/ops/OpTable.h"
#include "compiler/support/Diagnostics.h"

namespace nnc::cli {

namespace {
std::string n(int64_t v) { return withCommas(v); }

// The generic parameter formula: the sum of the tensors' shapes ("768 + 768").
std::string tensorSum(const ir::Op &op) {
  std::string s;
  for (const auto &p : op.params) {
    if (p.role == ir::ParamTensor::Role::Buffer) continue;
    std::string dims;
    for (size_t i = 0; i < p.shape.size(); ++i) dims += (i ? " × " : "") + n(p.shape[i]);
    s += (s.empty() ? "" : " + ") + dims;
  }
  return s;
}
} // namespace

std::string renderExplain(const AnalyzedModel &m) {
  const auto &g = m.graph;
  const auto &an = m.analysis;
  std::string s = fmt::format("How the counts of model {} are made (batch {}):\n\n", g.modelName, g.batch);
  std::vector<std::string> paramTerms, macTerms;
  for (size_t i = 1; i < g.ops.size(); ++i) {
    const ir::Op &op = g.ops[i];
    const auto &c = an.ops[i];
    if (!op.isLayer || (!c.params && !c.macs)) continue;
    const ops::OpWork work = ops::opInfo(op.kind).cost(g, op); // the formulas behind the counts
    s += fmt::format("{} ({}):\n", op.name, ir::opKindName(op.kind));
    if (c.params) {
      s += fmt::format("  params  {} = {}\n", work.paramFormula.empty() ? tensorSum(op) : work.paramFormula, n(c.params));
      paramTerms.push_back(n(c.params));
    }
    if (c.macsPerExample) {
      s += fmt::format("  MACs    {} = {} per example", work.macFormula, n(c.macsPerExample));
      if (g.batch > 1) s += fmt::format("; × {} = {} for the batch", g.batch, n(c.macs));
      s += "\n";
      macTerms.push_back(n(c.macsPerExample));
    }
    if (c.attentionMacs)
      s += fmt::format("  scores  2 × {} × {} × {} = {} per example (QKᵀ and AV)\n", n(op.type.shape[1]),
                       n(op.type.shape[1]), n(op.attrs.dim), n(c.attentionMacs / g.batch));
    s += fmt::format("  traffic {} weights{} + inputs + outputs = {} numbers; {} MACs per number\n",
                     n(c.trafficWeights),
                     op.attrs.tie.empty() ? "" : fmt::format(" (the table of {}, tied)", op.attrs.tie),
                     n(c.trafficNumbers), withCommas1(c.intensity));
  }
  const auto &t = an.totals;
  auto sum = [](const std::vector<std::string> &terms) {
    std::string s;
    for (size_t i = 0; i < terms.size(); ++i) s += (i ? " + " : "") + terms[i];
    return s;
  };
  s += fmt::format("\nparams total  {} = {}\n", paramTerms.empty() ? "0" : sum(paramTerms), n(t.params));
  s += fmt::format("MACs total    {} = {} per example", macTerms.empty() ? "0" : sum(macTerms), n(t.macsPerExample));
  if (g.batch > 1) s += fmt::format("; × {} = {} for the batch", g.batch, n(t.macs));
  s += "\n";
  for (DType dt : kWeightDTypes)
    s += fmt::format("weights at {:<4} {} × {} bits / 8 = {} B\n", dtypeName(dt), n(t.params), dtypeBits(dt),
                     n(t.weightBytes.at(dt)));
  return s;
}

} // namespace nnc::cli
