// ShapeInferencePass: gives every op its output TensorType and its parameter tensors.
//
// Assumes: the graph came from the expander (kinds, attributes, inputs set; the Input
//   op typed).
// Guarantees: every op is typed, or an error naming the op's source position says what
//   was expected and what was found. An op whose input failed is left untyped without
//   a second error, so one mistake is reported once; independent mistakes all are.
// Rules (LANGUAGE.md §3): dense needs `in=` to equal the incoming last axis; conv and
//   pool give ho = (h + 2·pad − kh) / stride + 1 ≥ 1; groups divide both channel
//   counts; heads divides d and kv_heads divides heads; seq ≤ max_len; residual joins
//   need equal shapes; a tied dense needs an embedding of shape [out, in]. Any count
//   that does not fit in 64 bits is an error.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/passes/Pass.h"
#include "compiler/support/CheckedMath.h"

namespace nnc::passes {
using ir::OpKind;
using Role = ir::ParamTensor::Role;
using Init = ir::ParamTensor::Init;

namespace {

std::string dims(const std::vector<int64_t> &shape, size_t from = 1) {
  std::vector<int64_t> tail(shape.begin() + std::min(from, shape.size()), shape.end());
  return fmt::format("[{}]", fmt::join(tail, ", "));
}

class ShapeInference {
public:
  ShapeInference(ir::Graph &g, DiagnosticEngine &d) : g_(g), d_(d) {}

  bool run() {
    bool ok = true;
    g_.ops[0].typed = true;
    try {
      g_.ops[0].type.elements();
    } catch (const CountOverflow &) {
      return fail(g_.ops[0], g_.ops[0].loc,
                  fmt::format("the input '{}' of shape {} with batch {} has too many elements: expected at most {} "
                              "(2^63 - 1)",
                              g_.ops[0].name, dims(g_.ops[0].type.shape), g_.batch, withCommas(INT64_MAX)));
    }
    for (size_t i = 1; i < g_.ops.size(); ++i) {
      ir::Op &op = g_.ops[i];
      bool inputsTyped = true;
      for (ir::ValueId v : op.inputs) inputsTyped &= g_.op(v).typed;
      if (!inputsTyped) { ok = false; continue; }
      try {
        op.typed = infer(op);
        if (op.typed) op.type.elements(); // throws if the whole tensor overflows
      } catch (const CountOverflow &) {
        d_.error(op.loc, fmt::format("a size in layer '{}' ({}) does not fit in 64 bits: expected at most {} "
                                     "(2^63 - 1); the layer receives shape {}: {}",
                                     op.name, ir::opKindName(op.kind), withCommas(INT64_MAX),
                                     dims(g_.op(op.inputs[0]).type.shape), producer(op.inputs[0])));
        op.typed = false;
      }
      ok &= op.typed;
    }
    return ok && !d_.hasErrors();
  }

private:
  // "the output of layer 'fc1' (dense, line 3)" / "the model input 'x' (line 2)"
  std::string producer(ir::ValueId v) const {
    const ir::Op &p = g_.op(v);
    if (p.kind == OpKind::Input) return fmt::format("the model input '{}' (line {})", p.name, p.loc.begin.line);
    if (p.kind == OpKind::Add) return fmt::format("the residual sum (line {})", p.loc.begin.line);
    return fmt::format("the output of layer '{}' ({}, line {})", p.name, ir::opKindName(p.kind),
                       p.loc.begin.line);
  }

  SourceRange at(const ir::Op &op, const char *option) const {
    auto it = op.argLocs.find(option);
    return it != op.argLocs.end() ? it->second : op.loc;
  }

  bool fail(const ir::Op &op, SourceRange r, std::string msg) {
    d_.error(r, std::move(msg));
    (void)op;
    return false;
  }

