#include "compiler/frontend/Expander.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <functional>
#include <fmt/ranges.h>
#include <set>

#include "compiler/frontend/LayerArguments.h"
#include "compiler/support/CheckedMath.h"

namespace nnc {
using ir::OpKind;

namespace {
// "; did you mean 'dense'?" for an unknown layer name: a layer's name in PyTorch or
// Keras (linear, swish, multihead_attention), the start of one name (conv, embed), or a
// near miss of a layer or block name (closestMatch); the known kinds otherwise.
std::string unknownLayerHint(const std::string &name, const std::vector<std::string> &known) {
  static const std::map<std::string, std::string> kOtherNames = {
      {"linear", "dense"},          {"fc", "dense"},
      {"convolution", "conv2d"},
      {"attn", "attention"},        {"selfattn", "attention"},
      {"mha", "attention"},         {"multiheadattention", "attention"},
      {"positionalembedding", "pos_embedding"},
      {"swish", "silu"},            {"gelunew", "gelu_tanh"},
      {"maxpool2d", "maxpool"},     {"avgpool2d", "avgpool"},
      {"adaptiveavgpool2d", "global_avgpool"},
      {"globalaveragepooling2d", "global_avgpool"},
      {"batchnorm2d", "batchnorm"}, {"batchnormalization", "batchnorm"},
      {"layernormalization", "layernorm"},
      {"ffn", "mlp"},               {"feedforward", "mlp"},
      {"swiglu", "gated_mlp"},      {"localresponsenorm", "lrn"},
  };
  std::string key; // lower case without '_': nn.MultiheadAttention, multihead_attention
  for (char c : name)
    if (c != '_') key += char(std::tolower(static_cast<unsigned char>(c)));
  if (auto it = kOtherNames.find(key); it != kOtherNames.end())
    return fmt::format("; did you mean '{}'?", it->second);
  std::string hint = closestMatch(name, known);
  if (hint.empty() && name.size() >= 3) { // the start of exactly one name
    for (const auto &k : known)
      if (k.size() > name.size() && k.compare(0, name.size(), name) == 0) {
        if (!hint.empty()) return "; expected a layer kind or a block name";
        hint = k;
      }
  }
  return hint.empty() ? "; expected a layer kind or a block name" : fmt::format("; did you mean '{}'?", hint);
}

// The weight-name prefix of `repeat N { }` without `as NAME` (LANGUAGE.md §3).
constexpr const char *kDefaultRepeatName = "layers";

// A name bound to an integer in some scope, with where it was bound.
struct Binding {
  int64_t value;
  SourceRange where;
  bool failed = false; // its value had an error (reported): uses of it stay quiet
};
using Scope = std::map<std::string, Binding>;

class Expander : private ExprEvaluator {
public:
  Expander(const ast::Program &prog, const ExpandOptions &opts, DiagnosticEngine &diags)
      : prog_(prog), opts_(opts), d_(diags) {}

  std::optional<ir::Graph> run();

private:
  // ---- expressions --------------------------------------------------------
  std::optional<int64_t> evalInt(const ast::Expr &e) override;
  std::optional<double> evalNumber(const ast::Expr &e) override;
  const Binding *lookup(const std::string &name) const;
  std::vector<std::string> visibleNames() const;

  // ---- statements ---------------------------------------------------------
  void body(const ast::Body &b, const std::string &prefix, int64_t &counter);
  void letStmt(const ast::Stmt &s);
  void inputStmt(const ast::Stmt &s);
  void layerStmt(const ast::Stmt &s, const std::string &prefix, int64_t &counter);
  void blockCall(const ast::Stmt &s, const ast::Callable &block, const std::string &prefix,
                 int64_t &counter);
  void repeatStmt(const ast::Stmt &s, const std::string &prefix);
  void residualStmt(const ast::Stmt &s, const std::string &prefix, int64_t &counter);
  // A path of the weight names: a layer's, or a group's (a named block use, a repeat).
  // Two layers, a layer and a group, or two groups may not share one (two unnamed
  // repeats share `layers`: the second appends to it).
  enum class PathKind { Layer, Group, RepeatList };
  struct UsedPath {
    SourceRange where;
    PathKind kind;
  };
  bool claimName(const std::string &path, SourceRange where, PathKind kind = PathKind::Layer);
  std::vector<std::string> modelParams_; // the model's declared parameters (inputStmt)
  ir::ValueId addOp(ir::Op op);
  bool requireInput(SourceRange where);
  std::vector<std::string> modelNameList() const;

