// The cost rule of every op kind (LANGUAGE.md §3 table): multiply-accumulates of its
// matrices, attention-score MACs, the elementwise "other operations" (bias adds,
// activations, residual adds, norms, pools), and the formulas --explain prints, made
// from the same numbers. All counts are per example; they throw CountOverflow when
// they do not fit in 64 bits.
#include <fmt/format.h>

#include "compiler/ops/CostRulesImpl.h"
#include "compiler/support/CheckedMath.h"
#include "compiler/support/Diagnostics.h"

namespace nnc::ops::cost {

namespace {
std::string n(int64_t v) { return withCommas(v); }
int64_t perExample(const ir::TensorType &t) {
  int64_t e = 1;
  for (size_t i = 1; i < t.shape.size(); ++i) e = mulChecked(e, t.shape[i]);
  return e;
}
// Product of the axes before the last, per example ("rows" of a dense layer).
int64_t rows(const ir::TensorType &t) {
  int64_t e = 1;
  for (size_t i = 1; i + 1 < t.shape.size(); ++i) e = mulChecked(e, t.shape[i]);
  return e;
}
std::string biasTerm(const ir::LayerAttrs &a) { return a.bias ? fmt::format(" + {}", n(a.out)) : ""; }
} // namespace

OpWork none(const ir::Graph &, const ir::Op &) { return {}; }

OpWork perElement(const ir::Graph &, const ir::Op &op) {
  OpWork w;
  w.otherOpsPerExample = perExample(op.type);
  return w;
}

OpWork dense(const ir::Graph &g, const ir::Op &op) {
  const ir::LayerAttrs &a = op.attrs;
  const int64_t r = rows(g.op(op.inputs[0]).type);
  OpWork w;
  w.macsPerExample = mulChecked(r, a.in, a.out); // rows · in · out
  if (a.bias) w.otherOpsPerExample = perExample(op.type);
  w.macFormula = fmt::format("{} × {} × {}", n(r), n(a.in), n(a.out));
  w.paramFormula = a.tie.empty() ? fmt::format("{} × {}{}", n(a.in), n(a.out), biasTerm(a))
                                 : fmt::format("0 (weight tied to {}){}", a.tie, biasTerm(a));
  return w;
}

OpWork conv(const ir::Graph &, const ir::Op &op) {
  const ir::LayerAttrs &a = op.attrs;
  const int64_t ho = op.type.shape[2], wo = op.type.shape[3];
  OpWork w;
  // out · (c / groups) · kh · kw · ho · wo
  w.macsPerExample = mulChecked(a.out, a.in / a.groups, a.kh, a.kw, ho, wo);
  if (a.bias) w.otherOpsPerExample = perExample(op.type);
  w.macFormula = fmt::format("{} × ({} / {}) × {} × {} × {} × {}", n(a.out), n(a.in), a.groups, a.kh, a.kw, n(ho), n(wo));
  w.paramFormula = fmt::format("{} × ({} / {}) × {} × {}{}", n(a.out), n(a.in), a.groups, a.kh, a.kw, biasTerm(a));
  return w;
}

OpWork pool(const ir::Graph &, const ir::Op &op) {
  OpWork w; // one compare / add per window element
  w.otherOpsPerExample = mulChecked(perExample(op.type), op.attrs.kh, op.attrs.kw);
  return w;
}

OpWork globalPool(const ir::Graph &g, const ir::Op &op) {
  OpWork w;
  w.otherOpsPerExample = perExample(g.op(op.inputs[0]).type);
  return w;
}

OpWork attention(const ir::Graph &, const ir::Op &op) {
  const ir::LayerAttrs &a = op.attrs;
  const int64_t seq = op.type.shape[1], d = a.dim;
  const int64_t kvDim = mulChecked(a.kvHeads, d / a.heads);
  OpWork w;
  // seq · (q, o: d·d; k, v: d·kvDim); scores: QKᵀ and AV, seq·seq·d each
  w.macsPerExample = mulChecked(seq, addChecked(mulChecked(2, d, d), mulChecked(2, d, kvDim)));
  w.attentionMacsPerExample = mulChecked(2, seq, seq, d);
  w.otherOpsPerExample = mulChecked(seq, seq, a.heads); // softmax over the scores
  w.macFormula = fmt::format("{} × (2 × {} × {} + 2 × {} × {})", n(seq), n(d), n(d), n(d), n(kvDim));
  return w;
}

OpWork mlp(const ir::Graph &, const ir::Op &op) {
  const int64_t r = rows(op.type);
  OpWork w; // rows · 2 · d · hidden
  w.macsPerExample = mulChecked(r, 2, op.attrs.dim, op.attrs.hidden);
  w.otherOpsPerExample = mulChecked(r, op.attrs.hidden);
  w.macFormula = fmt::format("{} × 2 × {} × {}", n(r), n(op.attrs.dim), n(op.attrs.hidden));
  return w;
}

OpWork gatedMlp(const ir::Graph &, const ir::Op &op) {
  const int64_t r = rows(op.type);
  OpWork w; // rows · 3 · d · hidden (gate, up, down); act(gate) · up
  w.macsPerExample = mulChecked(r, 3, op.attrs.dim, op.attrs.hidden);
  w.otherOpsPerExample = mulChecked(r, 2, op.attrs.hidden);
  w.macFormula = fmt::format("{} × 3 × {} × {}", n(r), n(op.attrs.dim), n(op.attrs.hidden));
  return w;
}

} // namespace nnc::ops::cost
