// Max and average pooling kernels against double-precision references, on every
// CpuTable row this host can execute (RowEngines.h): kernels 1×1 to 9×9 (kh != kw
// included, 81 taps exercises the window-row loop), strides 1-5 (equal to the kernel
// and not), padding 0, 1 and kernel/2, plane sizes 1, primes and sizes the window does
// not divide: 144 window × stride × padding cases, each on 2 plane sizes for the
// host's row and 1 for the others (PoolTest's specGrid), per kind. u = 2^-24.
//   max: exact (tolerance 0): a max involves no rounding. NaN in a window gives NaN.
//   avg: |out - ref| <= (n - 1) · u · Σ|x| / (kh·kw) + u · |ref|, n the window's
//        in-bounds taps: the rigorous bound for n recursive f32 additions (the first,
//        onto +0, is exact) followed by one correctly rounded division. (n - 1) · u
//        here is at most 80 u; the bound is reached only by adversarial data.
// Both also match a float loop in PyTorch's CPU order (aten MaxPoolKernel.cpp /
// AvgPoolKernel.cpp: row-major over the window, max by `v > m || isnan(v)`, avg as
// 0 + Σ then / (kh·kw)) bit for bit. Every run fills out with NaN first (an unwritten
// output fails), splits the planes over several calls (bit-identical results), and
// the input / output sit flush against inaccessible pages (any read or write outside
// them faults). A global pool's f64 mean has its own test (GlobalMeansAreRoundedOnce).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "RowEngines.h"
#include "compiler/codegen/PoolEmitter.h"