  void param(ir::Op &op, const char *suffix, std::vector<int64_t> shape, Role role = Role::Weight,
             Init init = Init::Uniform) {
    ir::ParamTensor t;
    t.name = op.name + "." + suffix;
    t.shape = std::move(shape);
    t.role = role;
    t.init = init;
    t.count(); // overflow check
    // fan-in: a weight's elements per output row; a bias uses its weight's
    // ("q.bias" → "q.weight"), added just before it.
    for (size_t i = 1; i < t.shape.size(); ++i) t.fanIn = mulChecked(t.fanIn, t.shape[i]);
    if (role == Role::Bias && t.name.size() >= 4) {
      std::string weightName = t.name.substr(0, t.name.size() - 4) + "weight";
      for (const auto &q : op.params)
        if (q.name == weightName) t.fanIn = q.fanIn;
    }
    op.params.push_back(std::move(t));
  }

  bool requireRank(ir::Op &op, const ir::TensorType &in, size_t rank, const char *what) {
    if (in.shape.size() == rank + 1) return true;
    return fail(op, op.loc, fmt::format("{} expects {} per example, but receives {} of shape {}: {}",
                                        ir::opKindName(op.kind), what, in.shape.size() - 1 == 1 ? "a vector" : "a tensor",
                                        dims(in.shape), producer(op.inputs[0])));
  }

  bool requireFloat(ir::Op &op, const ir::TensorType &in) {
    if (in.dtype == DType::F32) return true;
    return fail(op, op.loc, fmt::format("{} expects f32 data, but receives {} token ids: {} "
                                        "(an embedding turns token ids into vectors)",
                                        ir::opKindName(op.kind), dtypeName(in.dtype), producer(op.inputs[0])));
  }

  // ho = (h + 2·pad − k) / stride + 1, which must be at least 1.
  std::optional<int64_t> spatial(ir::Op &op, const char *axis, int64_t h, int64_t k, int64_t s, int64_t p) {
    int64_t padded = addChecked(h, mulChecked(2, p));
    if (padded < k) {
      fail(op, at(op, "kernel"),
           fmt::format("{} kernel {} is larger than the padded {} {} (= {} + 2 × {}): the output would be empty",
                       ir::opKindName(op.kind), k, axis, padded, h, p));
      return std::nullopt;
    }
    return (padded - k) / s + 1;
  }