  const ast::Program &prog_;
  const ExpandOptions &opts_;
  DiagnosticEngine &d_;
  ir::Graph g_;
  std::vector<Scope> scopes_;
  std::vector<std::string> blockStack_;
  std::map<std::string, UsedPath> usedPaths_;
  // For each naming scope being expanded (the model, each repeat iteration, each named
  // block use; unnamed block uses and residual bodies share their enclosing one): per
  // repeat NAME, the index its next iteration gets. The unnamed repeats of one scope
  // all append to the same `layers` list. A scope's entries go when it ends.
  std::vector<std::map<std::string, int64_t>> repeatNext_{1};
  ir::ValueId current_ = -1;
  SourceRange inputLoc_;
  bool tooBig_ = false; // expansion stopped (too many layers, or nested too deep): reported once
  int bodyDepth_ = 0;    // bodies being expanded, one inside another
};

// ---------------------------------------------------------------------------
// Expressions
// ---------------------------------------------------------------------------
const Binding *Expander::lookup(const std::string &name) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    auto f = it->find(name);
    if (f != it->end()) return &f->second;
  }
  return nullptr;
}

std::vector<std::string> Expander::visibleNames() const {
  std::vector<std::string> out;
  for (const auto &s : scopes_)
    for (const auto &[k, v] : s) out.push_back(k);
  return out;
}

std::optional<int64_t> Expander::evalInt(const ast::Expr &e) {
  using K = ast::Expr::Kind;
  switch (e.kind) {
  case K::Int:
    if (e.intTooLarge) {
      d_.error(e.range, fmt::format("integer literal too large: expected at most {} (2^63 - 1)",
                                    withCommas(INT64_MAX)));
      return std::nullopt;
    }
    return e.intValue;
  case K::Float:
    d_.error(e.range, "expected an integer, found the number " + realLiteralText(e.floatValue));
    return std::nullopt;
  case K::Name: {
    if (const Binding *b = lookup(e.name)) {
      if (b->failed) return std::nullopt; // its own error was reported where it is defined
      return b->value;
    }
    std::string hint = closestMatch(e.name, visibleNames());
    d_.error(e.range, fmt::format("unknown name '{}'{}", e.name,
                                  hint.empty() ? "" : fmt::format("; did you mean '{}'?", hint)));
    return std::nullopt;
  }
  case K::Negate: {
    auto v = evalInt(*e.lhs);
    if (!v) return std::nullopt;
    if (*v == INT64_MIN) {
      d_.error(e.range, "integer overflow: the negation does not fit in 64 bits");
      return std::nullopt;
    }
    return -*v;
  }
  case K::Binary: {
    auto l = evalInt(*e.lhs), r = evalInt(*e.rhs);
    if (!l || !r) return std::nullopt;
    int64_t out = 0;
    bool overflow = false;
    switch (e.op) {
    case '+': overflow = __builtin_add_overflow(*l, *r, &out); break;
    case '-': overflow = __builtin_sub_overflow(*l, *r, &out); break;
    case '*': overflow = __builtin_mul_overflow(*l, *r, &out); break;
    case '/':
      if (*r == 0) {
        d_.error(e.range, fmt::format("division by zero: {} / 0", *l));
        return std::nullopt;
      }
      if (*l == INT64_MIN && *r == -1) { // the quotient is 2^63, and x86's idiv traps on it
        d_.error(e.range, fmt::format("integer overflow: {} / -1 does not fit in 64 bits", *l));
        return std::nullopt;
      }
      if (*l % *r != 0) {
        d_.error(e.range, fmt::format("'/' must divide exactly: {} / {} leaves a remainder of {}",
                                      *l, *r, *l % *r));
        return std::nullopt;
      }
      out = *l / *r;
      break;
    }
    if (overflow) {
      d_.error(e.range, fmt::format("integer overflow: {} {} {} does not fit in 64 bits", *l, e.op, *r));
      return std::nullopt;
    }
    return out;
  }
  }
  return std::nullopt;
}

namespace {
bool holdsReal(const ast::Expr &e) {
  return e.kind == ast::Expr::Kind::Float || (e.lhs && holdsReal(*e.lhs)) || (e.rhs && holdsReal(*e.rhs));
}
} // namespace