namespace nnc::testing {
namespace {

using codegen::PoolKernelFn;
using codegen::PoolSpec;

constexpr double kU = 0x1p-24;

// The f32 value PyTorch's CPU loop gives at (p, i, j), and the double reference with
// its allowance (avg) — the window clipped to the plane.
struct Expected {
  float torch;
  double ref, allowance;
};
Expected expected(const PoolSpec& s, const float* plane, int64_t i, int64_t j) {
  int64_t r0 = i * s.sh - s.ph, c0 = j * s.sw - s.pw;
  int64_t rLo = std::max<int64_t>(r0, 0), rHi = std::min(r0 + s.kh, s.h);
  int64_t cLo = std::max<int64_t>(c0, 0), cHi = std::min(c0 + s.kw, s.w);
  if (s.kind == PoolSpec::Max) {
    float m = -INFINITY;
    double dm = -INFINITY;
    bool nan = false;
    for (int64_t r = rLo; r < rHi; ++r)
      for (int64_t c = cLo; c < cHi; ++c) {
        float v = plane[r * s.w + c];
        if (v > m || std::isnan(v)) m = v;
        nan = nan || std::isnan(v);
        dm = std::max(dm, double(v));
      }
    return {m, nan ? NAN : dm, 0.0};
  }
  float sum = 0.0f;
  double dsum = 0, mag = 0;
  int64_t n = 0;
  for (int64_t r = rLo; r < rHi; ++r)
    for (int64_t c = cLo; c < cHi; ++c) {
      float v = plane[r * s.w + c];
      sum += v;
      dsum += v;
      mag += std::fabs(v);
      ++n;
    }
  const double count = double(s.kh * s.kw);
  const double ref = dsum / count;
  return {sum / float(count), ref, double(n - 1) * kU * mag / count + kU * std::fabs(ref)};
}

// Runs spec on `jit` (input and output flush against guard pages: after them when
// guardAfter, else before) and checks every output; false after the first failure.
bool checkPool(runtime::JitEngine& jit, const char* family, const PoolSpec& s, bool guardAfter,
               bool withNaN = false) {
  const int64_t inPlane = s.h * s.w, outPlane = s.outH() * s.outW();
  std::mt19937 rng(uint32_t(s.h * 7919 + s.w * 104729 + s.kh * 31 + s.kw * 17 + s.sh * 5 + s.sw * 3 + s.ph + s.pw));
  std::uniform_real_distribution<float> uni(-4.0f, 4.0f);
  GuardedBuffer x(size_t(s.planes * inPlane), guardAfter), out(size_t(s.planes * outPlane), guardAfter);
  for (size_t k = 0; k < x.size(); ++k) x.data()[k] = uni(rng);
  if (withNaN)
    for (size_t k = 0; k < x.size(); k += 13) x.data()[k] = NAN;
  std::fill(out.data(), out.data() + out.size(), NAN);

  auto f = reinterpret_cast<PoolKernelFn>(jit.kernel(s));
  // Planes in three calls (one of them empty), then all at once: same bits.
  const int64_t cut = s.planes / 2;
  f(x.data(), out.data(), 0, cut);
  f(x.data(), out.data(), cut, cut);
  f(x.data(), out.data(), cut, s.planes);
  std::vector<float> split = out.values();
  std::fill(out.data(), out.data() + out.size(), NAN);
  f(x.data(), out.data(), 0, s.planes);
  if (std::memcmp(split.data(), out.data(), split.size() * sizeof(float)) != 0) {
    ADD_FAILURE() << family << " " << s.key() << ": split planes differ from one call";
    return false;
  }

  for (int64_t p = 0; p < s.planes; ++p)
    for (int64_t i = 0; i < s.outH(); ++i)
      for (int64_t j = 0; j < s.outW(); ++j) {
        Expected e = expected(s, x.data() + p * inPlane, i, j);
        float got = out.data()[p * outPlane + i * s.outW() + j];
        bool ok = std::isnan(e.ref) ? std::isnan(got) : std::fabs(double(got) - e.ref) <= e.allowance;
        bool sameAsTorch = std::memcmp(&got, &e.torch, sizeof got) == 0 || (std::isnan(got) && std::isnan(e.torch));
        if (!ok || !sameAsTorch) {
          ADD_FAILURE() << family << " " << s.key() << (guardAfter ? "" : " (guard before)") << " plane " << p
                        << " out (" << i << ", " << j << "): got " << got << ", want " << e.ref << " ± "
                        << e.allowance << ", PyTorch's loop " << e.torch;
          return false;
        }
      }
  return true;
}

struct Window {
  int64_t kh, kw;
};

// The spec grid: every window × stride pair × padding (0, 1, kernel/2), each on
// `perCase` of the plane sizes that give at least one output, taken in turn (case c
// starts at the c-th such size), so every size meets many windows and strides while
// the compile count stays moderate. Each shape at most once.
std::vector<PoolSpec> specGrid(PoolSpec::Kind kind, int perCase) {
  const Window windows[] = {{1, 1}, {2, 2}, {3, 3}, {2, 3}, {3, 2}, {1, 4}, {5, 3}, {4, 1}, {9, 9}};
  const int64_t sizes[][2] = {{1, 1}, {2, 3}, {5, 5}, {7, 13}, {11, 8}, {17, 31}, {23, 37}, {56, 57}};
  std::vector<PoolSpec> specs;
  std::set<std::vector<int64_t>> seen;
  int64_t caseIndex = 0;
  for (const Window& k : windows)
    for (auto [sh, sw] : {std::pair<int64_t, int64_t>{1, 1}, {2, 2}, {k.kh, k.kw}, {1, 2}, {3, 1}, {2, 5}, {4, 3}})
      for (int pad = 0; pad < 3; ++pad) {
        int64_t ph = pad == 0 ? 0 : pad == 1 ? std::min<int64_t>(1, k.kh / 2) : k.kh / 2;
        int64_t pw = pad == 0 ? 0 : pad == 1 ? std::min<int64_t>(1, k.kw / 2) : k.kw / 2;
        std::vector<PoolSpec> fit;
        for (auto [h, w] : sizes) {
          PoolSpec s{kind, 3, h, w, k.kh, k.kw, sh, sw, ph, pw};
          if (s.outH() >= 1 && s.outW() >= 1) fit.push_back(s);
        }
        if (fit.empty() || !seen.insert({k.kh, k.kw, sh, sw, ph, pw}).second) continue; // a repeat
        for (int t = 0; t < std::min<int>(perCase, int(fit.size())); ++t)
          specs.push_back(fit[size_t(caseIndex + t) % fit.size()]);
        ++caseIndex;
      }
  return specs;
}

void checkGrid(PoolSpec::Kind kind) {
  for (const RowEngine& row : executableRows()) {
    std::vector<PoolSpec> specs = specGrid(kind, row.jit == &hostJit() ? 2 : 1);
    row.jit->prepare(std::vector<codegen::KernelSpec>(specs.begin(), specs.end()));
    size_t checked = 0;
    for (const PoolSpec& s : specs) {
      ASSERT_TRUE(checkPool(*row.jit, row.family, s, checked % 2 == 0));
      ++checked;
    }
    ::testing::Test::RecordProperty(std::string(row.family) + "_specs", int(checked));
    std::printf("  %s: %zu specs\n", row.family, checked);
  }
}

// The NHWC kernel (spec.channels > 0) of an NCHW spec s: the input is s's random planes
// laid out [images·h·w, c]; each output must equal what the planes' reference gives
// (PyTorch's loop bit for bit). Units split over three calls as above.
bool checkPixelsPool(runtime::JitEngine& jit, const char* family, const PoolSpec& s, int64_t c, bool withNaN = false) {
  const int64_t images = s.planes, inPlane = s.h * s.w, outPlane = s.outH() * s.outW();
  std::mt19937 rng(uint32_t(s.h * 31 + s.w * 7 + c));
  std::uniform_real_distribution<float> uni(-4.0f, 4.0f);
  std::vector<float> planes(size_t(images * c * inPlane));
  for (float& v : planes) v = uni(rng);
  if (withNaN)
    for (size_t k = 0; k < planes.size(); k += 13) planes[k] = NAN;
  GuardedBuffer x(planes.size(), true), out(size_t(images * c * outPlane), false);
  for (int64_t b = 0; b < images; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < inPlane; ++p) x.data()[(b * inPlane + p) * c + ch] = planes[size_t((b * c + ch) * inPlane + p)];
  PoolSpec px = s;
  px.channels = c;
  auto f = reinterpret_cast<PoolKernelFn>(jit.kernel(px));
  std::fill(out.data(), out.data() + out.size(), NAN);
  const int64_t units = px.units(), cut = units / 3;
  f(x.data(), out.data(), 0, cut);
  f(x.data(), out.data(), cut, cut);
  f(x.data(), out.data(), cut, units);
  for (int64_t b = 0; b < images; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < s.outH(); ++i)
        for (int64_t j = 0; j < s.outW(); ++j) {
          Expected e = expected(s, planes.data() + (b * c + ch) * inPlane, i, j);
          float got = out.data()[((b * s.outH() + i) * s.outW() + j) * c + ch];
          bool same = std::memcmp(&got, &e.torch, sizeof got) == 0 || (std::isnan(got) && std::isnan(e.torch));
          if (!same) {
            ADD_FAILURE() << family << " " << px.key() << " image " << b << " channel " << ch << " out (" << i << ", "
                          << j << "): got " << got << ", PyTorch's loop " << e.torch;
            return false;
          }
        }
  return true;
}

TEST(Pool, PixelsMatchThePlanesReference) {
  const int64_t channels[] = {1, 5, 16, 37};
  for (const RowEngine& row : executableRows())
    for (PoolSpec::Kind kind : {PoolSpec::Max, PoolSpec::Avg}) {
      std::vector<PoolSpec> grid = specGrid(kind, 1), specs;
      for (size_t k = 0; k < grid.size(); k += 2) specs.push_back(grid[k]); // every other case: compile time
      size_t i = 0;
      for (PoolSpec s : specs) {
        s.planes = 1 + int64_t(i % 2);
        ASSERT_TRUE(checkPixelsPool(*row.jit, row.family, s, channels[i++ % 4]));
      }
      // A global pool (81 taps: the window loops), a stride-1 9×9 window over rows long
      // enough for groups of full pixels (their window a loop), and NaN propagation.
      ASSERT_TRUE(checkPixelsPool(*row.jit, row.family, PoolSpec{kind, 2, 9, 9, 9, 9, 1, 1, 0, 0}, 19));
      ASSERT_TRUE(checkPixelsPool(*row.jit, row.family, PoolSpec{kind, 1, 12, 40, 9, 9, 1, 1, 4, 4}, 21));
      ASSERT_TRUE(checkPixelsPool(*row.jit, row.family, PoolSpec{kind, 2, 15, 21, 3, 3, 2, 2, 1, 1}, 20, true));
      // Groups of other sizes (PoolSpec::pixelGroup: 2 for maps streamed from memory).
      for (int64_t group : {int64_t(1), int64_t(2), int64_t(5)})
        for (PoolSpec s : {PoolSpec{kind, 1, 12, 40, 9, 9, 1, 1, 4, 4}, PoolSpec{kind, 2, 15, 37, 3, 3, 2, 2, 1, 1}}) {
          s.pixelGroup = group;
          ASSERT_TRUE(checkPixelsPool(*row.jit, row.family, s, 21, /*withNaN=*/group == 2));
          ++i;
        }
      std::printf("  %s %s: %zu NHWC specs\n", row.family, kind == PoolSpec::Max ? "max" : "avg", i + 3);
    }
}

TEST(Pool, MaxMatchesReferenceOnTheGrid) {
  ASSERT_NO_FATAL_FAILURE(checkGrid(PoolSpec::Max));
}
TEST(Pool, AvgMatchesReferenceOnTheGrid) {
  ASSERT_NO_FATAL_FAILURE(checkGrid(PoolSpec::Avg));
}

TEST(Pool, GuardPagesOnBothSidesForBorderHeavyShapes) {
  for (const RowEngine& row : executableRows())
    for (PoolSpec::Kind kind : {PoolSpec::Max, PoolSpec::Avg})
      for (PoolSpec s : {PoolSpec{kind, 2, 3, 3, 3, 3, 1, 1, 1, 1}, PoolSpec{kind, 2, 9, 17, 3, 3, 2, 2, 1, 1},
                         PoolSpec{kind, 1, 4, 33, 2, 2, 2, 2, 1, 1}, PoolSpec{kind, 1, 1, 40, 1, 3, 1, 3, 0, 1},
                         PoolSpec{kind, 2, 6, 6, 5, 5, 1, 1, 2, 2}})
        for (bool after : {true, false}) ASSERT_TRUE(checkPool(*row.jit, row.family, s, after));
}

// Planes whose rows hold groups of full vectors (PoolEmitter.cpp: kGroupVectors) on every
// row, the window unrolled or a loop, with NaN.
TEST(Pool, LongRowsGoByGroupsOfVectors) {
  for (const RowEngine& row : executableRows())
    for (PoolSpec::Kind kind : {PoolSpec::Max, PoolSpec::Avg})
      for (PoolSpec s : {PoolSpec{kind, 2, 5, 150, 3, 3, 1, 1, 1, 1}, PoolSpec{kind, 1, 4, 301, 5, 5, 1, 2, 2, 2},
                         PoolSpec{kind, 1, 12, 160, 9, 9, 1, 1, 4, 4}}) {
        ASSERT_TRUE(checkPool(*row.jit, row.family, s, true));
        ASSERT_TRUE(checkPool(*row.jit, row.family, s, false, /*withNaN=*/true));
      }
}

// One output per plane from a window of whole rows (codegen::poolsWholeRows): NCHW max
// reduces each plane's run in vectors — runs shorter than a vector, with a masked tail,
// exactly a group of vectors, longer, and a window of the first kh of h rows — and NHWC
// folds blocks of channel vectors over the pixels (fewer channels than a vector, a
// block and a rest, several blocks). Bit for bit PyTorch's loop, NaN included.
TEST(Pool, WholeRowWindowsAreReducedInVectors) {
  for (const RowEngine& row : executableRows())
    for (PoolSpec::Kind kind : {PoolSpec::Max, PoolSpec::Avg}) {
      size_t planes = 0, pixels = 0;
      for (PoolSpec s : {PoolSpec{kind, 3, 1, 1, 1, 1, 1, 1, 0, 0}, PoolSpec{kind, 3, 1, 5, 1, 5, 1, 1, 0, 0},
                         PoolSpec{kind, 2, 7, 7, 7, 7, 1, 1, 0, 0}, PoolSpec{kind, 2, 1, 64, 1, 64, 1, 1, 0, 0},
                         PoolSpec{kind, 2, 1, 65, 1, 65, 1, 1, 0, 0}, PoolSpec{kind, 2, 9, 13, 5, 13, 5, 1, 0, 0},
                         PoolSpec{kind, 2, 56, 56, 56, 56, 1, 1, 0, 0}}) {
        EXPECT_EQ(codegen::poolsWholeRows(s), kind == PoolSpec::Max) << s.key();
        for (bool withNaN : {false, true}) {
          ASSERT_TRUE(checkPool(*row.jit, row.family, s, !withNaN, withNaN));
          ++planes;
        }
        for (int64_t c : {int64_t(1), int64_t(5), int64_t(17), int64_t(256), int64_t(300)}) {
          PoolSpec px = s;
          px.channels = c;
          EXPECT_TRUE(codegen::poolsWholeRows(px)) << px.key();
          ASSERT_TRUE(checkPixelsPool(*row.jit, row.family, s, c, /*withNaN=*/c == 17));
          ++pixels;
        }
      }
      std::printf("  %s %s: %zu planes and %zu NHWC cases\n", row.family, kind == PoolSpec::Max ? "max" : "avg", planes,
                  pixels);
    }
}

// A global pool's mean (PoolSpec::doubleSum, as PyTorch's AdaptiveAvgPool2d(1)):
// rounded once from the f64 sum, so within half an ulp (u |mean|) of the exact mean,
// over planes of 56 × 56 and 300 × 300 values 1 + N(0, 1/4), where f32 adds in order
// lose ~1e-6, and short ones; NHWC (blocks of channel vectors) and planes (runs
// reduced in vectors); an inf gives inf, +inf with -inf or a NaN gives NaN.
TEST(Pool, GlobalMeansAreRoundedOnce) {
  for (const RowEngine& row : executableRows())
    for (auto [h, w, channels] : {std::tuple<int64_t, int64_t, int64_t>{56, 56, 0}, {300, 300, 0}, {7, 7, 0}, {1, 65, 0},
                                  {56, 56, 19}, {300, 300, 3}, {7, 7, 300}, {3, 4, 2}}) {
      PoolSpec s{PoolSpec::Avg, 2, h, w, h, w, 1, 1, 0, 0};
      s.channels = channels;
      s.doubleSum = true;
      const int64_t C = std::max<int64_t>(channels, 1), P = h * w;
      std::mt19937 rng(uint32_t(h + channels));
      std::normal_distribution<float> normal(1.0f, 0.5f);
      std::vector<float> x(size_t(s.planes * P * C)), out(size_t(s.planes * C), NAN);
      for (float& v : x) v = normal(rng);
      // image/plane 1, channel 0: an inf, then +inf and -inf (C > 1: channel 1 a NaN)
      auto at = [&](int64_t image, int64_t pixel, int64_t ch) -> float& {
        return x[size_t(channels ? (image * P + pixel) * C + ch : image * P + pixel)];
      };
      at(1, 7, 0) = INFINITY;
      if (channels) at(1, 9, 1) = NAN;
      reinterpret_cast<PoolKernelFn>(row.jit->kernel(s))(x.data(), out.data(), 0, s.planes);
      for (int64_t image = 0; image < s.planes; ++image)
        for (int64_t ch = 0; ch < C; ++ch) {
          const float got = out[size_t(image * C + ch)];
          if (image == 1 && ch == 0) {
            EXPECT_EQ(got, INFINITY) << row.family << " " << s.key();
            continue;
          }
          if (image == 1 && ch == 1) {
            EXPECT_TRUE(std::isnan(got)) << row.family << " " << s.key();
            continue;
          }
          double sum = 0;
          for (int64_t p = 0; p < P; ++p) sum += at(image, p, ch);
          const double mean = sum / double(P);
          EXPECT_LE(std::fabs(double(got) - mean), kU * mean * (1 + 1e-9)) << row.family << " " << s.key() << " image " << image
                                                                  << " channel " << ch << ": got " << got << ", mean "
                                                                  << mean;
        }
      at(1, 8, 0) = -INFINITY;
      reinterpret_cast<PoolKernelFn>(row.jit->kernel(s))(x.data(), out.data(), 0, s.planes);
      EXPECT_TRUE(std::isnan(out[size_t(C)])) << row.family << " " << s.key() << ": +inf and -inf";
    }
}

TEST(Pool, NaNInAWindowGivesNaN) {
  for (const RowEngine& row : executableRows())
    for (PoolSpec::Kind kind : {PoolSpec::Max, PoolSpec::Avg})
      for (PoolSpec s : {PoolSpec{kind, 2, 15, 21, 3, 3, 1, 1, 1, 1}, PoolSpec{kind, 2, 14, 40, 2, 2, 2, 2, 0, 0}})
        ASSERT_TRUE(checkPool(*row.jit, row.family, s, true, /*withNaN=*/true));
}

TEST(Pool, InvalidSpecsThrow) {
  const PoolSpec bad[] = {
      {PoolSpec::Max, -1, 4, 4, 2, 2, 2, 2, 0, 0}, // negative planes
      {PoolSpec::Max, 1, 0, 4, 2, 2, 2, 2, 0, 0},  // h = 0
      {PoolSpec::Avg, 1, 4, -4, 2, 2, 2, 2, 0, 0}, // w < 0
      {PoolSpec::Max, 1, 4, 4, 0, 2, 1, 1, 0, 0},  // kh = 0
      {PoolSpec::Avg, 1, 4, 4, 2, 2, 0, 2, 0, 0},  // sh = 0
      {PoolSpec::Max, 1, 4, 4, 2, 2, 2, -1, 0, 0}, // sw < 0
      {PoolSpec::Max, 1, 4, 4, 3, 3, 1, 1, 2, 1},  // ph > kh / 2
      {PoolSpec::Avg, 1, 4, 4, 2, 1, 1, 1, 0, 1},  // pw > kw / 2 (kw = 1: no padding)
      {PoolSpec::Max, 1, 4, 4, 2, 2, 1, 1, -1, 0}, // negative padding
      {PoolSpec::Max, 1, 2, 8, 3, 3, 1, 1, 0, 0},  // window taller than the input: empty
      {PoolSpec::Avg, 1, 2, 8, 4, 2, 3, 1, 0, 0},  // (2 - 4) / 3 truncates to 0: still empty
  };
  for (const PoolSpec& s : bad) {
    EXPECT_THROW(codegen::validatePoolSpec(s), std::invalid_argument) << s.key();
    EXPECT_THROW(hostJit().kernel(s), std::invalid_argument) << s.key();
  }
  EXPECT_EQ((PoolSpec{PoolSpec::Avg, 1, 2, 8, 4, 2, 3, 1, 0, 0}.outH()), 0);
  EXPECT_NO_THROW(codegen::validatePoolSpec(PoolSpec{PoolSpec::Max, 0, 1, 1, 1, 1, 1, 1, 0, 0}));
  EXPECT_NO_THROW(codegen::validatePoolSpec(PoolSpec{PoolSpec::Max, 1, 2, 2, 3, 3, 1, 1, 1, 1}));
}

TEST(Pool, KeysDifferWhenTheCodeDiffersAndAreSymbolSafe) {
  std::vector<PoolSpec> specs = specGrid(PoolSpec::Max, 8), avg = specGrid(PoolSpec::Avg, 8);
  specs.insert(specs.end(), avg.begin(), avg.end());
  std::set<std::string> keys;
  for (const PoolSpec& s : specs) {
    for (char c : s.key()) EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') << s.key();
    keys.insert(s.key());
  }
  EXPECT_EQ(keys.size(), specs.size());
  // planes are a runtime range, not part of the code
  EXPECT_EQ((PoolSpec{PoolSpec::Max, 1, 8, 8, 2, 2, 2, 2, 0, 0}.key()), (PoolSpec{PoolSpec::Max, 64, 8, 8, 2, 2, 2, 2, 0, 0}.key()));
  // NHWC maps are other code, and so are their channel counts
  PoolSpec a{PoolSpec::Max, 1, 8, 8, 2, 2, 2, 2, 0, 0}, b = a, c = a;
  b.channels = 16, c.channels = 17;
  EXPECT_NE(a.key(), b.key());
  EXPECT_NE(b.key(), c.key());
  // so is an NHWC kernel's group of pixels, and a global mean's f64 sum
  PoolSpec g = b, f = a;
  g.pixelGroup = 2;
  f.kind = PoolSpec::Avg, f.doubleSum = true;
  EXPECT_NE(g.key(), b.key());
  EXPECT_NE(f.key(), (PoolSpec{PoolSpec::Avg, 1, 8, 8, 2, 2, 2, 2, 0, 0}.key()));
}

} // namespace
} // namespace nnc::testing