  bool infer(ir::Op &op) {
    const ir::TensorType &in = g_.op(op.inputs[0]).type;
    const int64_t B = in.shape[0];
    ir::LayerAttrs &a = op.attrs;
    op.type = in;
    op.params.clear();
    switch (op.kind) {
    case OpKind::Input:
      return true;
    case OpKind::Dense: {
      if (!requireFloat(op, in)) return false;
      int64_t last = in.shape.back();
      if (in.shape.size() < 2)
        return fail(op, op.loc, "dense expects at least one axis besides the batch");
      if (a.in && a.in != last)
        return fail(op, at(op, "in"),
                    fmt::format("dense expects {} inputs on its last axis (in={}), but receives {}: {}", a.in,
                                a.in, last, producer(op.inputs[0])));
      a.in = last;
      op.type.shape.back() = a.out;
      if (!a.tie.empty()) {
        if (!checkTie(op)) return false;
      } else {
        param(op, "weight", {a.out, a.in});
      }
      if (a.bias) param(op, "bias", {a.out}, Role::Bias);
      return true;
    }
    case OpKind::Conv2d:
    case OpKind::Depthwise: {
      if (!requireFloat(op, in) || !requireRank(op, in, 3, "a [channels, height, width] feature map"))
        return false;
      int64_t c = in.shape[1];
      if (op.kind == OpKind::Depthwise) {
        a.groups = c;
        a.out = mulChecked(c, a.multiplier);
      }
      if (c % a.groups != 0)
        return fail(op, at(op, "groups"),
                    fmt::format("groups={} must divide the {} input channels: {} / {} leaves {}; input is {}",
                                a.groups, c, c, a.groups, c % a.groups, producer(op.inputs[0])));
      if (a.out % a.groups != 0)
        return fail(op, at(op, "groups"),
                    fmt::format("groups={} must divide the {} output channels: {} / {} leaves {}", a.groups,
                                a.out, a.out, a.groups, a.out % a.groups));
      auto ho = spatial(op, "height", in.shape[2], a.kh, a.sh, a.ph);
      auto wo = spatial(op, "width", in.shape[3], a.kw, a.sw, a.pw);
      if (!ho || !wo) return false;
      a.in = c;
      op.type.shape = {B, a.out, *ho, *wo};
      param(op, "weight", {a.out, c / a.groups, a.kh, a.kw});
      if (a.bias) param(op, "bias", {a.out}, Role::Bias);
      return true;
    }
    case OpKind::MaxPool:
    case OpKind::AvgPool: {
      if (!requireFloat(op, in) || !requireRank(op, in, 3, "a [channels, height, width] feature map"))
        return false;
      if (2 * a.ph > a.kh || 2 * a.pw > a.kw)
        return fail(op, at(op, "pad"),
                    fmt::format("{} pad must be at most half the kernel: kernel ({}, {}) allows pad up to ({}, {}), "
                                "found ({}, {})",
                                ir::opKindName(op.kind), a.kh, a.kw, a.kh / 2, a.kw / 2, a.ph, a.pw));
      auto ho = spatial(op, "height", in.shape[2], a.kh, a.sh, a.ph);
      auto wo = spatial(op, "width", in.shape[3], a.kw, a.sw, a.pw);
      if (!ho || !wo) return false;
      op.type.shape = {B, in.shape[1], *ho, *wo};
      return true;
    }
    case OpKind::GlobalAvgPool:
      if (!requireFloat(op, in) || !requireRank(op, in, 3, "a [channels, height, width] feature map"))
        return false;
      op.type.shape = {B, in.shape[1]};
      return true;
    case OpKind::Flatten: {
      int64_t n = 1;
      for (size_t i = 1; i < in.shape.size(); ++i) n = mulChecked(n, in.shape[i]);
      op.type.shape = {B, n};
      return true;
    }
    case OpKind::Relu: case OpKind::Relu6: case OpKind::Sigmoid: case OpKind::Tanh:
    case OpKind::Gelu: case OpKind::GeluTanh: case OpKind::Silu: case OpKind::Softmax:
    case OpKind::Identity: case OpKind::Dropout:
      return requireFloat(op, in);
    case OpKind::Lrn:
      if (!requireFloat(op, in)) return false;
      if (in.shape.size() < 3)
        return fail(op, op.loc, fmt::format("lrn expects [channels, ...] with at least 2 axes, found {}: {}",
                                            dims(in.shape), producer(op.inputs[0])));
      return true;
    case OpKind::BatchNorm: {
      if (!requireFloat(op, in)) return false;
      int64_t c = in.shape.size() > 1 ? in.shape[1] : 1;
      param(op, "weight", {c}, Role::Weight, Init::Ones);
      param(op, "bias", {c}, Role::Bias, Init::Zeros);
      param(op, "running_mean", {c}, Role::Buffer, Init::Zeros);
      param(op, "running_var", {c}, Role::Buffer, Init::Ones);
      return true;
    }
    case OpKind::LayerNorm:
      if (!requireFloat(op, in)) return false;
      param(op, "weight", {in.shape.back()}, Role::Weight, Init::Ones);
      if (a.bias) param(op, "bias", {in.shape.back()}, Role::Bias, Init::Zeros);
      return true;
    case OpKind::RmsNorm:
      if (!requireFloat(op, in)) return false;
      param(op, "weight", {in.shape.back()}, Role::Weight, Init::Ones);
      return true;
    case OpKind::Embedding:
      if (in.dtype != DType::I32)
        return fail(op, op.loc, fmt::format("embedding expects i32 token ids, but receives {} data: {}",
                                            dtypeName(in.dtype), producer(op.inputs[0])));
      op.type.dtype = DType::F32;
      op.type.shape.push_back(a.dim);
      param(op, "weight", {a.vocab, a.dim});
      return true;
    case OpKind::PosEmbedding: {
      if (!requireFloat(op, in) || !requireRank(op, in, 2, "a [seq, d] sequence")) return false;
      if (in.shape[1] > a.maxLen)
        return fail(op, at(op, "max_len"),
                    fmt::format("pos_embedding holds {} positions (max_len={}), but the sequence has {}: {}", a.maxLen,
                                a.maxLen, in.shape[1], producer(op.inputs[0])));
      param(op, "weight", {a.maxLen, in.shape[2]});
      return true;
    }
    case OpKind::Attention: {
      if (!requireFloat(op, in) || !requireRank(op, in, 2, "a [seq, d] sequence")) return false;
      int64_t d = in.shape[2];
      if (d % a.heads != 0)
        return fail(op, at(op, "heads"),
                    fmt::format("heads={} must divide the model width d={}: {} / {} leaves {}", a.heads, d, d,
                                a.heads, d % a.heads));
      if (a.heads % a.kvHeads != 0)
        return fail(op, at(op, "kv_heads"),
                    fmt::format("kv_heads={} must divide heads={}: {} / {} leaves {}", a.kvHeads, a.heads, a.heads,
                                a.kvHeads, a.heads % a.kvHeads));
      int64_t headDim = d / a.heads;
      if (a.rope && headDim % 2 != 0)
        return fail(op, at(op, "rope"),
                    fmt::format("rope rotates pairs, so the head size must be even; found d / heads = {} / {} = {}",
                                d, a.heads, headDim));
      int64_t kvDim = mulChecked(a.kvHeads, headDim);
      a.dim = d;
      for (const char *m : {"q", "k", "v", "o"}) {
        bool kv = (m[0] == 'k' || m[0] == 'v');
        int64_t rows = kv ? kvDim : d;
        param(op, (std::string(m) + ".weight").c_str(), {rows, d});
        if (a.bias) param(op, (std::string(m) + ".bias").c_str(), {rows}, Role::Bias);
      }
      return true;
    }
    case OpKind::Mlp:
    case OpKind::GatedMlp: {
      if (!requireFloat(op, in)) return false;
      int64_t d = in.shape.back();
      a.dim = d;
      if (op.kind == OpKind::GatedMlp) {
        param(op, "gate.weight", {a.hidden, d});
        if (a.bias) param(op, "gate.bias", {a.hidden}, Role::Bias);
      }
      param(op, "up.weight", {a.hidden, d});
      if (a.bias) param(op, "up.bias", {a.hidden}, Role::Bias);
      param(op, "down.weight", {d, a.hidden});
      if (a.bias) param(op, "down.bias", {d}, Role::Bias);
      return true;
    }
    case OpKind::Add: {
      const ir::TensorType &other = g_.op(op.inputs[1]).type;
      if (in.shape != other.shape) {
        bool plain = g_.op(op.inputs[1]).kind == OpKind::Input || op.inputs[1] < op.inputs[0];
        return fail(op, op.loc,
                    fmt::format("residual: the body returns shape {} but {} has shape {}; the two must match to be "
                                "added (body ends with {})",
                                dims(in.shape), plain ? "its input x" : "the shortcut", dims(other.shape),
                                producer(op.inputs[0])));
      }
      return true;
    }
    }
    return false;
  }

