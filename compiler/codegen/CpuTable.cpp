// The table. Block sizes follow BLIS's f32 choices for the family (Haswell/Zen:
// 6×16, KC 256, MC 144, NC 4080); the SSE rows keep MR×NR/4 accumulators plus the B
// vectors and the broadcast within 16 xmm registers.
#include "compiler/codegen/CpuTable.h"

namespace nnc::codegen {

namespace {
constexpr MicroKernelShape kAvx2Fma{"avx2_fma", 8, 6, 16, 256, 144, 4080, true};
constexpr MicroKernelShape kAvx{"avx", 8, 4, 16, 256, 96, 4080, false}; // spare regs for mul+add
constexpr MicroKernelShape kSse2{"sse2", 4, 4, 8, 256, 96, 2048, false};

static_assert(kAvx2Fma.NR % kAvx2Fma.vectorFloats == 0);
static_assert(kAvx.NR % kAvx.vectorFloats == 0);
static_assert(kSse2.NR % kSse2.vectorFloats == 0);
static_assert(kAvx2Fma.MC % kAvx2Fma.MR == 0 && kSse2.MC % kSse2.MR == 0);
} // namespace

CpuFeatures CpuFeatures::parse(std::string_view s) {
  CpuFeatures f;
  auto has = [&](std::string_view name) {
    std::string want = "+" + std::string(name);
    size_t pos = 0;
    while ((pos = s.find(want, pos)) != std::string_view::npos) {
      size_t end = pos + want.size();
      if (end == s.size() || s[end] == ',') return true;
      pos = end;
    }
    return false;
  };
  f.avx = has("avx");
  f.avx2 = has("avx2");
  f.fma = has("fma");
  f.avx512f = has("avx512f");
  return f;
}

const MicroKernelShape& selectMicroKernel(const CpuFeatures& f) {
  if (f.avx2 && f.fma) return kAvx2Fma;
  if (f.avx) return kAvx;
  return kSse2;
}

} // namespace nnc::codegen
