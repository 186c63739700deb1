// The table. Block sizes follow BLIS's f32 choices for the family (Haswell/Zen:
// 6×16, KC 256, MC 144, NC 4080); the SSE rows keep MR×NR/4 accumulators plus the B
// vectors and the broadcast within 16 xmm registers. The AVX-512 row: see kAvx512.
#include "compiler/codegen/CpuTable.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

namespace nnc::codegen {

namespace {
constexpr MicroKernelShape kAvx2Fma{"avx2_fma", 8, 6, 16, 256, 144, 4080, true};
constexpr MicroKernelShape kAvx{"avx", 8, 4, 16, 256, 96, 4080, false}; // spare regs for mul+add
constexpr MicroKernelShape kSse2{"sse2", 4, 4, 8, 256, 96, 2048, false};
// AVX-512: 12×32 blocks of 16-float vectors (BLIS skx's sgemm shape, transposed to this
// emitter's broadcast-A form): 24 zmm accumulators, 2 B vectors, broadcasts and the
// loads LLVM schedules ahead within 32 registers. Measured here (same-process A/B,
// 1 thread, Xeon with AVX-512 at 230 GFLOP/s/core): 12×32 beat 14×32 (28 accumulators
// spilled one per k step under LLVM's scheduling, 5-12 % slower) and 6×64 (4 B loads
// per k step; 3-15 % slower on 128³-1024³ and the layer shapes). KC/MC/NC here are
// the fallbacks; chooseBlocking sizes them from the host's caches and NR, as for the
// other rows. The other emitters (elementwise, norm, pool, ...) use the row's
// 16-float vectors too.
constexpr MicroKernelShape kAvx512{"avx512", 16, 12, 32, 192, 168, 4080, true, 32, true};
static_assert(kAvx512.NR % kAvx512.vectorFloats == 0 && kAvx512.MC % kAvx512.MR == 0);

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
  f.f16c = has("f16c");
  f.avx512bf16 = has("avx512bf16");
  f.avx512vnni = has("avx512vnni");
  f.avxvnni = has("avxvnni");
  f.amxBf16 = has("amx-tile") && has("amx-bf16");
  f.amxInt8 = has("amx-tile") && has("amx-int8");
  return f;
}

const std::vector<const MicroKernelShape*>& allMicroKernels() {
  static const std::vector<const MicroKernelShape*> rows{&kAvx512, &kAvx2Fma, &kAvx, &kSse2};
  return rows;
}

bool canExecute(const CpuFeatures& f, const MicroKernelShape& row) {
  const std::string_view family = row.family;
  if (family == kAvx512.family) return f.avx512f && f.avx2 && f.fma;
  if (family == kAvx2Fma.family) return f.avx2 && f.fma;
  if (family == kAvx.family) return f.avx;
  return family == kSse2.family;
}

std::vector<const MicroKernelShape*> executableRows(const CpuFeatures& f) {
  std::vector<const MicroKernelShape*> out;
  for (const MicroKernelShape* row : allMicroKernels())
    if (canExecute(f, *row)) out.push_back(row);
  return out;
}

std::vector<const MicroKernelShape*> rowsToCalibrate(const CpuFeatures& f) {
  std::vector<const MicroKernelShape*> out;
  for (const MicroKernelShape* row : executableRows(f))
    if (row->fma) out.push_back(row);
  return out;
}

const MicroKernelShape& selectMicroKernel(const CpuFeatures& f) { return *executableRows(f).front(); }

const MicroKernelShape* findMicroKernel(std::string_view name) {
  std::string lower(name); // NNC_ISA=AVX2 as avx2, as the on/off variables take any case
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "avx2") lower = "avx2_fma";
  for (const MicroKernelShape* row : allMicroKernels())
    if (lower == row->family) return row;
  return nullptr;
}

std::string kernelFeatureOverrides(const CpuFeatures& f, const MicroKernelShape& row) {
  // LLVM clears with a feature every feature that implies it: -avx2 takes AVX-512 and
  // AVX-VNNI with it, -sse3 everything from SSSE3 to AVX-512.
  if (row.vectorFloats == 4) return f.avx ? "-sse3" : "";
  if (row.vectorFloats == 8 && !row.fma) return f.avx2 || f.fma ? "-avx2,-fma" : "";
  return f.avx512f && row.vectorFloats < 16 ? "-avx512f" : "";
}

namespace {
// /sys/devices/system/cpu/cpu0/cache/indexI: "size" like "32K", "level", "type".
CacheSizes sysfsCacheSizes() {
  CacheSizes c;
  for (int i = 0; i < 8; ++i) {
    std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream levelFile(dir + "level"), typeFile(dir + "type"), sizeFile(dir + "size");
    int level = 0;
    std::string type, size;
    if (!(levelFile >> level) || !(typeFile >> type) || !(sizeFile >> size) || size.empty())
      continue;
    int64_t bytes = 0;
    try {
      bytes = std::stoll(size);
    } catch (...) {
      continue;
    }
    char unit = size.back();
    if (unit == 'K') bytes <<= 10;
    else if (unit == 'M') bytes <<= 20;
    if (level == 1 && type == "Data") c.l1d = bytes;
    else if (level == 2 && type != "Instruction") c.l2 = bytes;
    else if (level == 3 && type != "Instruction") c.l3 = bytes;
  }
  return c;
}

int64_t sysconfBytes([[maybe_unused]] int name) {
  long v = -1;
#ifdef _SC_LEVEL1_DCACHE_SIZE
  v = sysconf(name);
#endif
  return v > 0 ? int64_t(v) : 0;
}

int64_t roundDownClamp(int64_t v, int64_t multiple, int64_t lo, int64_t hi) {
  v = v / multiple * multiple;
  return std::clamp(v, lo, hi);
}
} // namespace

const CacheSizes& hostCacheSizes() {
  static const CacheSizes sizes = [] {
    CacheSizes c = sysfsCacheSizes();
#ifdef _SC_LEVEL1_DCACHE_SIZE
    if (c.l1d == 0) c.l1d = sysconfBytes(_SC_LEVEL1_DCACHE_SIZE);
    if (c.l2 == 0) c.l2 = sysconfBytes(_SC_LEVEL2_CACHE_SIZE);
    if (c.l3 == 0) c.l3 = sysconfBytes(_SC_LEVEL3_CACHE_SIZE);
#endif
    return c;
  }();
  return sizes;
}

std::string cacheSizesTag(const CacheSizes& c) {
  return "l1_" + std::to_string(c.l1d >> 10) + "k_l2_" + std::to_string(c.l2 >> 10) + "k_l3_" +
         std::to_string(c.l3 >> 10) + "k";
}

GemmBlocking chooseBlocking(const MicroKernelShape& shape, const CacheSizes& c) {
  GemmBlocking b{shape.KC, shape.MC, shape.NC};
  if (c.l1d > 0) b.KC = roundDownClamp(c.l1d / 2 / (shape.NR * 4), 8, 64, 512);
  if (c.l2 > 0) b.MC = roundDownClamp(c.l2 / 2 / (b.KC * 4), shape.MR, shape.MR, 1020 / shape.MR * shape.MR);
  if (c.l3 > 0) b.NC = roundDownClamp(c.l3 / 4 / (b.KC * 4), shape.NR, shape.NR, 8192);
  return b;
}

} // namespace nnc::codegen
