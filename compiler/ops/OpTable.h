// The op table: one row per op kind of the IR, saying what the compiler needs to know
// about it beyond its shape rule — whether it is a view at inference, its cost rule
// (params, MACs and other operations, with the --explain formula from the same
// numbers) and its lowering rule (IR op → steps of the kernel program).
// Adding an op kind means a row here, its rule functions and its kernels.
// A test checks every OpKind has a row, in order.
#pragma once
#include <cstdint>
#include <string>

#include "compiler/ir/Ir.h"

namespace nnc::lower {
class LoweringContext;
}

namespace nnc::ops {

// What one op costs (per example), and how: the formulas --explain prints.
struct OpWork {
  int64_t macsPerExample = 0;
  int64_t attentionMacsPerExample = 0;
  int64_t otherOpsPerExample = 0;
  std::string macFormula;   // "64 × 784 × 256", "" when no MACs
  std::string paramFormula; // "784 × 256 + 256", "" for the generic sum of tensor shapes
};

using CostRule = OpWork (*)(const ir::Graph &g, const ir::Op &op); // throws CountOverflow
using LoweringRule = void (*)(lower::LoweringContext &cx, const ir::Op &op);

struct OpInfo {
  ir::OpKind kind;
  bool isView;          // at inference the output is the input's storage (no step)
  CostRule cost;
  LoweringRule lower;   // null for views and the Input
};

const OpInfo &opInfo(ir::OpKind kind);
size_t opTableSize();

} // namespace nnc::ops
