// The abstract syntax tree of a .nn file, with a source range on every node. It is
// what the program says, before any name is resolved or expression evaluated; the
// Expander turns it into IR for one model with concrete parameter values.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/support/DType.h"
#include "compiler/support/Diagnostics.h"

namespace nnc::ast {

struct Expr {
  enum class Kind { Int, Float, Name, Binary, Negate };
  Kind kind = Kind::Int;
  SourceRange range;
  int64_t intValue = 0;
  bool intTooLarge = false; // literal does not fit in 64 bits
  double floatValue = 0;
  std::string name;         // Name
  char op = 0;              // Binary: + - * /
  std::unique_ptr<Expr> lhs, rhs;
};

struct ArgValue {
  enum class Kind { Expr, Pair, DType };
  Kind kind = Kind::Expr;
  SourceRange range;
  std::unique_ptr<Expr> first, second; // Expr uses first; Pair both
  DType dtype = DType::F32;
};

struct Arg {
  std::string name; // empty when positional
  SourceRange nameRange;
  ArgValue value;
};

struct Stmt;
using Body = std::vector<Stmt>;

struct Stmt {
  enum class Kind { Let, Input, Layer, Repeat, Residual };
  Kind kind = Kind::Layer;
  SourceRange range;       // the statement's first token
  std::string name;        // Let/Input: the name; Layer: `name =`; Repeat: `as NAME` (empty if not written)
  SourceRange nameRange;
  std::unique_ptr<Expr> value;            // Let: value; Repeat: count
  std::optional<DType> dtype;             // Input
  std::vector<std::unique_ptr<Expr>> dims;// Input
  std::string callee;                     // Layer: layer kind or block name
  SourceRange calleeRange;
  std::vector<Arg> args;                  // Layer
  Body body;                              // Repeat, Residual
  std::optional<Body> shortcut;           // Residual
};

struct Param {
  std::string name;
  SourceRange range;
  std::unique_ptr<Expr> defaultValue; // null: required
};

// `block NAME(...) { ... }` and `model NAME(...) { ... }` share this shape.
struct Callable {
  std::string name;
  SourceRange range;
  std::vector<Param> params;
  Body body;
};

struct Program {
  std::vector<Stmt> lets; // file-level constants, in order
  std::vector<Callable> blocks;
  std::vector<Callable> models;
};

} // namespace nnc::ast