std::optional<double> Expander::evalNumber(const ast::Expr &e) {
  if (e.kind == ast::Expr::Kind::Float) return e.floatValue;
  if (e.kind == ast::Expr::Kind::Negate && e.lhs->kind == ast::Expr::Kind::Float)
    return -e.lhs->floatValue;
  if (holdsReal(e)) { // one mistake, one error (not one a literal)
    d_.error(e.range, "expected a number, found arithmetic on real numbers: expressions compute with integers "
                      "only, so write the value as one number (such as 0.3)");
    return std::nullopt;
  }
  auto v = evalInt(e);
  if (!v) return std::nullopt;
  return double(*v);
}

// ---------------------------------------------------------------------------
// Statements
// ---------------------------------------------------------------------------
ir::ValueId Expander::addOp(ir::Op op) {
  if (int64_t(g_.ops.size()) >= kMaxOps) {
    if (!tooBig_)
      d_.error(op.loc, fmt::format("model too large: it expands to more than {} layers", withCommas(kMaxOps)));
    tooBig_ = true;
    return current_;
  }
  g_.ops.push_back(std::move(op));
  return ir::ValueId(g_.ops.size() - 1);
}

bool Expander::claimName(const std::string &path, SourceRange where, PathKind kind) {
  auto clash = [&](const std::string &by, SourceRange first) {
    if (by == "a layer" && kind == PathKind::Layer)
      d_.error(where, fmt::format("layer name '{}' is already used: weight names must be unique", path));
    else // a layer and a group of layers, or two groups, under one name: no module tree has that
      d_.error(where, fmt::format("name '{}' is already used by {}: weight names must be unique", path, by));
    d_.note(first, "first used here");
    return false;
  };
  if (auto it = usedPaths_.find(path); it != usedPaths_.end())
    return kind == PathKind::RepeatList && it->second.kind == PathKind::RepeatList
               ? true
               : clash(it->second.kind == PathKind::Layer ? "a layer" : "a group of layers", it->second.where);
  // Paths under `path.`: the layers of an unnamed repeat's `layers` list (not recorded
  // as a group: a deep nest of repeats would record as many groups as layers).
  if (kind != PathKind::RepeatList)
    if (auto it = usedPaths_.lower_bound(path + "."); it != usedPaths_.end() &&
                                                       it->first.compare(0, path.size() + 1, path + ".") == 0)
      return clash("a group of layers", it->second.where);
  if (kind != PathKind::RepeatList) usedPaths_.emplace(path, UsedPath{where, kind});
  return true;
}

bool Expander::requireInput(SourceRange where) {
  if (current_ >= 0) return true;
  if (current_ == -2) return false; // already reported
  d_.error(where, "expected 'input NAME: [dims]' before the first layer, found a layer");
  current_ = -2; // report once
  return false;
}

void Expander::body(const ast::Body &b, const std::string &prefix, int64_t &counter) {
  // Block uses nest without brackets (b2 uses b1 uses b0 ...), so the parser's bracket
  // limit does not bound this recursion: without a limit of its own a generated file
  // overflowed the stack.
  if (b.empty()) return; // nothing to expand, nothing nests further
  if (bodyDepth_ >= kMaxBodyDepth) {
    if (!tooBig_)
      d_.error(b.front().range, fmt::format("nesting too deep: blocks, repeats and residuals expand here more "
                                            "than {} levels deep{}; expected at most {}",
                                            kMaxBodyDepth,
                                            blockStack_.empty() ? "" : fmt::format(" (inside block '{}')",
                                                                                   blockStack_.back()),
                                            kMaxBodyDepth));
    tooBig_ = true;
    return;
  }
  ++bodyDepth_;
  struct Leave { int &depth; ~Leave() { --depth; } } leave{bodyDepth_};
  scopes_.emplace_back();
  for (const auto &s : b) {
    if (tooBig_) break;
    switch (s.kind) {
    case ast::Stmt::Kind::Let: letStmt(s); break;
    case ast::Stmt::Kind::Input: inputStmt(s); break;
    case ast::Stmt::Kind::Layer: layerStmt(s, prefix, counter); break;
    case ast::Stmt::Kind::Repeat: repeatStmt(s, prefix); break;
    case ast::Stmt::Kind::Residual: residualStmt(s, prefix, counter); break;
    }
  }
  scopes_.pop_back();
}

