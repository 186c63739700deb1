#include "compiler/passes/CostRules.h"

#include "compiler/support/CheckedMath.h"

namespace nnc::passes {
using ir::OpKind;

namespace {
int64_t perExample(const ir::TensorType &t) {
  int64_t n = 1;
  for (size_t i = 1; i < t.shape.size(); ++i) n = mulChecked(n, t.shape[i]);
  return n;
}
// Product of the axes before the last, per example ("rows" of a dense layer).
int64_t rows(const ir::TensorType &t) {
  int64_t n = 1;
  for (size_t i = 1; i + 1 < t.shape.size(); ++i) n = mulChecked(n, t.shape[i]);
  return n;
}
} // namespace

OpWork opWork(const ir::Graph &g, const ir::Op &op) {
  OpWork w;
  const ir::LayerAttrs &a = op.attrs;
  const int64_t outElems = perExample(op.type);
  switch (op.kind) {
  case OpKind::Input:
    break;
  case OpKind::Dense: {
    const ir::TensorType &in = g.op(op.inputs[0]).type;
    // rows · in · out
    w.macsPerExample = mulChecked(rows(in), a.in, a.out);
    if (a.bias) w.otherOpsPerExample = outElems;
    break;
  }
  case OpKind::Conv2d:
  case OpKind::Depthwise:
    // out · (c / groups) · kh · kw · ho · wo
    w.macsPerExample = mulChecked(a.out, a.in / a.groups, a.kh, a.kw, op.type.shape[2], op.type.shape[3]);
    if (a.bias) w.otherOpsPerExample = outElems;
    break;
  case OpKind::MaxPool:
  case OpKind::AvgPool:
    w.otherOpsPerExample = mulChecked(outElems, a.kh, a.kw); // one compare/add per window element
    break;
  case OpKind::GlobalAvgPool:
    w.otherOpsPerExample = perExample(g.op(op.inputs[0]).type);
    break;
  case OpKind::Attention: {
    int64_t seq = op.type.shape[1], d = a.dim;
    int64_t kvDim = mulChecked(a.kvHeads, d / a.heads);
    // seq · (q, o: d·d; k, v: d·kvDim); scores: QKᵀ and AV, seq·seq·d each
    w.macsPerExample = mulChecked(seq, addChecked(mulChecked(2, d, d), mulChecked(2, d, kvDim)));
    w.attentionMacsPerExample = mulChecked(2, seq, seq, d);
    w.otherOpsPerExample = mulChecked(seq, seq, a.heads); // softmax over the scores
    break;
  }
  case OpKind::Mlp:
    // rows · 2 · d · hidden
    w.macsPerExample = mulChecked(rows(op.type), 2, a.dim, a.hidden);
    w.otherOpsPerExample = mulChecked(rows(op.type), a.hidden);
    break;
  case OpKind::GatedMlp:
    // rows · 3 · d · hidden (gate, up, down)
    w.macsPerExample = mulChecked(rows(op.type), 3, a.dim, a.hidden);
    w.otherOpsPerExample = mulChecked(rows(op.type), 2, a.hidden); // act(gate) · up
    break;
  case OpKind::Flatten:
  case OpKind::Identity:
  case OpKind::Dropout:
    break; // views at inference
  case OpKind::Embedding:
    break; // a lookup
  default: // activations, softmax, norms, lrn, pos_embedding, add: one op per element
    w.otherOpsPerExample = outElems;
    break;
  }
  return w;
}

} // namespace nnc::passes
