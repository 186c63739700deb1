// Short constructors for the op table's option rows (OpTable.cpp).
#pragma once
#include "compiler/ops/OpTable.h"

namespace nnc::ops::option {
using A = ir::LayerAttrs;
using K = OptionSpec::Kind;

inline OptionSpec requiredInt(const char *name, int64_t A::*field, int64_t min = 1) {
  OptionSpec o{name, K::Int, true, min};
  o.intField = field;
  return o;
}
inline OptionSpec intOption(const char *name, int64_t A::*field, int64_t def, int64_t min = 1) {
  OptionSpec o{name, K::Int, false, min};
  o.intField = field, o.def = double(def), o.hasDefault = true;
  return o;
}
// An Int without a default of its own: `from` names the option whose value it takes,
// or, with from = nullptr, the field is left to the shape rule (dense's in=).
inline OptionSpec intFrom(const char *name, int64_t A::*field, const char *from, int64_t min = 1) {
  OptionSpec o{name, K::Int, false, min};
  o.intField = field, o.defaultFrom = from;
  return o;
}
inline OptionSpec requiredPair(const char *name, int64_t A::*h, int64_t A::*w, int64_t min = 1) {
  OptionSpec o{name, K::Pair, true, min};
  o.intField = h, o.intField2 = w;
  return o;
}
inline OptionSpec pairOption(const char *name, int64_t A::*h, int64_t A::*w, int64_t def, int64_t min) {
  OptionSpec o{name, K::Pair, false, min};
  o.intField = h, o.intField2 = w, o.def = double(def), o.hasDefault = true;
  return o;
}
inline OptionSpec pairFrom(const char *name, int64_t A::*h, int64_t A::*w, const char *from, int64_t min) {
  OptionSpec o{name, K::Pair, false, min};
  o.intField = h, o.intField2 = w, o.defaultFrom = from;
  return o;
}
inline OptionSpec boolOption(const char *name, bool A::*field, bool def) {
  OptionSpec o{name, K::Bool};
  o.boolField = field, o.def = def ? 1 : 0, o.hasDefault = true;
  return o;
}
inline OptionSpec floatOption(const char *name, double A::*field, double def, double below = 0,
                              const char *meaning = "") {
  OptionSpec o{name, K::Float};
  o.floatField = field, o.def = def, o.hasDefault = true, o.below = below, o.meaning = meaning;
  return o;
}
// A Float that must be >= 0 (a norm's eps added to a variance, lrn's k).
inline OptionSpec nonNegativeFloat(const char *name, double A::*field, double def, const char *meaning) {
  OptionSpec o = floatOption(name, field, def, 0, meaning);
  o.nonNegative = true;
  return o;
}
inline OptionSpec activationOption(const char *name, ir::OpKind A::*field, ir::OpKind def) {
  OptionSpec o{name, K::Activation};
  o.actField = field, o.defAct = def, o.hasDefault = true;
  return o;
}
inline OptionSpec layerNameOption(const char *name, std::string A::*field) {
  OptionSpec o{name, K::LayerName};
  o.nameField = field;
  return o;
}
inline OptionSpec dtypeOption() { return OptionSpec{"dtype", K::DType}; } // → Op::weightDType

} // namespace nnc::ops::option
