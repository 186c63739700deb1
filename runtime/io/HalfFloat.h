// Conversions between f32 and the two 16-bit float formats nnc stores weights in:
// IEEE binary16 (f16: 1 sign, 5 exponent, 10 mantissa bits) and bfloat16 (bf16: the
// top 16 bits of an f32).
//
// Guarantees, for every input bit pattern:
//  - widening (f16/bf16 -> f32) is exact, subnormals included;
//  - narrowing rounds to nearest, ties to even; values past the largest finite
//    half (65504 + half an ulp) become inf; tiny values become subnormals or ±0;
//  - inf stays inf; NaN stays NaN (made quiet, sign and top payload bits kept).
// No dependence on the host's rounding mode or on F16C instructions.
#pragma once
#include <cstdint>
#include <cstring>

namespace nnc {

inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float floatFromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  if (exponent == 0x1f) // inf or NaN: all-ones f32 exponent, payload kept
    return floatFromBits(sign | 0x7f800000 | (mantissa << 13));
  if (exponent != 0) // normal: rebias 15 -> 127
    return floatFromBits(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return floatFromBits(sign);
  // Subnormal half = mantissa × 2^-24; normalise it into an f32 normal.
  int shift = 0;
  while ((mantissa & 0x400) == 0) {
    mantissa <<= 1;
    ++shift;
  }
  return floatFromBits(sign | uint32_t(113 - shift) << 23 | ((mantissa & 0x3ff) << 13));
}

// Shifts `value` right by `shift` (1..31) bits, rounding to nearest, ties to even.
inline uint32_t shiftRightRoundEven(uint32_t value, int shift) {
  uint32_t kept = value >> shift;
  uint32_t dropped = value & ((1u << shift) - 1);
  uint32_t halfway = 1u << (shift - 1);
  if (dropped > halfway || (dropped == halfway && (kept & 1))) ++kept;
  return kept;
}

inline uint16_t floatToHalf(float f) {
  uint32_t x = floatBits(f);
  uint16_t sign = uint16_t((x >> 16) & 0x8000);
  int exponent = int((x >> 23) & 0xff); // biased by 127
  uint32_t mantissa = x & 0x7fffff;
  if (exponent == 0xff) // inf, or NaN made quiet
    return mantissa == 0 ? sign | 0x7c00 : sign | 0x7e00 | uint16_t(mantissa >> 13);
  if (exponent > 127 + 15) return sign | 0x7c00; // ≥ 2^16: beyond any rounding
  if (exponent >= 127 - 14) {
    // Normal half. A carry out of the mantissa bumps the exponent, which also turns
    // 65520 and above into inf (0x7c00) — exactly the round-to-nearest result.
    uint32_t biased = uint32_t(exponent - 112) << 23 | mantissa;
    return sign | uint16_t(shiftRightRoundEven(biased, 13));
  }
  if (exponent < 127 - 25) return sign; // below 2^-25: rounds to zero
  // Subnormal half: value = (1.mantissa) × 2^(exponent-127), in units of 2^-24.
  uint32_t significand = mantissa | 0x800000;
  return sign | uint16_t(shiftRightRoundEven(significand, 126 - exponent));
}

inline float bf16ToFloat(uint16_t b) { return floatFromBits(uint32_t(b) << 16); }

inline uint16_t floatToBf16(float f) {
  uint32_t x = floatBits(f);
  if ((x & 0x7fffffff) > 0x7f800000) return uint16_t((x >> 16) | 0x0040); // quiet NaN
  // Adding 0x7fff (+1 when the kept part is odd) rounds ties to even; a carry into
  // the exponent is the correct rounding, up to inf.
  return uint16_t((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

} // namespace nnc
