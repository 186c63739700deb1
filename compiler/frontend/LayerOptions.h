// The options each layer kind accepts (LANGUAGE.md §3): names, positional order, value
// kinds, defaults and lower bounds. The expander checks every argument against this
// table, so an unknown, missing, duplicated or ill-typed option is reported in one
// place with the layer's full signature.
#pragma once
#include <string>
#include <vector>

#include "compiler/ir/Ir.h"

namespace nnc {

struct OptionSpec {
  enum class Kind { Int, Pair, Bool, Float, DType, Activation, LayerName };
  std::string name;
  Kind kind;
  bool required = false;
  int64_t min = 0; // Int/Pair: smallest allowed value
};

struct LayerSpec {
  ir::OpKind kind;
  std::vector<OptionSpec> options; // in positional order
};

const LayerSpec &layerSpec(ir::OpKind kind);

// "dense(out, in=?, bias=true, tie=NAME, dtype=f32)": shown when an option is wrong.
std::string layerSignature(ir::OpKind kind);

const char *optionKindName(OptionSpec::Kind k);

} // namespace nnc
