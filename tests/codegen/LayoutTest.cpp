// The convolution data-movement kernels (LayoutSpec: im2col from NCHW or NHWC, and back
// to NCHW planes)
// against plain loops, on every CpuTable row this host can execute (RowEngines.h):
// kernels 1×1 to 11×11 (kh != kw included), strides 1-4, padding 0 to past half the
// kernel, channel groups at an offset, plane sizes 1, primes and sizes the window does
// not divide. Data movement is exact: every output must equal its reference bit for
// bit (padding taps +0.0). Every run fills out with NaN first (an unwritten output
// fails), splits the units over several calls (bit-identical results), and the input
// and output sit flush against inaccessible pages (any access outside them faults).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "RowEngines.h"
#include "compiler/codegen/LayoutEmitter.h"

namespace nnc::testing {
namespace {

using codegen::LayoutKernelFn;
using codegen::LayoutSpec;

// The reference: what out should hold, from x (and residual) by the spec's definition.
std::vector<float> reference(const LayoutSpec& s, const std::vector<float>& x, const std::vector<float>& res) {
  std::vector<float> out;
  if (s.kind == LayoutSpec::Im2col) {
    const int64_t ho = s.outH(), wo = s.outW(), K = s.cg * s.kh * s.kw;
    out.assign(size_t(s.batch * ho * wo * K), 0.0f);
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t i = 0; i < ho; ++i)
        for (int64_t j = 0; j < wo; ++j)
          for (int64_t ci = 0; ci < s.cg; ++ci)
            for (int64_t r = 0; r < s.kh; ++r)
              for (int64_t c = 0; c < s.kw; ++c) {
                int64_t y = i * s.sh - s.ph + r, xx = j * s.sw - s.pw + c;
                float v = y >= 0 && y < s.h && xx >= 0 && xx < s.w
                              ? x[size_t(((b * s.c + s.c0 + ci) * s.h + y) * s.w + xx)]
                              : 0.0f;
                out[size_t(((b * ho + i) * wo + j) * K + (ci * s.kh + r) * s.kw + c)] = v;
              }
    return out;
  }
  if (s.kind == LayoutSpec::PixelsIm2col) {
    const int64_t ho = s.outH(), wo = s.outW(), K = s.cg * s.kh * s.kw;
    out.assign(size_t(s.batch * ho * wo * K), 0.0f);
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t i = 0; i < ho; ++i)
        for (int64_t j = 0; j < wo; ++j)
          for (int64_t r = 0; r < s.kh; ++r)
            for (int64_t c = 0; c < s.kw; ++c)
              for (int64_t ci = 0; ci < s.cg; ++ci) {
                int64_t y = i * s.sh - s.ph + r, xx = j * s.sw - s.pw + c;
                float v = y >= 0 && y < s.h && xx >= 0 && xx < s.w ? x[size_t(((b * s.h + y) * s.w + xx) * s.c + s.c0 + ci)]
                                                                  : 0.0f;
                out[size_t(((b * ho + i) * wo + j) * K + (r * s.kw + c) * s.cg + ci)] = v;
              }
    return out;
  }
  const int64_t P = s.h * s.w;
  out = res; // channels outside the group keep what was there (the residual's copy here)
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t n = 0; n < s.cg; ++n)
      for (int64_t p = 0; p < P; ++p) {
        size_t at = size_t((b * s.c + s.c0 + n) * P + p);
        float v = x[size_t((b * P + p) * s.cg + n)];
        out[at] = s.residual ? v + res[at] : v;
      }
  return out;
}

bool checkLayout(runtime::JitEngine& jit, const char* family, const LayoutSpec& s, bool guardAfter) {
  const int64_t inCount = s.im2col() ? s.batch * s.c * s.h * s.w : s.batch * s.h * s.w * s.cg;
  const int64_t outCount = s.im2col() ? s.batch * s.outH() * s.outW() * s.cg * s.kh * s.kw : s.batch * s.c * s.h * s.w;
  std::mt19937 rng(uint32_t(s.c * 7919 + s.h * 104729 + s.w * 31 + s.kh * 17 + s.sw * 5 + s.c0));
  std::uniform_real_distribution<float> uni(-4.0f, 4.0f);
  GuardedBuffer x(size_t(inCount), guardAfter), out(size_t(outCount), !guardAfter), res(size_t(outCount), guardAfter);
  for (size_t k = 0; k < x.size(); ++k) x.data()[k] = uni(rng);
  for (size_t k = 0; k < res.size(); ++k) res.data()[k] = uni(rng);
  std::vector<float> want = reference(s, x.values(), res.values());

  auto kernel = reinterpret_cast<LayoutKernelFn>(jit.kernel(s));
  // The whole map's side arrives at channel c0 (LayoutEmitter.h).
  const int64_t off = codegen::layoutChannelOffset(s);
  const bool im2col = s.im2col();
  auto f = [&](const float* xp, const float* rp, float* op, int64_t b, int64_t e) {
    kernel(xp + (im2col ? off : 0), im2col ? rp : rp + off, op + (im2col ? 0 : off), b, e);
  };
  const int64_t units = codegen::layoutUnits(s), cut = units / 3;
  // ToPlanes writes only its group's channels: start from the residual's values so the
  // others compare equal; Im2col writes everything: start from NaN.
  auto reset = [&] {
    if (s.kind == LayoutSpec::ToPlanes) std::memcpy(out.data(), res.data(), out.size() * sizeof(float));
    else std::fill(out.data(), out.data() + out.size(), NAN);
  };
  reset();
  f(x.data(), res.data(), out.data(), 0, cut);
  f(x.data(), res.data(), out.data(), cut, cut);
  f(x.data(), res.data(), out.data(), cut, units);
  std::vector<float> split = out.values();
  reset();
  f(x.data(), res.data(), out.data(), 0, units);
  if (std::memcmp(split.data(), out.data(), split.size() * sizeof(float)) != 0) {
    ADD_FAILURE() << family << " " << s.key() << ": split units differ from one call";
    return false;
  }
  for (size_t k = 0; k < want.size(); ++k)
    if (std::memcmp(&want[k], out.data() + k, sizeof(float)) != 0) {
      ADD_FAILURE() << family << " " << s.key() << " batch " << s.batch << " element " << k << ": got "
                    << out.data()[k] << ", want " << want[k];
      return false;
    }
  return true;
}