/// let NAME = EXPR
void Expander::letStmt(const ast::Stmt &s) {
  auto v = evalInt(*s.value);
  if (auto it = scopes_.back().find(s.name); it != scopes_.back().end()) {
    d_.error(s.nameRange, fmt::format("'{}' is already defined in this scope", s.name));
    d_.note(it->second.where, "previous definition here");
    return;
  }
  // Nor may it hide a parameter of the model or block it is in (scopes_[1]; [0] holds
  // the file's constants, which parameters and lets may hide): `--set a=7` would be
  // silently overruled by `let a = 2`.
  if (scopes_.size() > 2)
    if (auto it = scopes_[1].find(s.name); it != scopes_[1].end()) {
      if (!it->second.where.begin.valid()) { // the model's implicit batch (language-notes.md)
        d_.error(s.nameRange, "'batch' is the model's batch (--batch, --set batch=N); a let cannot redefine it");
        return;
      }
      d_.error(s.nameRange, fmt::format("'{}' is a parameter here; a let cannot redefine it", s.name));
      d_.note(it->second.where, "parameter declared here");
      return;
    }
  scopes_.back()[s.name] = Binding{v.value_or(0), s.nameRange, !v};
}

/// input NAME: DTYPE? [EXPR, ...]
void Expander::inputStmt(const ast::Stmt &s) {
  if (current_ == -2) current_ = -1; // a layer came first; still read the input
  if (!g_.ops.empty()) {
    d_.error(s.range, "a model has a single input, and it must come before every layer; found another 'input'");
    if (inputLoc_.begin.valid()) d_.note(inputLoc_, "the input is declared here");
    return;
  }
  ir::Op op;
  op.kind = OpKind::Input;
  op.name = s.name;
  op.loc = s.range;
  op.isLayer = false;
  op.type.dtype = s.dtype.value_or(DType::F32);
  if (op.type.dtype != DType::F32 && op.type.dtype != DType::I32)
    d_.error(s.range, fmt::format("input dtype must be f32 (data) or i32 (token ids), found {}",
                                  dtypeName(op.type.dtype)));
  op.type.shape.push_back(g_.batch);
  for (const auto &dim : s.dims) {
    auto v = evalInt(*dim);
    if (v && *v < 1)
      d_.error(dim->range, fmt::format("input dimension must be at least 1, found {}", *v));
    op.type.shape.push_back(v.value_or(1));
  }
  if (s.dims.size() == 1) { // a decoder's context: which parameters set it
    std::function<void(const ast::Expr &)> collect = [&](const ast::Expr &e) {
      if (e.kind == ast::Expr::Kind::Name &&
          std::find(modelParams_.begin(), modelParams_.end(), e.name) != modelParams_.end() &&
          std::find(g_.inputLengthParameters.begin(), g_.inputLengthParameters.end(), e.name) ==
              g_.inputLengthParameters.end())
        g_.inputLengthParameters.push_back(e.name);
      if (e.lhs) collect(*e.lhs);
      if (e.rhs) collect(*e.rhs);
    };
    collect(*s.dims[0]);
    g_.inputLengthIsParameter = s.dims[0]->kind == ast::Expr::Kind::Name && !g_.inputLengthParameters.empty();
  }
  if (opts_.inputLength && op.type.shape.size() == 2) op.type.shape[1] = *opts_.inputLength;
  inputLoc_ = s.range;
  current_ = addOp(std::move(op));
}

/// repeat N (as NAME)? { BODY }
void Expander::repeatStmt(const ast::Stmt &s, const std::string &prefix) {
  auto n = evalInt(*s.value);
  if (!n) return;
  if (*n < 0) {
    d_.error(s.value->range, fmt::format("repeat count must be at least 0, found {}", *n));
    return;
  }
  if (*n > kMaxOps) {
    d_.error(s.value->range, fmt::format("repeat count too large: expected at most {}, found {}",
                                         withCommas(kMaxOps), withCommas(*n)));
    return;
  }
  // `repeat N { }` is `repeat N as layers { }` (LANGUAGE.md §3), with one addition:
  // the unnamed repeats of one naming scope (several in one body, or brought into it
  // by unnamed block uses) append to one list, like stages that each `.append` their
  // blocks to one nn.ModuleList: the second one's iterations continue after the first
  // one's instead of reusing `layers.0`. A written `as NAME` always numbers from 0
  // (the same NAME written twice in one scope is the user's collision, reported as such).
  const bool unnamed = s.name.empty();
  const std::string name = unnamed ? std::string(kDefaultRepeatName) : s.name;
  if (*n > 0 && !claimName(prefix + name, s.range,
                           name == kDefaultRepeatName ? PathKind::RepeatList : PathKind::Group))
    return;
  int64_t first = 0;
  if (*n > 0 && name == kDefaultRepeatName) { // other names: no later repeat reads them
    int64_t &next = repeatNext_.back()[name];
    if (unnamed) first = next;
    next = std::max(next, first + *n);
  }
  for (int64_t i = 0; i < *n && !tooBig_; ++i) {
    int64_t counter = 0;
    size_t errorsBefore = d_.errorCount();
    repeatNext_.emplace_back();
    body(s.body, fmt::format("{}{}.{}.", prefix, name, first + i), counter);
    repeatNext_.pop_back();
    if (d_.errorCount() != errorsBefore) break; // the same errors would repeat N times
  }
}

