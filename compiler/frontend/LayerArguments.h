// Layer arguments: checks each argument of a layer statement against the layer's
// signature (the op table, compiler/ops/OpTable.h) — unknown, missing, duplicated or ill-typed options and
// values below an option's minimum are errors at the argument — and stores the values,
// with each kind's defaults, in the op's attributes and dtype.
#pragma once
#include <optional>
#include <string>

#include "compiler/frontend/Ast.h"
#include "compiler/ir/Ir.h"
#include "compiler/support/Diagnostics.h"

namespace nnc {

// Evaluates argument expressions in the caller's scope (the Expander), reporting its
// own errors (unknown names, overflow, inexact division) and returning nullopt then.
class ExprEvaluator {
public:
  virtual ~ExprEvaluator() = default;
  virtual std::optional<int64_t> evalInt(const ast::Expr &e) = 0;
  virtual std::optional<double> evalNumber(const ast::Expr &e) = 0; // integers allowed
};

// Returns false after reporting every problem with the arguments.
// A real literal as the user would recognise it in a message: "3.0" for `3.` or `3e0`
// (fmt's "{}" prints "3", which reads as an integer), "2.5" as written.
std::string realLiteralText(double v);

bool bindLayerArguments(const ast::Stmt &s, ir::Op &op, ExprEvaluator &eval, DiagnosticEngine &diags);

} // namespace nnc
