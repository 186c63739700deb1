// Element types of tensors and of stored weights.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

#include "compiler/support/CheckedMath.h"

namespace nnc {

enum class DType : uint8_t { F32, F16, BF16, I8, I4, I32 };

// Every dtype a weight can be stored as, in report order.
inline constexpr DType kWeightDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::I8,
                                          DType::I4};

constexpr int dtypeBits(DType t) {
  switch (t) {
  case DType::F32: return 32;
  case DType::I32: return 32;
  case DType::F16: return 16;
  case DType::BF16: return 16;
  case DType::I8: return 8;
  case DType::I4: return 4;
  }
  return 0;
}

constexpr std::string_view dtypeName(DType t) {
  switch (t) {
  case DType::F32: return "f32";
  case DType::F16: return "f16";
  case DType::BF16: return "bf16";
  case DType::I8: return "i8";
  case DType::I4: return "i4";
  case DType::I32: return "i32";
  }
  return "?";
}

// Every dtype a KV cache can be stored as (--kv-dtype), in report order.
// Whether products with low-precision `activations` (--activations: bf16, i8) take
// weights stored as `weights`: the same dtype, or i4 under i8 activations
// (docs/lowering.md, "Low-precision activations").
constexpr bool activationsMultiply(DType activations, DType weights) {
  return activations == weights || (activations == DType::I8 && weights == DType::I4);
}

inline constexpr DType kKvCacheDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::I8};

inline std::optional<DType> parseDType(std::string_view s) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I8, DType::I4, DType::I32})
    if (dtypeName(t) == s) return t;
  return std::nullopt;
}

// A KV cache dtype by name (f32, f16, bf16, i8); nullopt for anything else.
inline std::optional<DType> parseKvCacheDType(std::string_view s) {
  for (DType t : kKvCacheDTypes)
    if (dtypeName(t) == s) return t;
  return std::nullopt;
}

// Bytes needed for `count` elements of `t`, rounded up (i4 packs two per byte):
// ceil(count · bits / 8), computed without forming count · bits, so it overflows only
// when the byte count itself does not fit in 64 bits.
inline int64_t bytesFor(int64_t count, DType t) {
  const int64_t bits = dtypeBits(t);
  return addChecked(mulChecked(count / 8, bits), ((count % 8) * bits + 7) / 8);
}

} // namespace nnc