/// residual { BODY } (shortcut { BODY })?
void Expander::residualStmt(const ast::Stmt &s, const std::string &prefix, int64_t &counter) {
  if (!requireInput(s.range)) return;
  if (s.body.empty()) {
    d_.error(s.range, "residual body is empty: expected at least one layer");
    return;
  }
  ir::ValueId x = current_;
  size_t before = g_.ops.size(), errorsBefore = d_.errorCount();
  body(s.body, prefix, counter);
  ir::ValueId main = current_;
  if (g_.ops.size() == before) {
    // A body whose layers were refused has been reported already (one mistake, one error).
    if (d_.errorCount() == errorsBefore) d_.error(s.range, "residual body has no layers: expected at least one layer");
    return;
  }
  ir::ValueId skip = x;
  if (s.shortcut) {
    current_ = x;
    body(*s.shortcut, prefix, counter);
    skip = current_;
  }
  ir::Op add;
  add.kind = OpKind::Add;
  add.name = prefix + "residual";
  add.loc = s.range;
  add.isLayer = false;
  add.inputs = {main, skip};
  current_ = addOp(std::move(add));
}

/// NAME = CALLEE(ARGS) | CALLEE(ARGS)
void Expander::layerStmt(const ast::Stmt &s, const std::string &prefix, int64_t &counter) {
  // A block use takes no index of its own: unnamed, its layers continue this body's
  // numbering; named, they number from 0 under NAME.
  for (const auto &blk : prog_.blocks)
    if (blk.name == s.callee) {
      blockCall(s, blk, prefix, counter);
      return;
    }
  auto kind = ir::opKindFromName(s.callee);
  if (!kind) {
    std::vector<std::string> known = ir::layerKindNames();
    for (const auto &blk : prog_.blocks) known.push_back(blk.name);
    d_.error(s.calleeRange, fmt::format("unknown layer '{}'{}", s.callee, unknownLayerHint(s.callee, known)));
    return;
  }
  int64_t position = counter++;
  if (!requireInput(s.range)) return;
  ir::Op op;
  op.kind = *kind;
  op.name = prefix + (s.name.empty() ? std::to_string(position) : s.name);
  op.loc = s.range;
  op.weightDType = opts_.defaultWeightDType.value_or(DType::F32);
  op.inputs = {current_};
  if (!bindLayerArguments(s, op, *this, d_)) return;
  if (opts_.dtypeOverridesLayers && opts_.defaultWeightDType) op.weightDType = *opts_.defaultWeightDType;
  if (!claimName(op.name, s.range)) return;
  current_ = addOp(std::move(op));
}

