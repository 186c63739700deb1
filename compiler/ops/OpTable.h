// The op table: one row per op kind of the IR, the one place that says what the
// compiler knows about it — its options (positional order, kind, default, lower bound
// and the LayerAttrs field each is stored in), its shape rule, its cost rule (params,
// MACs and other operations, with the --explain formulas from the same numbers),
// whether it is a view at inference, and its lowering rule (IR op → steps of the
// kernel program). The rules of each family of ops sit side by side in one file
// (DenseOps.cpp, ConvOps.cpp, PoolOps.cpp, ElementwiseOps.cpp, NormOps.cpp,
// SequenceOps.cpp). Adding an op kind: its enum value and name (ir/Ir.h, Ir.cpp), a row
// here, its rule functions, and its kernels. A test checks every OpKind has a row.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/ir/Ir.h"

namespace nnc::lower {
class LoweringContext;
}

namespace nnc::ops {

class ShapeContext;

struct OptionSpec {
  enum class Kind : uint8_t { Int, Pair, Bool, Float, DType, Activation, LayerName };
  const char *name = "";
  Kind kind = Kind::Int;
  bool required = false;
  int64_t min = 0; // Int, Pair: the smallest allowed value
  // Where the value goes (DType: Op::weightDType).
  int64_t ir::LayerAttrs::*intField = nullptr;  // Int; Pair: h
  int64_t ir::LayerAttrs::*intField2 = nullptr; // Pair: w
  bool ir::LayerAttrs::*boolField = nullptr;
  double ir::LayerAttrs::*floatField = nullptr;
  ir::OpKind ir::LayerAttrs::*actField = nullptr;
  std::string ir::LayerAttrs::*nameField = nullptr;
  // When not written: `def` (Int, Pair, Bool as 0/1, Float), `defAct`, or the value of
  // the option `defaultFrom` (stride = kernel, kv_heads = heads). Required options
  // and `in=` (taken from the input) have none.
  double def = 0;
  ir::OpKind defAct = ir::OpKind::Identity;
  const char *defaultFrom = nullptr;
  bool hasDefault = false;
  double below = 0;          // Float: the value must be in [0, below) (dropout's p); 0 = no bound
  bool nonNegative = false;  // Float: the value must be >= 0 (a norm's eps); every Float is finite
  const char *meaning = "";  // what the value is, for that error ("probability")
};

// What one op costs (per example), and how: the formulas --explain prints.
struct OpWork {
  int64_t macsPerExample = 0;
  int64_t attentionMacsPerExample = 0;
  int64_t otherOpsPerExample = 0;
  // Memory beyond the op's output: a temporary live only while the op runs (eager
  // attention's heads × seq × seq score matrix), and the keys and values a decoder
  // keeps per token (attention: 2 × kv_heads × head_dim), in 4-byte elements.
  int64_t scratchElementsPerExample = 0;
  int64_t kvCacheElementsPerToken = 0;
  int64_t kvCacheHeadDim = 0; // the values an i8 cache scale covers (a head vector)
  std::string macFormula;   // "64 × 784 × 256", "" when no MACs
  std::string paramFormula; // "784 × 256 + 256", "" for the generic sum of tensor shapes
};

// Types op.type and op.params from its inputs, or reports why not (false).
using ShapeRule = bool (*)(ShapeContext &cx, ir::Op &op);
using CostRule = OpWork (*)(const ir::Graph &g, const ir::Op &op); // throws CountOverflow
using LoweringRule = void (*)(lower::LoweringContext &cx, const ir::Op &op);

struct OpInfo {
  ir::OpKind kind;
  std::vector<OptionSpec> options; // in positional order
  ShapeRule shape;
  CostRule cost;
  bool isView;        // at inference the output is the input's storage (no step)
  LoweringRule lower; // null for views and the input
};

const OpInfo &opInfo(ir::OpKind kind);
size_t opTableSize();

// "dense(out, in=..., bias=..., tie=..., dtype=...)": shown when an option is wrong.
std::string layerSignature(ir::OpKind kind);
const char *optionKindName(OptionSpec::Kind k); // "an integer", "true or false", ...
// "out=256", "kernel=(3, 5)", "" for an unset name: an option's value as the IR printer shows it.
std::string optionValueText(const OptionSpec &o, const ir::Op &op);

} // namespace nnc::ops