struct Conv {
  int64_t kh, kw, sh, sw, ph, pw;
};

std::vector<LayoutSpec> im2colSpecs(int perCase, LayoutSpec::Kind kind = LayoutSpec::Im2col) {
  const Conv convs[] = {{1, 1, 1, 1, 0, 0}, {1, 1, 2, 2, 0, 0}, {3, 3, 1, 1, 1, 1}, {3, 3, 2, 2, 1, 1},
                        {5, 5, 1, 1, 0, 0}, {5, 5, 1, 1, 2, 2}, {3, 1, 1, 1, 1, 0}, {1, 3, 1, 2, 0, 1},
                        {7, 7, 2, 2, 3, 3}, {11, 11, 4, 4, 2, 2}, {2, 3, 3, 1, 1, 2}, {3, 3, 1, 1, 3, 2},
                        // padded 1×1 stride 1 (a first conv's NCHW image padded into NHWC): W pixels a vector
                        {1, 1, 1, 1, 3, 3}, {1, 1, 1, 1, 0, 2}, {1, 1, 2, 1, 1, 1}};
  const int64_t sizes[][2] = {{1, 1}, {2, 3}, {5, 5}, {7, 7}, {7, 13}, {11, 8}, {17, 31}, {29, 23}, {3, 40}};
  const int64_t groups[][3] = {{3, 0, 3}, {5, 2, 3}, {8, 4, 4}, {1, 0, 1}}; // c, c0, cg
  std::vector<LayoutSpec> out;
  int64_t caseIndex = 0;
  for (const Conv& k : convs)
    for (const auto& g : groups) {
      std::vector<LayoutSpec> fit;
      for (auto [h, w] : sizes) {
        LayoutSpec s;
        s.kind = kind;
        s.batch = 1 + caseIndex % 3, s.c = g[0], s.c0 = g[1], s.cg = g[2], s.h = h, s.w = w;
        s.kh = k.kh, s.kw = k.kw, s.sh = k.sh, s.sw = k.sw, s.ph = k.ph, s.pw = k.pw;
        if (s.outH() >= 1 && s.outW() >= 1) fit.push_back(s);
      }
      for (int t = 0; t < std::min<int>(perCase, int(fit.size())); ++t)
        out.push_back(fit[size_t(caseIndex + t) % fit.size()]);
      ++caseIndex;
    }
  return out;
}

std::vector<LayoutSpec> toPlanesSpecs() {
  std::vector<LayoutSpec> out;
  const int64_t planes[][2] = {{1, 1}, {4, 4}, {3, 5}, {7, 7}, {13, 17}, {2, 8}};
  const int64_t groups[][3] = {{1, 0, 1}, {6, 0, 6}, {6, 3, 3}, {13, 5, 7}, {32, 16, 16}};
  int64_t i = 0;
  for (auto [h, w] : planes)
    for (const auto& g : groups) {
      LayoutSpec s;
      s.kind = LayoutSpec::ToPlanes;
      s.batch = 1 + i % 3, s.c = g[0], s.c0 = g[1], s.cg = g[2], s.h = h, s.w = w, s.residual = i % 2 == 1;
      out.push_back(s);
      ++i;
    }
  return out;
}

void checkAll(const std::vector<LayoutSpec>& specs, const RowEngine& row) {
  row.jit->prepare(std::vector<codegen::KernelSpec>(specs.begin(), specs.end()));
  size_t checked = 0;
  for (const LayoutSpec& s : specs) {
    ASSERT_TRUE(checkLayout(*row.jit, row.family, s, checked % 2 == 0));
    ++checked;
  }
  std::printf("  %s: %zu specs\n", row.family, checked);
}