void Expander::blockCall(const ast::Stmt &s, const ast::Callable &block, const std::string &prefix,
                         int64_t &counter) {
  for (const auto &active : blockStack_)
    if (active == block.name) {
      std::string chain;
      for (const auto &b : blockStack_) chain += b + " → ";
      d_.error(s.calleeRange, fmt::format("block '{}' uses itself ({}{}): blocks cannot recurse",
                                          block.name, chain, block.name));
      return;
    }
  // Bind parameters: positional in declared order, then named.
  Scope params;
  std::set<std::string> given;
  bool ok = true, unknownArg = false;
  for (size_t i = 0; i < s.args.size(); ++i) {
    const ast::Arg &a = s.args[i];
    const ast::Param *p = nullptr;
    if (a.name.empty()) {
      if (i >= block.params.size()) {
        d_.error(a.value.range, fmt::format("block '{}' takes {} parameter(s), found an extra argument",
                                            block.name, block.params.size()));
        ok = false;
        continue;
      }
      p = &block.params[i];
    } else {
      for (const auto &bp : block.params)
        if (bp.name == a.name) p = &bp;
      if (!p) {
        std::vector<std::string> names;
        for (const auto &bp : block.params) names.push_back(bp.name);
        std::string hint = closestMatch(a.name, names);
        d_.error(a.nameRange, fmt::format("block '{}' has no parameter '{}'{}", block.name, a.name,
                                          hint.empty() ? "" : fmt::format("; did you mean '{}'?", hint)));
        ok = false;
        unknownArg = true;
        continue;
      }
    }
    if (!given.insert(p->name).second) {
      d_.error(a.value.range, fmt::format("parameter '{}' given twice", p->name));
      ok = false;
      continue;
    }
    if (a.value.kind != ast::ArgValue::Kind::Expr) {
      d_.error(a.value.range, fmt::format("parameter '{}' of block '{}' expects an integer, found {}", p->name,
                                          block.name,
                                          a.value.kind == ast::ArgValue::Kind::Pair
                                              ? std::string("a pair")
                                              : fmt::format("the dtype {}", dtypeName(a.value.dtype))));
      ok = false;
      continue;
    }
    auto v = evalInt(*a.value.first);
    if (!v) { ok = false; continue; }
    params[p->name] = Binding{*v, p->range}; // where it is declared, for notes
  }
  // Defaults are evaluated in the block's own scope (file constants + earlier params).
  std::vector<Scope> saved;
  saved.swap(scopes_);
  scopes_.push_back(saved.front()); // file-level constants
  scopes_.push_back(params);
  for (const auto &bp : block.params) {
    if (given.count(bp.name)) continue;
    if (!bp.defaultValue) {
      ok = false;
      if (unknownArg) continue; // most likely the misspelt argument: reported once above
      d_.error(s.calleeRange, fmt::format("block '{}' needs a value for parameter '{}', found none",
                                          block.name, bp.name));
      d_.note(bp.range, "parameter declared here");
      continue;
    }
    auto v = evalInt(*bp.defaultValue);
    if (!v) { ok = false; continue; }
    scopes_.back()[bp.name] = Binding{*v, bp.range};
  }
  if (ok && !s.name.empty()) ok = claimName(prefix + s.name, s.range, PathKind::Group);
  if (ok) {
    blockStack_.push_back(block.name);
    if (s.name.empty()) {
      body(block.body, prefix, counter);
    } else {
      int64_t inner = 0;
      repeatNext_.emplace_back();
      body(block.body, prefix + s.name + ".", inner);
      repeatNext_.pop_back();
    }
    blockStack_.pop_back();
  }
  scopes_.swap(saved);
}

std::vector<std::string> Expander::modelNameList() const {
  std::vector<std::string> out;
  for (const auto &m : prog_.models) out.push_back(m.name);
  return out;
}

