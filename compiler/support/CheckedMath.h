// 64-bit counting that refuses to wrap. Every count nnc reports (parameters, MACs,
// bytes) goes through these; an overflow is reported as an error, never wrapped.
#pragma once
#include <cstdint>
#include <string>

namespace nnc {

// `what`, where the thrower knows it: which count, and of what (countNamed).
struct CountOverflow {
  std::string what;
};

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
// count(), whose overflow is named `what` (a count with several terms says which one).
template <typename Count> int64_t countNamed(const std::string &what, Count count) {
  try {
    return count();
  } catch (const CountOverflow &) {
    throw CountOverflow{what};
  }
}

} // namespace nnc
