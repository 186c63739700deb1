// Expansion: AST → IR graph for one model. Evaluates constants, model parameters
// (with --set / --batch overrides), block calls, `repeat` and `residual`, and names
// every layer as LANGUAGE.md §3 "Weight names" says (nn.Sequential indices, `NAME.i.`
// for repeats, `NAME.` for named block uses). It checks what the syntax alone cannot:
// names resolve, options fit the layer's signature, arithmetic is exact and fits in
// 64 bits, one input comes first, blocks do not recurse. Shapes are checked later, by
// ShapeInferencePass. All independent errors are reported, not just the first.
#pragma once
#include <map>
#include <optional>
#include <string>

#include "compiler/frontend/Ast.h"
#include "compiler/ir/Ir.h"
#include "compiler/support/Diagnostics.h"

namespace nnc {

struct ExpandOptions {
  std::string modelName;                    // empty: the file's only model
  std::map<std::string, int64_t> overrides; // --set NAME=V (batch included)
  std::optional<DType> defaultWeightDType;  // --dtype
  bool dtypeOverridesLayers = false;        // defaultWeightDType wins over dtype= (--compare-dtypes)
  // A decoder's programs: the input's one axis (after the batch) is this long, whatever
  // its declaration evaluates to, and every parameter keeps its value (a table sized by
  // seq keeps the context's size).
  std::optional<int64_t> inputLength;
};

// Upper bound on the ops one model may expand to; beyond it the program is rejected
// (a `repeat 10**12` must not hang the compiler).
inline constexpr int64_t kMaxOps = 1'000'000;
// Bodies (the model's, blocks', repeats', residuals') expanded one inside another.
inline constexpr int kMaxBodyDepth = 200;

std::optional<ir::Graph> expandModel(const ast::Program &prog, const ExpandOptions &opts,
                                     DiagnosticEngine &diags);

} // namespace nnc
