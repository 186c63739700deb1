// 64-bit counting that refuses to wrap. Every count nnc reports (parameters, MACs,
// bytes) goes through these; an overflow is reported as an error, never wrapped.
#pragma once
#include <cstdint>

namespace nnc {

struct CountOverflow {};

inline int64_t mulChecked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) throw CountOverflow{};
  return r;
}
inline int64_t addChecked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) throw CountOverflow{};
  return r;
}
inline int64_t subChecked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) throw CountOverflow{};
  return r;
}
template <typename... T> int64_t mulChecked(int64_t a, int64_t b, T... rest) {
  return mulChecked(mulChecked(a, b), rest...);
}

} // namespace nnc
