// Binds a layer statement's arguments to the layer's options (the op table,
// compiler/ops/OpTable.h) and stores them where the table says, with its defaults.
#include "compiler/frontend/LayerArguments.h"

#include <fmt/format.h>

#include <cmath>

#include <set>

#include "compiler/ops/OpTable.h"

namespace nnc {
using ir::OpKind;
using ops::layerSignature;
using ops::optionKindName;
using ops::OptionSpec;

namespace {
// The defaults of every option not written (after the written ones are bound).
void applyDefaults(const std::vector<OptionSpec> &options, const std::set<std::string> &given, ir::LayerAttrs &a) {
  for (const OptionSpec &o : options) {
    if (given.count(o.name) || !o.hasDefault) continue;
    switch (o.kind) {
    case OptionSpec::Kind::Int: a.*o.intField = int64_t(o.def); break;
    case OptionSpec::Kind::Pair: a.*o.intField = a.*o.intField2 = int64_t(o.def); break;
    case OptionSpec::Kind::Bool: a.*o.boolField = o.def != 0; break;
    case OptionSpec::Kind::Float: a.*o.floatField = o.def; break;
    case OptionSpec::Kind::Activation: a.*o.actField = o.defAct; break;
    case OptionSpec::Kind::DType: case OptionSpec::Kind::LayerName: break;
    }
  }
  for (const OptionSpec &o : options) {
    if (given.count(o.name) || !o.defaultFrom) continue;
    for (const OptionSpec &from : options)
      if (std::string(from.name) == o.defaultFrom) {
        a.*o.intField = a.*from.intField;
        if (o.intField2) a.*o.intField2 = from.intField2 ? a.*from.intField2 : a.*from.intField;
      }
  }
}
} // namespace

std::string realLiteralText(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::abs(v) < 1e15) return fmt::format("{:.1f}", v);
  return fmt::format("{}", v);
}

bool bindLayerArguments(const ast::Stmt &s, ir::Op &op, ExprEvaluator &eval, DiagnosticEngine &d_) {
  const auto &options = ops::opInfo(op.kind).options;
  ir::LayerAttrs &a = op.attrs;
  bool ok = true, unknownArg = false;
  std::set<std::string> given;
  for (size_t i = 0; i < s.args.size(); ++i) {
    const ast::Arg &arg = s.args[i];
    const OptionSpec *o = nullptr;
    if (arg.name.empty()) {
      if (i < options.size()) o = &options[i];
      else {
        d_.error(arg.value.range,
                 fmt::format("too many positional options for {}: expected at most {}, found {}; "
                             "the signature is {}",
                             ir::opKindName(op.kind), options.size(), i + 1, layerSignature(op.kind)));
        ok = false;
        continue;
      }
    } else {
      for (const auto &so : options)
        if (so.name == arg.name) o = &so;
      if (!o) {
        std::vector<std::string> names;
        for (const auto &so : options) names.push_back(so.name);
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
      if (v.first->kind == ast::Expr::Kind::Float) return "the number " + realLiteralText(v.first->floatValue);
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
      a.*o->intField = *n;
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
      a.*o->intField = *h;
      a.*o->intField2 = *w;
      break;
    }
    case OptionSpec::Kind::Float: {
      if (v.kind != ast::ArgValue::Kind::Expr) { wrongKind(describe()); break; }
      auto x = eval.evalNumber(*v.first);
      if (!x) { ok = false; break; }
      if (!std::isfinite(*x)) { // 1e400 reads as inf; no option means anything there
        d_.error(v.range, fmt::format("{} {} must be a finite number, found {}", ir::opKindName(op.kind), o->name, *x));
        ok = false;
      } else if (o->below && (*x < 0 || *x >= o->below)) {
        d_.error(v.range, fmt::format("{} {} must be in [0, {}), found {}", ir::opKindName(op.kind), o->meaning,
                                      o->below, *x));
        ok = false;
      } else if (o->nonNegative && *x < 0) {
        d_.error(v.range, fmt::format("{} {} must be >= 0, found {}", ir::opKindName(op.kind), o->meaning, *x));
        ok = false;
      }
      a.*o->floatField = *x;
      break;
    }
    case OptionSpec::Kind::Bool: {
      if (v.kind != ast::ArgValue::Kind::Expr || v.first->kind != ast::Expr::Kind::Name ||
          (v.first->name != "true" && v.first->name != "false")) {
        wrongKind(describe());
        break;
      }
      bool b = v.first->name == "true";
      a.*o->boolField = b;
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
      a.*o->actField = *act;
      break;
    }
    case OptionSpec::Kind::LayerName:
      if (v.kind != ast::ArgValue::Kind::Expr || v.first->kind != ast::Expr::Kind::Name) {
        wrongKind(describe());
        break;
      }
      a.*o->nameField = v.first->name;
      break;
    }
  }
  for (const auto &o : options)
    if (o.required && !given.count(o.name) && !unknownArg) {
      d_.error(s.calleeRange, fmt::format("{} needs option '{}', found none; the signature is {}",
                                          ir::opKindName(op.kind), o.name, layerSignature(op.kind)));
      ok = false;
    }
  applyDefaults(options, given, a);
  return ok;
}

} // namespace nnc
