// Binds a layer statement's arguments to the layer's options (LayerOptions.cpp) and
// stores them in the op's attributes, with the defaults each layer kind has.
#include "compiler/frontend/LayerArguments.h"

#include <fmt/format.h>

#include <set>

#include "compiler/frontend/LayerOptions.h"

namespace nnc {
using ir::OpKind;

bool bindLayerArguments(const ast::Stmt &s, ir::Op &op, ExprEvaluator &eval, DiagnosticEngine &d_) {
  const LayerSpec &spec = layerSpec(op.kind);
  ir::LayerAttrs &a = op.attrs;
  // Defaults that differ from LayerAttrs' own.
  switch (op.kind) {
  case OpKind::Attention: a.bias = false; break;
  case OpKind::GatedMlp: a.bias = false; a.act = OpKind::Silu; break;
  case OpKind::BatchNorm: case OpKind::LayerNorm: a.eps = 1e-5; break;
  case OpKind::RmsNorm: a.eps = 1e-6; break;
  case OpKind::Dropout: a.p = 0.5; break;
  case OpKind::Lrn: a.alpha = 1e-4; a.beta = 0.75; a.k = 1; break;
  default: break;
  }
  bool ok = true, unknownArg = false;
  std::set<std::string> given;
  bool strideGiven = false, kvGiven = false;
  for (size_t i = 0; i < s.args.size(); ++i) {
    const ast::Arg &arg = s.args[i];
    const OptionSpec *o = nullptr;
    if (arg.name.empty()) {
      if (i < spec.options.size()) o = &spec.options[i];
      else {
        d_.error(arg.value.range,
                 fmt::format("too many positional options for {}: expected at most {}, found {}; "
                             "the signature is {}",
                             ir::opKindName(op.kind), spec.options.size(), i + 1, layerSignature(op.kind)));
        ok = false;
        continue;
      }
    } else {
      for (const auto &so : spec.options)
        if (so.name == arg.name) o = &so;
      if (!o) {
        std::vector<std::string> names;
        for (const auto &so : spec.options) names.push_back(so.name);
        std::string hint = closestMatch(arg.name, names);
        d_.error(arg.nameRange, fmt::format("unknown option '{}' for {}{}; the signature is {}", arg.name,
                                            ir::opKindName(op.kind),
                                            hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint),
                                            layerSignature(op.kind)));
        ok = false;
        unknownArg = true;
        continue;
      }
    }
    if (!given.insert(o->name).second) {
      d_.error(arg.value.range, fmt::format("option '{}' given twice", o->name));
      ok = false;
      continue;
    }
    op.argLocs[o->name] = arg.value.range;
    const ast::ArgValue &v = arg.value;
    auto wrongKind = [&](const std::string &found) {
      d_.error(v.range, fmt::format("option '{}' of {} expects {}, found {}", o->name,
                                    ir::opKindName(op.kind), optionKindName(o->kind), found));
      ok = false;
    };
    auto describe = [&]() -> std::string {
      if (v.kind == ast::ArgValue::Kind::Pair) return "a pair";
      if (v.kind == ast::ArgValue::Kind::DType) return fmt::format("the dtype {}", dtypeName(v.dtype));
      if (v.first->kind == ast::Expr::Kind::Float) return fmt::format("the number {}", v.first->floatValue);
      if (v.first->kind == ast::Expr::Kind::Name) return fmt::format("'{}'", v.first->name);
      return "an integer";
    };
    auto checkMin = [&](int64_t val, SourceRange r) {
      if (val >= o->min) return true;
      d_.error(r, fmt::format("option '{}' of {} must be at least {}, found {}", o->name,
                              ir::opKindName(op.kind), o->min, val));
      ok = false;
      return false;
    };
    switch (o->kind) {
    case OptionSpec::Kind::Int: {
      if (v.kind != ast::ArgValue::Kind::Expr || v.first->kind == ast::Expr::Kind::Float) {
        wrongKind(describe());
        break;
      }
      auto n = eval.evalInt(*v.first);
      if (!n) { ok = false; break; }
      if (!checkMin(*n, v.range)) break;
      if (o->name == "out") a.out = *n;
      else if (o->name == "in") a.in = *n;
      else if (o->name == "groups") a.groups = *n;
      else if (o->name == "multiplier") a.multiplier = *n;
      else if (o->name == "size") a.size = *n;
      else if (o->name == "vocab") a.vocab = *n;
      else if (o->name == "dim") a.dim = *n;
      else if (o->name == "max_len") a.maxLen = *n;
      else if (o->name == "heads") a.heads = *n;
      else if (o->name == "kv_heads") { a.kvHeads = *n; kvGiven = true; }
      else if (o->name == "hidden") a.hidden = *n;
      break;
    }
    case OptionSpec::Kind::Pair: {
      std::optional<int64_t> h, w;
      if (v.kind == ast::ArgValue::Kind::Pair) {
        h = eval.evalInt(*v.first);
        w = eval.evalInt(*v.second);
      } else if (v.kind == ast::ArgValue::Kind::Expr && v.first->kind != ast::Expr::Kind::Float) {
        h = w = eval.evalInt(*v.first);
      } else {
        wrongKind(describe());
        break;
      }
      if (!h || !w) { ok = false; break; }
      if (!checkMin(*h, v.range) || !checkMin(*w, v.range)) break;
      if (o->name == "kernel") a.kh = *h, a.kw = *w;
      else if (o->name == "stride") a.sh = *h, a.sw = *w, strideGiven = true;
      else if (o->name == "pad") a.ph = *h, a.pw = *w;
      break;
    }
    case OptionSpec::Kind::Float: {
      if (v.kind != ast::ArgValue::Kind::Expr) { wrongKind(describe()); break; }
      auto x = eval.evalNumber(*v.first);
      if (!x) { ok = false; break; }
      if (o->name == "eps") a.eps = *x;
      else if (o->name == "p") {
        if (*x < 0 || *x >= 1) {
          d_.error(v.range, fmt::format("dropout probability must be in [0, 1), found {}", *x));
          ok = false;
        }
        a.p = *x;
      } else if (o->name == "alpha") a.alpha = *x;
      else if (o->name == "beta") a.beta = *x;
      else if (o->name == "k") a.k = *x;
      else if (o->name == "rope_theta") a.ropeTheta = *x;
      break;
    }
    case OptionSpec::Kind::Bool: {
      if (v.kind != ast::ArgValue::Kind::Expr || v.first->kind != ast::Expr::Kind::Name ||
          (v.first->name != "true" && v.first->name != "false")) {
        wrongKind(describe());
        break;
      }
      bool b = v.first->name == "true";
      if (o->name == "bias") a.bias = b;
      else if (o->name == "causal") a.causal = b;
      else if (o->name == "rope") a.rope = b;
      break;
    }
    case OptionSpec::Kind::DType:
      if (v.kind != ast::ArgValue::Kind::DType || v.dtype == DType::I32) {
        wrongKind(describe());
        break;
      }
      op.weightDType = v.dtype;
      break;
    case OptionSpec::Kind::Activation: {
      std::optional<OpKind> act;
      if (v.kind == ast::ArgValue::Kind::Expr && v.first->kind == ast::Expr::Kind::Name)
        act = ir::opKindFromName(v.first->name);
      if (!act || !(ir::isElementwiseActivation(*act) || *act == OpKind::Identity)) {
        wrongKind(describe());
        break;
      }
      a.act = *act;
      break;
    }
    case OptionSpec::Kind::LayerName:
      if (v.kind != ast::ArgValue::Kind::Expr || v.first->kind != ast::Expr::Kind::Name) {
        wrongKind(describe());
        break;
      }
      a.tie = v.first->name;
      break;
    }
  }
  for (const auto &o : spec.options)
    if (o.required && !given.count(o.name) && !unknownArg) {
      d_.error(s.calleeRange, fmt::format("{} needs option '{}', found none; the signature is {}",
                                          ir::opKindName(op.kind), o.name, layerSignature(op.kind)));
      ok = false;
    }
  if ((op.kind == OpKind::MaxPool || op.kind == OpKind::AvgPool) && !strideGiven)
    a.sh = a.kh, a.sw = a.kw;
  if (op.kind == OpKind::Attention && !kvGiven) a.kvHeads = a.heads;
  return ok;
}

} // namespace nnc
