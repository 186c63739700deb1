// Sequence layers: embedding(vocab, dim) and pos_embedding(max_len) over token ids and
// [seq, d] sequences; attention(heads, kv_heads, bias, causal, rope, rope_theta) with
// Q/K/V/O projections; mlp(hidden, act, bias) and gated_mlp(hidden, act, bias).
//   shape:  embedding: i32 [seq] → f32 [seq, dim], weight [vocab, dim]; pos_embedding:
//           seq ≤ max_len, weight [max_len, d]; attention: heads divides d, kv_heads
//           divides heads, an even head size with rope, {q,o} [d, d] and {k,v}
//           [kv_heads·d/heads, d]; mlp: up [hidden, d], down [d, hidden] (+ gate).
//   cost:   attention: seq·(2·d·d + 2·d·kvDim) MACs and 2·seq·seq·d score MACs apart; its
//           heads·seq·seq scores live while it runs; a decoder caches 2·kvDim per token;
//           mlp: rows·2·d·hidden; gated_mlp: rows·3·d·hidden. Other operations: the
//           activation (and gating product), softmax, and every bias add when bias=true.
//   lower:  embedding: one GatherSpec kernel (a row of the table per token; ids outside
//           [0, vocab) are refused before the step, naming batch row, position and id);
//           pos_embedding: ElementwiseSpec::AddPositions (row r adds table row past + r mod seq);
//           mlp: up GEMM (bias, activation fused) into planned scratch, down GEMM (bias,
//           and the activation and residual FuseEpilogues moved in); gated_mlp: one
//           GEMM of gate and up (GemmSpec::gated: their weights concatenated at load,
//           act(gate) · up in its epilogue, biases too) into scratch — with hidden not
//           a multiple of 16: gate and up GEMMs into scratch, ElementwiseSpec::
//           GatedProduct act(gate) · up in place — then the down GEMM as for mlp;
//           attention: one GEMM for q, k and v (their weights and biases concatenated
//           at load) into planned scratch [rows, d + 2·kvDim]; with
//           rope, RopeSpec rotates the q and k columns in place (a cos/sin table made at
//           load); AttentionSpec (scores, mask, softmax, AV per K/V head group) into
//           scratch [rows, d]; the o GEMM (bias, and the activation and residual
//           FuseEpilogues moved in) writes the output. In a decoder's program (Lower.h:
//           kvContext), a KvAppendSpec step first writes the new rows' k|v into the
//           layer's KV cache (a State buffer of [batch, 2·kvHeads planes], each plane
//           one head's vectors at every position in the program's kvType, i8 with a
//           scale per vector: KvCacheLayout) and attention reads its keys and values
//           there, widened; the rope table covers the context.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "compiler/lower/LoweringContext.h"
#include "compiler/ops/RuleHelpers.h"
#include "compiler/ops/Rules.h"
#include "compiler/ops/ShapeContext.h"