std::optional<ir::Graph> Expander::run() {
  if (prog_.models.empty()) {
    d_.error({}, "no model in this file: expected at least one 'model NAME { ... }'");
    return std::nullopt;
  }
  // Duplicate declarations.
  std::map<std::string, SourceRange> declared;
  for (const auto *list : {&prog_.blocks, &prog_.models})
    for (const auto &c : *list)
      if (auto [it, fresh] = declared.emplace(c.name, c.range); !fresh) {
        d_.error(c.range, fmt::format("'{}' is declared twice", c.name));
        d_.note(it->second, "first declared here");
      }
  for (const auto *list : {&prog_.blocks, &prog_.models})
    for (const auto &c : *list) {
      std::map<std::string, SourceRange> params;
      for (const auto &p : c.params)
        if (auto [it, fresh] = params.emplace(p.name, p.range); !fresh) {
          d_.error(p.range, fmt::format("parameter '{}' of '{}' is declared twice", p.name, c.name));
          d_.note(it->second, "first declared here");
        }
    }
  if (d_.hasErrors()) return std::nullopt; // which one is meant is unclear: say nothing more
  const std::vector<std::string> kinds = ir::layerKindNames();
  for (const auto &b : prog_.blocks)
    if (std::find(kinds.begin(), kinds.end(), b.name) != kinds.end())
      d_.warning(b.range, fmt::format("block '{0}' has the name of a layer kind: a use of '{0}' in this file is the "
                                      "block, not the layer",
                                      b.name));
  const ast::Callable *model = nullptr;
  if (opts_.modelName.empty()) {
    if (prog_.models.size() > 1) {
      std::string names;
      for (const auto &m : prog_.models) names += (names.empty() ? "" : ", ") + m.name;
      d_.error({}, fmt::format("this file has {} models ({}); choose one with --model NAME (Options::model in the API)",
                               prog_.models.size(), names));
      return std::nullopt;
    }
    model = &prog_.models.front();
  } else {
    for (const auto &m : prog_.models)
      if (m.name == opts_.modelName) model = &m;
    if (!model) {
      std::string hint = closestMatch(opts_.modelName, modelNameList());
      std::string names;
      for (const std::string &n : modelNameList()) names += (names.empty() ? "" : ", ") + n;
      d_.error({}, fmt::format("no model named '{}' in this file (its models: {}){}", opts_.modelName, names,
                               hint.empty() ? "" : fmt::format("; did you mean '{}'?", hint)));
      return std::nullopt;
    }
  }
  g_.modelName = model->name;
  for (const auto &p : model->params) modelParams_.push_back(p.name);

  // File-level constants, then model parameters (defaults, overridden by --set).
  scopes_.emplace_back();
  for (const auto &s : prog_.lets) letStmt(s);
  Scope params;
  std::vector<std::string> paramNames{"batch"};
  for (const auto &p : model->params) paramNames.push_back(p.name);
  for (const auto &[name, value] : opts_.overrides)
    if (std::find(paramNames.begin(), paramNames.end(), name) == paramNames.end()) {
      std::string hint = closestMatch(name, paramNames);
      // No flag named: the value came from --set, --sweep or the API's Options::set.
      d_.error({}, fmt::format("model '{}' has no parameter '{}' to set{} (its parameters: {})",
                               model->name, name, hint.empty() ? "" : fmt::format("; did you mean '{}'?", hint),
                               fmt::join(paramNames, ", ")));
    }
  scopes_.push_back(params);
  // An undeclared `batch` is bound first, so that parameter defaults can read it
  // (`model m(rows = batch * 2)`); a declared one in its place among them.
  if (std::none_of(model->params.begin(), model->params.end(), [](const ast::Param &p) { return p.name == "batch"; })) {
    auto b = opts_.overrides.find("batch");
    scopes_.back()["batch"] = Binding{b != opts_.overrides.end() ? b->second : 1, {}};
  }
  for (const auto &p : model->params) {
    auto over = opts_.overrides.find(p.name);
    if (over != opts_.overrides.end()) {
      scopes_.back()[p.name] = Binding{over->second, p.range};
    } else if (!p.defaultValue) {
      d_.error(p.range, fmt::format("model parameter '{}' has no default; expected --set {}=VALUE", p.name, p.name));
      scopes_.back()[p.name] = Binding{1, p.range, true};
    } else {
      auto v = evalInt(*p.defaultValue);
      scopes_.back()[p.name] = Binding{v.value_or(1), p.range, !v};
    }
  }
  int64_t batch = 1;
  SourceRange batchAt; // a `batch` model parameter's default; none for --set/--batch
  if (auto b = opts_.overrides.find("batch"); b != opts_.overrides.end()) batch = b->second;
  else if (auto *bb = lookup("batch")) batch = bb->value, batchAt = bb->where;
  if (batch < 1) {
    d_.error(batchAt, fmt::format("batch must be at least 1, found {}", batch));
    batch = 1;
  }
  scopes_.back()["batch"] = Binding{batch, {}};
  g_.batch = batch;

  int64_t counter = 0;
  body(model->body, "", counter);
  if (g_.ops.empty() || g_.ops.front().kind != OpKind::Input) {
    if (!d_.hasErrors())
      d_.error(model->range, fmt::format("model '{}' has no input: expected 'input NAME: [dims]' "
                                         "as its first statement",
                                         model->name));
    return std::nullopt;
  }
  if (d_.hasErrors()) return std::nullopt;
  g_.output = current_;
  return std::move(g_);
}

} // namespace

std::optional<ir::Graph> expandModel(const ast::Program &prog, const ExpandOptions &opts,
                                     DiagnosticEngine &diags) {
  return Expander(prog, opts, diags).run();
}


} // namespace nnc