TEST(Layout, Im2colMatchesReference) {
  for (const RowEngine& row : executableRows())
    ASSERT_NO_FATAL_FAILURE(checkAll(im2colSpecs(row.jit == &hostJit() ? 2 : 1), row));
}

// From NHWC: the same kernels, strides, paddings and groups, plus channel runs below, at
// and above the vector width (whole-map groups take the one-run-per-window-row path).
TEST(Layout, PixelsIm2colMatchesReference) {
  std::vector<LayoutSpec> specs = im2colSpecs(1, LayoutSpec::PixelsIm2col);
  const int64_t groups[][3] = {{16, 0, 16}, {20, 0, 20}, {37, 0, 37}, {40, 8, 17}, {64, 0, 64}};
  const Conv convs[] = {{3, 3, 1, 1, 1, 1}, {3, 3, 2, 2, 1, 1}, {1, 1, 2, 2, 0, 0}, {5, 3, 1, 2, 2, 0}};
  int64_t i = 0;
  for (const auto& g : groups)
    for (const Conv& k : convs) {
      LayoutSpec s;
      s.kind = LayoutSpec::PixelsIm2col;
      s.batch = 1 + i % 2, s.c = g[0], s.c0 = g[1], s.cg = g[2], s.h = 5 + i % 4, s.w = 9 - i % 3;
      s.kh = k.kh, s.kw = k.kw, s.sh = k.sh, s.sw = k.sw, s.ph = k.ph, s.pw = k.pw;
      specs.push_back(s);
      ++i;
    }
  for (const RowEngine& row : executableRows()) ASSERT_NO_FATAL_FAILURE(checkAll(specs, row));
}

// 1×1 stride-1 unpadded im2col is a transpose through W×W register blocks: channel
// counts and row widths below, at and above W (4, 8, 16) with tails, a group at an offset.
TEST(Layout, Im2colTransposeMatchesReference) {
  std::vector<LayoutSpec> specs;
  const int64_t groups[][3] = {{16, 0, 16}, {20, 2, 17}, {40, 8, 32}, {9, 0, 9}, {5, 1, 4}};
  const int64_t sizes[][2] = {{1, 7}, {3, 19}, {5, 16}, {2, 40}, {4, 4}};
  int64_t i = 0;
  for (const auto& g : groups)
    for (auto [h, w] : sizes) {
      LayoutSpec s;
      s.kind = LayoutSpec::Im2col;
      s.batch = 1 + i++ % 2, s.c = g[0], s.c0 = g[1], s.cg = g[2], s.h = h, s.w = w;
      specs.push_back(s);
    }
  for (const RowEngine& row : executableRows()) ASSERT_NO_FATAL_FAILURE(checkAll(specs, row));
}

TEST(Layout, ToPlanesMatchesReference) {
  for (const RowEngine& row : executableRows()) ASSERT_NO_FATAL_FAILURE(checkAll(toPlanesSpecs(), row));
}

TEST(Layout, InvalidSpecsThrow) {
  LayoutSpec ok;
  ok.c = 4, ok.h = 5, ok.w = 5, ok.c0 = 0, ok.cg = 4, ok.kh = 3, ok.kw = 3;
  EXPECT_NO_THROW(codegen::validateLayoutSpec(ok));
  auto bad = [&](auto change) {
    LayoutSpec s = ok;
    change(s);
    EXPECT_THROW(codegen::validateLayoutSpec(s), std::invalid_argument) << s.key();
  };
  bad([](LayoutSpec& s) { s.batch = -1; });
  bad([](LayoutSpec& s) { s.h = 0; });
  bad([](LayoutSpec& s) { s.c0 = 2; });        // group past the channels
  bad([](LayoutSpec& s) { s.cg = 0; });
  bad([](LayoutSpec& s) { s.sh = 0; });
  bad([](LayoutSpec& s) { s.pw = -1; });
  bad([](LayoutSpec& s) { s.kh = 8; });        // empty output
}

TEST(Layout, KeysDifferWhenTheCodeDoes) {
  LayoutSpec a;
  a.c = 4, a.h = 5, a.w = 5, a.cg = 2, a.kh = 3, a.kw = 3;
  LayoutSpec b = a;
  b.c0 = 1, b.batch = 7; // batch is a runtime range, c0 a pointer offset
  EXPECT_EQ(a.key(), b.key());
  for (auto change : {+[](LayoutSpec& s) { s.ph = 1; }, +[](LayoutSpec& s) { s.sw = 2; },
                      +[](LayoutSpec& s) { s.kind = LayoutSpec::ToPlanes; },
                      +[](LayoutSpec& s) { s.kind = LayoutSpec::PixelsIm2col; }, +[](LayoutSpec& s) { s.cg = 1; }}) {
    LayoutSpec c = a;
    change(c);
    EXPECT_NE(a.key(), c.key());
  }
}

} // namespace
} // namespace nnc::testing