  bool checkTie(ir::Op &op) {
    const ir::Op *target = nullptr;
    for (const auto &o : g_.ops) {
      if (&o == &op) break;
      if (o.kind != OpKind::Embedding) continue;
      const std::string &n = o.name;
      if (n == op.attrs.tie || (n.size() > op.attrs.tie.size() &&
                                n.compare(n.size() - op.attrs.tie.size() - 1, std::string::npos,
                                          "." + op.attrs.tie) == 0))
        target = &o;
    }
    if (!target)
      return fail(op, at(op, "tie"),
                  fmt::format("tie={} must name an embedding layer that comes before this one; none found",
                              op.attrs.tie));
    if (!target->typed) return false;
    int64_t vocab = target->attrs.vocab, dim = target->attrs.dim;
    if (vocab != op.attrs.out || dim != op.attrs.in)
      return fail(op, at(op, "tie"),
                  fmt::format("tie={}: the embedding's table is [{}, {}] but this dense needs [out, in] = [{}, {}]",
                              op.attrs.tie, vocab, dim, op.attrs.out, op.attrs.in));
    op.attrs.tie = target->name;
    return true;
  }

  ir::Graph &g_;
  DiagnosticEngine &d_;
};

class ShapeInferencePass : public Pass {
public:
  const char *name() const override { return "shape-inference"; }
  bool run(ir::Graph &g, PassContext &ctx) override { return ShapeInference(g, ctx.diags).run(); }
};

} // namespace

std::unique_ptr<Pass> createShapeInferencePass() { return std::make_unique<ShapeInferencePass>(); }

} // namespace nnc::passes
