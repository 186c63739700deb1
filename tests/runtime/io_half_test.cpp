// f16/bf16 <-> f32 conversions, checked over all 65,536 bit patterns of each format
// against an independent reference: the IEEE formula evaluated in double, the
// round-to-nearest-even rule applied at every midpoint, and (where the compiler has
// it) the hardware/libgcc _Float16 type.
#include <cmath>
#include <gtest/gtest.h>

#include "runtime/io/HalfFloat.h"

using namespace nnc;

namespace {

// The value of a 16-bit float with `exponentBits` exponent bits, by the IEEE formula.
double referenceDecode(uint16_t bits, int exponentBits) {
  const int mantissaBits = 15 - exponentBits;
  const int bias = (1 << (exponentBits - 1)) - 1;
  const int exponent = (bits >> mantissaBits) & ((1 << exponentBits) - 1);
  const int mantissa = bits & ((1 << mantissaBits) - 1);
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  if (exponent == (1 << exponentBits) - 1) return mantissa ? NAN : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(mantissa, 1 - bias - mantissaBits);
  return sign * std::ldexp(mantissa + (1 << mantissaBits), exponent - bias - mantissaBits);
}

bool isNaNPattern(uint16_t bits, int exponentBits) {
  const int mantissaBits = 15 - exponentBits;
  return ((bits >> mantissaBits) & ((1 << exponentBits) - 1)) == (1 << exponentBits) - 1 &&
         (bits & ((1 << mantissaBits) - 1)) != 0;
}

struct Format {
  const char* name;
  int exponentBits;
  float (*widen)(uint16_t);
  uint16_t (*narrow)(float);
};
const Format kF16{"f16", 5, halfToFloat, floatToHalf};
const Format kBF16{"bf16", 8, bf16ToFloat, floatToBf16};

void expectWideningExact(const Format& fmt) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t bits = uint16_t(b);
    const float got = fmt.widen(bits);
    if (isNaNPattern(bits, fmt.exponentBits)) {
      ASSERT_TRUE(std::isnan(got)) << fmt.name << " bits " << b;
      ASSERT_EQ(std::signbit(got), bool(bits & 0x8000)) << fmt.name << " bits " << b;
      continue;
    }
    const double want = referenceDecode(bits, fmt.exponentBits);
    ASSERT_EQ(double(got), want) << fmt.name << " bits " << b;
    ASSERT_EQ(std::signbit(got), bool(bits & 0x8000)) << fmt.name << " bits " << b; // ±0
  }
}

void expectNarrowingRoundTripsAndQuietsNaN(const Format& fmt) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t bits = uint16_t(b);
    const uint16_t back = fmt.narrow(fmt.widen(bits));
    if (isNaNPattern(bits, fmt.exponentBits)) {
      ASSERT_TRUE(isNaNPattern(back, fmt.exponentBits)) << fmt.name << " bits " << b;
      ASSERT_EQ(back & 0x8000, bits & 0x8000) << fmt.name << " bits " << b;
    } else {
      ASSERT_EQ(back, bits) << fmt.name << " bits " << b;
    }
  }
}

// Between every pair of neighbours (lo, lo+1) of the same sign, including the largest
// finite value and inf: the exact midpoint goes to the even one, and the next f32 on
// either side of it goes to the nearer one.
void expectMidpointsRoundToNearestEven(const Format& fmt) {
  const uint16_t infBits = uint16_t(((1 << fmt.exponentBits) - 1) << (15 - fmt.exponentBits));
  for (uint16_t sign : {uint16_t(0), uint16_t(0x8000)}) {
    for (uint16_t lo = 0; lo < infBits; ++lo) {
      const uint16_t loBits = sign | lo, hiBits = sign | uint16_t(lo + 1);
      const double a = fmt.widen(loBits);
      // Past the largest finite value, the midpoint is that value plus half an ulp.
      const double b = lo + 1 == infBits ? a + (a - double(fmt.widen(sign | uint16_t(lo - 1)))) : fmt.widen(hiBits);
      const float mid = float((a + b) / 2);
      ASSERT_EQ(double(mid), (a + b) / 2) << "midpoint must be exact in f32";
      const uint16_t even = (lo & 1) ? hiBits : loBits;
      ASSERT_EQ(fmt.narrow(mid), even) << fmt.name << " midpoint above bits " << lo;
      const float towardLo = std::nextafter(mid, float(a)), towardHi = std::nextafter(mid, float(b));
      ASSERT_EQ(fmt.narrow(towardLo), loBits) << fmt.name << " just below midpoint above bits " << lo;
      ASSERT_EQ(fmt.narrow(towardHi), hiBits) << fmt.name << " just above midpoint above bits " << lo;
    }
  }
}

} // namespace

TEST(HalfFloat, F16WideningIsExactForAllBitPatterns) { expectWideningExact(kF16); }
TEST(HalfFloat, BF16WideningIsExactForAllBitPatterns) { expectWideningExact(kBF16); }
TEST(HalfFloat, F16NarrowingRoundTripsAllBitPatterns) { expectNarrowingRoundTripsAndQuietsNaN(kF16); }
TEST(HalfFloat, BF16NarrowingRoundTripsAllBitPatterns) { expectNarrowingRoundTripsAndQuietsNaN(kBF16); }
TEST(HalfFloat, F16MidpointsRoundToNearestEven) { expectMidpointsRoundToNearestEven(kF16); }
TEST(HalfFloat, BF16MidpointsRoundToNearestEven) { expectMidpointsRoundToNearestEven(kBF16); }

TEST(HalfFloat, SpecialValues) {
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65519.99f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);
  EXPECT_EQ(floatToHalf(1e30f), 0x7c00);
  EXPECT_EQ(floatToHalf(-INFINITY), 0xfc00);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001); // smallest subnormal
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000); // tie -> even (zero)
  EXPECT_EQ(floatToHalf(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -140)), 0x0000); // f32 subnormal
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToBf16(3.4028235e38f), 0x7f80); // FLT_MAX rounds up to inf
  EXPECT_EQ(floatToBf16(std::ldexp(1.0f, -149)), 0x0000);
  EXPECT_EQ(floatToBf16(-NAN) & 0xffc0, 0xffc0);
}

#ifdef __FLT16_MAX__
// The compiler's _Float16 as a second oracle: every half, and a dense sweep of f32.
TEST(HalfFloat, F16AgreesWithCompilerFloat16) {
  for (uint32_t b = 0; b < 65536; ++b) {
    if (isNaNPattern(uint16_t(b), 5)) continue;
    uint16_t bits = uint16_t(b);
    _Float16 h;
    std::memcpy(&h, &bits, 2);
    ASSERT_EQ(floatBits(halfToFloat(bits)), floatBits(float(h))) << "bits " << b;
  }
  for (uint64_t x = 0; x <= 0xffffffffu; x += 4093) {
    const float f = floatFromBits(uint32_t(x));
    if (std::isnan(f)) continue;
    const _Float16 h = _Float16(f);
    uint16_t want;
    std::memcpy(&want, &h, 2);
    ASSERT_EQ(floatToHalf(f), want) << "f32 bits " << x;
  }
}
#endif
