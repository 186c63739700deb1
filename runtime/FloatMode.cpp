#include "runtime/FloatMode.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define NNC_HAS_MXCSR 1
#endif

namespace nnc::runtime {

namespace {
// MXCSR fields (Intel SDM vol. 1, 10.2.3): the six exception masks, flush to zero,
// denormals are zero; rounding control 00 is round to nearest even.
constexpr uint32_t kAllExceptionsMasked = 0x1F80;
constexpr uint32_t kFlushToZero = 0x8000;
constexpr uint32_t kDenormalsAreZero = 0x0040;
} // namespace

uint32_t floatMode() {
#ifdef NNC_HAS_MXCSR
  return _mm_getcsr();
#else
  return 0;
#endif
}

void setFloatMode(uint32_t mode) {
#ifdef NNC_HAS_MXCSR
  _mm_setcsr(mode);
#else
  (void)mode;
#endif
}

uint32_t runFloatMode(Denormals denormals) {
  return kAllExceptionsMasked | (denormals == Denormals::Flush ? kFlushToZero | kDenormalsAreZero : 0);
}

ScopedFloatMode::ScopedFloatMode(Denormals denormals) : saved_(floatMode()) { setFloatMode(runFloatMode(denormals)); }

ScopedFloatMode::~ScopedFloatMode() { setFloatMode(saved_); }

} // namespace nnc::runtime