namespace nnc::ops::sequence {
using Role = ir::ParamTensor::Role;
using lower::Operand;
using lower::WeightRecipe;

bool embeddingShape(ShapeContext &cx, ir::Op &op) {
  const ir::TensorType &in = cx.in(op);
  if (in.dtype != DType::I32)
    return cx.fail(op.loc, fmt::format("embedding expects i32 token ids, but receives {} data: {}", dtypeName(in.dtype),
                                       cx.producer(op.inputs[0])));
  op.type.dtype = DType::F32;
  op.type.shape.push_back(op.attrs.dim);
  cx.param(op, "weight", {op.attrs.vocab, op.attrs.dim});
  return true;
}

bool posEmbeddingShape(ShapeContext &cx, ir::Op &op) {
  if (!cx.requireFloat(op) || !cx.requireRank(op, 2, "a [seq, d] sequence")) return false;
  const ir::TensorType &in = cx.in(op);
  const int64_t maxLen = op.attrs.maxLen;
  if (in.shape[1] > maxLen)
    return cx.fail(cx.at(op, "max_len"),
                   fmt::format("pos_embedding holds {} positions (max_len={}), but the sequence has {}: {}", maxLen,
                               maxLen, in.shape[1], cx.producer(op.inputs[0])));
  cx.param(op, "weight", {maxLen, in.shape[2]});
  return true;
}

bool attentionShape(ShapeContext &cx, ir::Op &op) {
  if (!cx.requireFloat(op) || !cx.requireRank(op, 2, "a [seq, d] sequence")) return false;
  ir::LayerAttrs &a = op.attrs;
  const int64_t d = cx.in(op).shape[2];
  if (d % a.heads != 0)
    return cx.fail(cx.at(op, "heads"), fmt::format("heads={} must divide the model width d={}: {} / {} leaves {}",
                                                   a.heads, d, d, a.heads, d % a.heads));
  if (a.heads % a.kvHeads != 0)
    return cx.fail(cx.at(op, "kv_heads"), fmt::format("kv_heads={} must divide heads={}: {} / {} leaves {}", a.kvHeads,
                                                      a.heads, a.heads, a.kvHeads, a.heads % a.kvHeads));
  const int64_t headDim = d / a.heads;
  if (a.rope && headDim % 2 != 0)
    return cx.fail(cx.at(op, "rope"),
                   fmt::format("rope rotates pairs, so the head size must be even; found d / heads = {} / {} = {}", d,
                               a.heads, headDim));
  if (a.rope && !(a.ropeTheta > 0 && std::isfinite(a.ropeTheta))) // θ^(-2i/d): 0 made every angle NaN
    return cx.fail(cx.at(op, "rope_theta"),
                   fmt::format("rope_theta is the base of RoPE's frequencies θ^(-2i/d) and must be above 0 and finite; "
                               "found {}",
                               a.ropeTheta));
  const int64_t kvDim = mulChecked(a.kvHeads, headDim);
  a.dim = d;
  for (const char *m : {"q", "k", "v", "o"}) {
    const bool kv = m[0] == 'k' || m[0] == 'v';
    const int64_t rows = kv ? kvDim : d;
    cx.param(op, std::string(m) + ".weight", {rows, d});
    if (a.bias) cx.param(op, std::string(m) + ".bias", {rows}, Role::Bias);
  }
  return true;
}

OpWork attentionCost(const ir::Graph &, const ir::Op &op) {
  const ir::LayerAttrs &a = op.attrs;
  const int64_t seq = op.type.shape[1], d = a.dim;
  const int64_t kvDim = mulChecked(a.kvHeads, d / a.heads);
  OpWork w;
  w.macsPerExample = mulChecked(seq, addChecked(mulChecked(2, d, d), mulChecked(2, d, kvDim)));
  w.attentionMacsPerExample = countNamed(fmt::format("the attention-score MACs, 2 × seq² × d = 2 × {}² × {}", n(seq), n(d)),
                                         [&] { return mulChecked(2, seq, seq, d); });
  w.otherOpsPerExample = countNamed(fmt::format("the softmax operations, seq² × heads = {}² × {}", n(seq), n(a.heads)),
                                    [&] { return mulChecked(seq, seq, a.heads); });
  if (a.bias) w.otherOpsPerExample = addChecked(w.otherOpsPerExample, mulChecked(seq, 2, addChecked(d, kvDim)));
  w.scratchElementsPerExample = countNamed(fmt::format("the scores, heads × seq² = {} × {}²", n(a.heads), n(seq)),
                                           [&] { return mulChecked(a.heads, seq, seq); }); // when materialised
  w.kvCacheElementsPerToken = mulChecked(2, kvDim);             // one key and one value per position
  w.kvCacheHeadDim = d / a.heads;
  w.macFormula = fmt::format("{} × (2 × {} × {} + 2 × {} × {})", n(seq), n(d), n(d), n(d), n(kvDim));
  return w;
}

bool mlpShape(ShapeContext &cx, ir::Op &op) {
  if (!cx.requireFloat(op)) return false;
  ir::LayerAttrs &a = op.attrs;
  const int64_t d = cx.in(op).shape.back();
  a.dim = d;
  if (op.kind == ir::OpKind::GatedMlp) {
    cx.param(op, "gate.weight", {a.hidden, d});
    if (a.bias) cx.param(op, "gate.bias", {a.hidden}, Role::Bias);
  }
  cx.param(op, "up.weight", {a.hidden, d});
  if (a.bias) cx.param(op, "up.bias", {a.hidden}, Role::Bias);
  cx.param(op, "down.weight", {d, a.hidden});
  if (a.bias) cx.param(op, "down.bias", {d}, Role::Bias);
  return true;
}

OpWork mlpCost(const ir::Graph &, const ir::Op &op) {
  const int64_t r = rowsPerExample(op.type);
  OpWork w;
  w.macsPerExample = mulChecked(r, 2, op.attrs.dim, op.attrs.hidden);
  w.otherOpsPerExample = mulChecked(r, op.attrs.hidden); // the activation
  if (op.attrs.bias) // up and down bias adds
    w.otherOpsPerExample = addChecked(w.otherOpsPerExample, mulChecked(r, addChecked(op.attrs.hidden, op.attrs.dim)));
  w.macFormula = fmt::format("{} × 2 × {} × {}", n(r), n(op.attrs.dim), n(op.attrs.hidden));
  return w;
}

OpWork gatedMlpCost(const ir::Graph &, const ir::Op &op) {
  const int64_t r = rowsPerExample(op.type);
  OpWork w; // gate, up, down; act(gate) · up
  w.macsPerExample = mulChecked(r, 3, op.attrs.dim, op.attrs.hidden);
  w.otherOpsPerExample = mulChecked(r, 2, op.attrs.hidden);
  if (op.attrs.bias) // gate, up and down bias adds
    w.otherOpsPerExample =
        addChecked(w.otherOpsPerExample, mulChecked(r, addChecked(mulChecked(2, op.attrs.hidden), op.attrs.dim)));
  w.macFormula = fmt::format("{} × 3 × {} × {}", n(r), n(op.attrs.dim), n(op.attrs.hidden));
  return w;
}

void embeddingLower(lower::LoweringContext &cx, const ir::Op &op) {
  const ir::TensorType &ids = cx.typeOf(op.inputs[0]);
  codegen::GatherSpec spec;
  spec.rows = ids.elements();
  spec.seq = std::max<int64_t>(1, perExample(ids));
  spec.vocab = op.attrs.vocab;
  spec.cols = op.attrs.dim;
  // Below f32 the table is stored in rowTableLayout: i8 one scale per token row, i4
  // groups along the row. A dense(tie=) head packs its own copy for its GEMM
  // (DenseOps.cpp): the GEMM reads k-major panels, the gather whole rows; in the same
  // dtype both quantise alike (a row is an output channel, groups run along K).
  spec.tableType = op.weightDType;
  spec.group = op.weightDType == DType::I4 ? cx.quant().group : 0;
  cx.step(op, spec,
          {cx.in(op), cx.tensor(op.name + ".weight", {spec.vocab, spec.cols}, spec.tableType), cx.out(op)});
}

void posEmbeddingLower(lower::LoweringContext &cx, const ir::Op &op) {
  auto [rows, cols] = rowsCols(op.type);
  codegen::ElementwiseSpec spec{codegen::ElementwiseSpec::AddPositions, codegen::Activation::None, rows, cols};
  spec.period = op.type.shape[1]; // seq: the table's first seq rows, one per position
  spec.tableType = op.weightDType; // below f32: rowTableLayout, as an embedding's table
  spec.tableRows = op.weightDType == DType::F32 ? 0 : op.attrs.maxLen;
  spec.group = op.weightDType == DType::I4 ? cx.quant().group : 0;
  cx.step(op, spec,
          {cx.in(op), cx.tensor(op.name + ".weight", {op.attrs.maxLen, cols}, spec.tableType), cx.out(op)});
}

namespace {
// One projection of an mlp: C[rows, N] = act(A · W[N, K]ᵀ + b) (+ residual), W the file
// tensor "<layer>.<part>.weight" packed for the GEMM, b "<layer>.<part>.bias".
void projection(lower::LoweringContext &cx, const ir::Op &op, const std::string &part, int64_t rows, int64_t n,
                int64_t k, codegen::Activation act, Operand a, Operand residual, Operand c) {
  codegen::GemmSpec spec;
  spec.M = rows;
  spec.N = n;
  spec.K = k;
  spec.bias = op.attrs.bias;
  spec.act = act;
  spec.residual = residual.kind != Operand::Kind::None;
  storeWeightsAsLayer(cx.quant(), op, spec);
  WeightRecipe w;
  w.name = op.name + "." + part + ".weight";
  w.tensors = {w.name};
  w.shape = {n, k};
  w.packFor = spec;
  w.storage = spec.weightType;
  Operand weights = cx.constant(std::move(w));
  Operand bias = spec.bias ? cx.tensor(op.name + "." + part + ".bias", {n}) : Operand::none();
  cx.step(op, spec, {a, weights, bias, residual, c});
}
} // namespace

void mlpLower(lower::LoweringContext &cx, const ir::Op &op) {
  const int64_t d = op.attrs.dim, hidden = op.attrs.hidden;
  const int64_t rows = op.type.elements() / d;
  const Operand residual = cx.residual(op);
  const codegen::Activation after = activationOf(op.epilogue); // an activation after the layer, fused
  if (op.kind == ir::OpKind::Mlp) {
    Operand h = cx.scratch(op, mulChecked(rows, hidden));
    projection(cx, op, "up", rows, hidden, d, activationOf(op.attrs.act), cx.in(op), Operand::none(), h);
    projection(cx, op, "down", rows, d, hidden, after, h, residual, cx.out(op));
    return;
  }
  // Gate and up as one GEMM (GemmSpec::gated) whose epilogue makes act(gate) · up.
  codegen::GemmSpec gated;
  gated.M = rows;
  gated.N = mulChecked(2, hidden);
  gated.K = d;
  gated.act = activationOf(op.attrs.act);
  gated.gated = true;
  gated.bias = op.attrs.bias;
  storeWeightsAsLayer(cx.quant(), op, gated);
  if (gated.N % codegen::kGatedColumnMultiple == 0) {
    // W = [gate.weight; up.weight], b likewise.
    auto joined = [&](const char *part) {
      WeightRecipe w;
      w.name = op.name + ".{gate,up}." + part;
      w.source = WeightRecipe::Source::Concat;
      w.tensors = {op.name + ".gate." + part, op.name + ".up." + part};
      return w;
    };
    WeightRecipe w = joined("weight");
    w.shape = {gated.N, d};
    w.packFor = gated;
    w.storage = gated.weightType;
    Operand bias = Operand::none();
    if (gated.bias) {
      WeightRecipe b = joined("bias");
      b.shape = {gated.N};
      bias = cx.constant(std::move(b));
    }
    Operand h = cx.scratch(op, mulChecked(rows, hidden));
    cx.step(op, gated, {cx.in(op), cx.constant(std::move(w)), bias, Operand::none(), h});
    projection(cx, op, "down", rows, d, hidden, after, h, residual, cx.out(op));
    return;
  }
  // Else (a hidden size that is not a multiple of kGatedColumnMultiple / 2): two GEMMs
  // and the product as an elementwise step.
  Operand gate = cx.scratch(op, mulChecked(rows, hidden)), up = cx.scratch(op, mulChecked(rows, hidden));
  projection(cx, op, "gate", rows, hidden, d, codegen::Activation::None, cx.in(op), Operand::none(), gate);
  projection(cx, op, "up", rows, hidden, d, codegen::Activation::None, cx.in(op), Operand::none(), up);
  cx.step(op,
          codegen::ElementwiseSpec{codegen::ElementwiseSpec::GatedProduct, activationOf(op.attrs.act), rows, hidden},
          {gate, up, gate});
  projection(cx, op, "down", rows, d, hidden, after, gate, residual, cx.out(op));
}

void attentionLower(lower::LoweringContext &cx, const ir::Op &op) {
  const ir::LayerAttrs &a = op.attrs;
  const int64_t context = cx.kvContext(); // > 0: keys and values in a KV cache (a decoder)
  if (context > 0 && !a.causal)
    return cx.notRunnable(op, "attends to later positions (causal=false): a decoder's KV cache holds only the past");
  const int64_t batch = op.type.shape[0], seq = op.type.shape[1], d = a.dim;
  const int64_t rows = mulChecked(batch, seq), headDim = d / a.heads, kvDim = mulChecked(a.kvHeads, headDim);
  const int64_t qkvCols = addChecked(d, mulChecked(2, kvDim));

  // q, k and v as one GEMM: W = [q.weight; k.weight; v.weight], b likewise.
  codegen::GemmSpec qkvSpec;
  qkvSpec.M = rows;
  qkvSpec.N = qkvCols;
  qkvSpec.K = d;
  qkvSpec.bias = a.bias;
  // In the layer's dtype: the concatenated rows quantise as one [d + 2·kvDim, d] weight,
  // i8 one scale per output row (per q, k or v channel), i4 groups along K (d).
  storeWeightsAsLayer(cx.quant(), op, qkvSpec);
  WeightRecipe w;
  w.name = op.name + ".{q,k,v}.weight";
  w.source = WeightRecipe::Source::Concat;
  for (const char *m : {".q.weight", ".k.weight", ".v.weight"}) w.tensors.push_back(op.name + m);
  w.shape = {qkvCols, d};
  w.packFor = qkvSpec;
  w.storage = qkvSpec.weightType;
  Operand bias = Operand::none();
  if (a.bias) {
    WeightRecipe b;
    b.name = op.name + ".{q,k,v}.bias";
    b.source = WeightRecipe::Source::Concat;
    for (const char *m : {".q.bias", ".k.bias", ".v.bias"}) b.tensors.push_back(op.name + m);
    b.shape = {qkvCols};
    bias = cx.constant(std::move(b));
  }
  const Operand qkv = cx.scratch(op, mulChecked(rows, qkvCols));
  cx.step(op, qkvSpec, {cx.in(op), cx.constant(std::move(w)), bias, Operand::none(), qkv});

  if (a.rope) { // q's heads and k's are adjacent: one pass over heads + kv_heads slices
    codegen::RopeSpec rope{rows, seq, qkvCols, a.heads + a.kvHeads, headDim};
    WeightRecipe table;
    table.name = op.name + " rope table";
    table.source = WeightRecipe::Source::RopeTable;
    table.shape = {context > 0 ? context : seq, headDim};
    table.ropeTheta = a.ropeTheta;
    cx.step(op, rope, {qkv, cx.constant(std::move(table)), qkv});
  }

  codegen::AttentionSpec att;
  att.batch = batch;
  att.seq = seq;
  att.kvStride = seq;
  att.heads = a.heads;
  att.kvHeads = a.kvHeads;
  att.headDim = headDim;
  att.causal = a.causal;
  att.qLd = att.kvLd = qkvCols;
  att.qCol = 0;
  att.kCol = d;
  att.vCol = d + kvDim;
  att.outLd = d;
  att.scale = 1.0 / std::sqrt(double(headDim));
  Operand keys = qkv;
  if (context > 0) { // the new rows' k|v go to the cache (in its dtype); attention reads all of it
    const codegen::KvAppendSpec append{rows, seq, context, qkvCols, d, mulChecked(2, kvDim), cx.kvType(), headDim};
    const codegen::KvCacheLayout layout = append.layout();
    keys = cx.state("kv cache of " + op.name, {batch, 2 * layout.kvHeads, layout.planeBytes() / 4});
    cx.step(op, append, {qkv, keys});
    att.kvStride = context;
    att.kvCache = true;
    att.kvType = append.type;
    att.kvLd = att.kCol = att.vCol = 0;
  }
  const Operand heads = cx.scratch(op, mulChecked(rows, d));
  const Operand scratch = cx.scratch(op, mulChecked(att.units(), att.scratchPerUnit()));
  cx.step(op, att, {qkv, keys, keys, scratch, heads});

  const Operand residual = cx.residual(op);
  projection(cx, op, "o", rows, d, d, activationOf(op.epilogue), heads, residual, cx.out(op));
}

} // namespace nnc::ops::sequence
