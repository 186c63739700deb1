// The depthwise convolution kernel against a double-precision reference, on every
// CpuTable row this host can execute (RowEngines.h): kernels 1×1 to 31×31 (kh != kw
// included; above 5×5 the window rows are a loop), strides 1-3, padding 0 to past the kernel (windows wholly in the padding),
// multipliers 1-3, plane sizes 1, primes and sizes the window does not divide, with
// and without bias, with an activation and a residual. u = 2^-24.
//   |out − ref| ≤ (n + 2) · u · (|bias| + Σ|w·x|) + u·|ref|: n = kh·kw FMA (or
//   multiply-add) roundings of a sum whose terms are bounded by Σ|w·x|, then the
//   activation (relu6 and relu are exact; the others are not used here) and the
//   residual add.
// Every run fills out with NaN first, splits the planes over several calls
// (bit-identical), and puts every tensor flush against inaccessible pages. A NaN in the
// input must not reach outputs whose windows do not cover it (padding taps are 0, not
// 0 · a clamped element). Weights stored below f32 (f16, bf16, i8, i4: a rowTableLayout
// of one row per output plane) are checked against the values they store
// (storedWeightValues), with the same allowance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "RowEngines.h"
#include "compiler/codegen/DepthwiseEmitter.h"

namespace nnc::testing {
namespace {

using codegen::Activation;
using codegen::DepthwiseKernelFn;
using codegen::DepthwiseSpec;

constexpr double kU = 0x1p-24;

::testing::AssertionResult checkDepthwise(runtime::JitEngine& jit, const char* family, const DepthwiseSpec& s,
                                          bool guardAfter, bool withNaN = false) {
  const int64_t outs = s.c * s.multiplier, taps = s.kh * s.kw, ho = s.outH(), wo = s.outW();
  const int64_t inCount = s.batch * s.c * s.h * s.w, outCount = s.batch * outs * ho * wo;
  std::mt19937 rng(uint32_t(s.c * 7919 + s.h * 104729 + s.w * 31 + s.kh * 17 + s.sw * 5 + s.ph + s.multiplier));
  std::uniform_real_distribution<float> uni(-2.0f, 2.0f);
  GuardedBuffer x(size_t(inCount), guardAfter), w(size_t(outs * taps), !guardAfter), bias(size_t(outs), guardAfter),
      res(size_t(outCount), !guardAfter), out(size_t(outCount), guardAfter);
  for (size_t k = 0; k < x.size(); ++k) x.data()[k] = uni(rng);
  for (size_t k = 0; k < w.size(); ++k) w.data()[k] = uni(rng);
  for (size_t k = 0; k < bias.size(); ++k) bias.data()[k] = uni(rng);
  for (size_t k = 0; k < res.size(); ++k) res.data()[k] = uni(rng);
  std::vector<bool> nanAt(size_t(inCount), false);
  if (withNaN)
    for (size_t k = 5; k < x.size(); k += 17) x.data()[k] = NAN, nanAt[k] = true;

  // Below f32 the kernel reads the packed table and the reference its stored values.
  const float* weights = w.data();
  std::vector<float> packed, wRef(w.data(), w.data() + w.size());
  if (s.weightType != DType::F32) {
    const codegen::PanelLayout table = codegen::rowTableLayout(outs, taps, s.weightType, s.group);
    packed.resize(size_t((table.totalBytes() + 3) / 4));
    codegen::packWeightsPanel(table, w.data(), packed.data());
    wRef = codegen::storedWeightValues(table, w.data());
    weights = packed.data();
  }
  auto f = reinterpret_cast<DepthwiseKernelFn>(jit.kernel(s));
  const int64_t planes = s.batch * outs, cut = planes / 3;
  std::fill(out.data(), out.data() + out.size(), NAN);
  f(x.data(), weights, bias.data(), res.data(), out.data(), 0, cut);
  f(x.data(), weights, bias.data(), res.data(), out.data(), cut, planes);
  std::vector<float> split = out.values();
  std::fill(out.data(), out.data() + out.size(), NAN);
  f(x.data(), weights, bias.data(), res.data(), out.data(), 0, planes);
  if (std::memcmp(split.data(), out.data(), split.size() * sizeof(float)) != 0) {
    return ::testing::AssertionFailure() << family << " " << s.key() << ": split planes differ from one call";
  }
  for (int64_t p = 0; p < planes; ++p) {
    const int64_t o = p % outs, inPlane = p / s.multiplier;
    for (int64_t i = 0; i < ho; ++i)
      for (int64_t j = 0; j < wo; ++j) {
        double sum = s.bias ? bias.data()[o] : 0.0, mag = std::fabs(sum);
        bool nan = false;
        for (int64_t r = 0; r < s.kh; ++r)
          for (int64_t c = 0; c < s.kw; ++c) {
            int64_t yy = i * s.sh - s.ph + r, xx = j * s.sw - s.pw + c;
            if (yy < 0 || yy >= s.h || xx < 0 || xx >= s.w) continue;
            size_t at = size_t((inPlane * s.h + yy) * s.w + xx);
            nan = nan || nanAt[at];
            double t = double(wRef[size_t(o * taps + r * s.kw + c)]) * x.data()[at];
            sum += t, mag += std::fabs(t);
          }
        double ref = sum;
        if (s.act == Activation::Relu) ref = std::max(ref, 0.0);
        if (s.act == Activation::Relu6) ref = std::min(std::max(ref, 0.0), 6.0);
        const size_t at = size_t((p * ho + i) * wo + j);
        if (s.residual) ref += res.data()[at];
        const double allowance = double(taps + 2) * kU * mag + kU * std::fabs(ref);
        const float got = out.data()[at];
        bool ok = nan ? std::isnan(got) || s.act != Activation::None : std::fabs(double(got) - ref) <= allowance;
        if (!ok) {
          return ::testing::AssertionFailure() << family << " " << s.key() << (guardAfter ? "" : " (guard before)")
                                               << " batch " << s.batch << " plane " << p << " out (" << i << ", " << j
                                               << "): got " << got << ", want " << ref << " ± " << allowance;
        }
      }
  }
  return ::testing::AssertionSuccess();
}

std::vector<DepthwiseSpec> specs(int perCase) {
  struct K {
    int64_t kh, kw, sh, sw, ph, pw;
  };
  const K ks[] = {{3, 3, 1, 1, 1, 1}, {3, 3, 2, 2, 1, 1}, {3, 3, 1, 1, 0, 0}, {5, 5, 1, 1, 2, 2},
                  {5, 5, 2, 2, 2, 2}, {1, 1, 1, 1, 0, 0}, {1, 1, 2, 2, 0, 0}, {3, 5, 1, 3, 1, 2},
                  {7, 7, 1, 1, 3, 3}, {2, 2, 2, 2, 0, 0}, {3, 3, 1, 1, 4, 3}, {1, 3, 1, 1, 0, 1},
                  {9, 9, 1, 1, 4, 4}, {13, 11, 2, 1, 6, 7}, {1, 41, 1, 2, 0, 20}, {31, 31, 1, 1, 15, 15}};
  // 3 × 150 and 4 × 301: rows long enough for whole groups of interior vectors on every row
  const int64_t sizes[][2] = {{1, 1}, {2, 3}, {7, 7}, {14, 14}, {11, 8}, {17, 31}, {5, 37}, {56, 57}, {3, 150}, {4, 301}};
  const Activation acts[] = {Activation::None, Activation::Relu6, Activation::Relu};
  std::vector<DepthwiseSpec> out;
  int64_t caseIndex = 0;
  for (const K& k : ks)
    for (int64_t m : {1, 2, 3}) {
      std::vector<DepthwiseSpec> fit;
      for (auto [h, w] : sizes) {
        DepthwiseSpec s;
        s.batch = 1 + caseIndex % 2, s.c = caseIndex % 3 == 0 ? 5 : 3, s.multiplier = m, s.h = h, s.w = w;
        s.kh = k.kh, s.kw = k.kw, s.sh = k.sh, s.sw = k.sw, s.ph = k.ph, s.pw = k.pw;
        s.bias = caseIndex % 4 != 1;
        s.act = acts[caseIndex % 3];
        s.residual = caseIndex % 5 == 2;
        if (s.outH() >= 1 && s.outW() >= 1) fit.push_back(s);
      }
      for (int t = 0; t < std::min<int>(perCase, int(fit.size())); ++t)
        out.push_back(fit[size_t(caseIndex + t) % fit.size()]);
      ++caseIndex;
    }
  return out;
}

TEST(Depthwise, MatchesReference) {
  for (const RowEngine& row : executableRows()) {
    std::vector<DepthwiseSpec> all = specs(row.jit == &hostJit() ? 2 : 1);
    row.jit->prepare(std::vector<codegen::KernelSpec>(all.begin(), all.end()));
    size_t checked = 0;
    for (const DepthwiseSpec& s : all) {
      ASSERT_TRUE(checkDepthwise(*row.jit, row.family, s, checked % 2 == 0));
      ++checked;
    }
    std::printf("  %s: %zu specs\n", row.family, checked);
  }
}

// The NHWC kernel (spec.pixels: multiplier 1, f32 weights stored [taps, c]) against the
// planes kernel on the same data, laid out NHWC: the same taps in the same order, so
// the same bits. Channel counts below, at and above the vector width with tails;
// inputs and outputs flush against guard pages; units split over two calls.
::testing::AssertionResult checkPixelsDepthwise(runtime::JitEngine& jit, const char* family, DepthwiseSpec s) {
  s.multiplier = 1;
  const int64_t C = s.c, taps = s.kh * s.kw, ho = s.outH(), wo = s.outW(), P = s.h * s.w, Q = ho * wo;
  std::mt19937 rng(uint32_t(C * 31 + s.h * 7 + s.kw));
  std::uniform_real_distribution<float> uni(-2.0f, 2.0f);
  auto random = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = uni(rng);
    return v;
  };
  const std::vector<float> x = random(s.batch * C * P), w = random(C * taps), bias = random(C), res = random(s.batch * C * Q);
  std::vector<float> want(res.size(), NAN);
  auto planesKernel = reinterpret_cast<DepthwiseKernelFn>(jit.kernel(s));
  planesKernel(x.data(), w.data(), bias.data(), res.data(), want.data(), 0, s.units());

  DepthwiseSpec px = s;
  px.pixels = true;
  GuardedBuffer xh(x.size(), true), wt(w.size(), false), rh(res.size(), true), out(res.size(), false);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t ch = 0; ch < C; ++ch) {
      for (int64_t p = 0; p < P; ++p) xh.data()[(b * P + p) * C + ch] = x[size_t((b * C + ch) * P + p)];
      for (int64_t q = 0; q < Q; ++q) rh.data()[(b * Q + q) * C + ch] = res[size_t((b * C + ch) * Q + q)];
    }
  for (int64_t ch = 0; ch < C; ++ch)
    for (int64_t t = 0; t < taps; ++t) wt.data()[t * C + ch] = w[size_t(ch * taps + t)];
  auto f = reinterpret_cast<DepthwiseKernelFn>(jit.kernel(px));
  std::fill(out.data(), out.data() + out.size(), NAN);
  const int64_t units = px.units(), cut = units / 2;
  f(xh.data(), wt.data(), bias.data(), rh.data(), out.data(), 0, cut);
  f(xh.data(), wt.data(), bias.data(), rh.data(), out.data(), cut, units);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t q = 0; q < Q; ++q) {
        const float got = out.data()[(b * Q + q) * C + ch], ref = want[size_t((b * C + ch) * Q + q)];
        if (std::memcmp(&got, &ref, sizeof got) != 0) {
          return ::testing::AssertionFailure() << family << " " << px.key() << " image " << b << " channel " << ch
                                               << " pixel " << q << ": got " << got << ", the planes kernel " << ref;
        }
      }
  return ::testing::AssertionSuccess();
}

TEST(Depthwise, PixelsMatchThePlanesKernel) {
  const int64_t channels[] = {1, 7, 16, 37};
  for (const RowEngine& row : executableRows()) {
    size_t checked = 0;
    for (DepthwiseSpec s : specs(1)) {
      if (s.multiplier != 1) continue;
      s.c = channels[checked % 4];
      ASSERT_TRUE(checkPixelsDepthwise(*row.jit, row.family, s));
      ++checked;
    }
    std::printf("  %s: %zu NHWC specs\n", row.family, checked);
  }
}

// Windows wider than 32 columns (a loop over them) and padding wider than the unrolled
// border's budget: the border columns in runtime loops that test each tap's column
// (DepthwiseEmitter.cpp: kMaxUnrolledWindowColumns, kMaxUnrolledBorderTaps), strided or
// not; planes against the reference and NHWC against the planes, on every row.
TEST(Depthwise, WideBordersGoInLoops) {
  struct Wide {
    int64_t h, w, kh, kw, sh, sw, ph, pw;
  };
  const Wide wide[] = {{2, 200, 1, 129, 1, 1, 0, 64}, {3, 257, 2, 129, 1, 2, 1, 64}, {5, 300, 3, 45, 2, 3, 2, 30},
                       {1, 50, 1, 31, 1, 1, 0, 300}};
  for (const RowEngine& row : executableRows()) {
    for (const Wide& k : wide) {
      DepthwiseSpec s;
      s.c = 3, s.h = k.h, s.w = k.w, s.kh = k.kh, s.kw = k.kw, s.sh = k.sh, s.sw = k.sw, s.ph = k.ph, s.pw = k.pw;
      s.bias = true, s.act = Activation::Relu6, s.residual = true;
      ASSERT_TRUE(checkDepthwise(*row.jit, row.family, s, true));
      ASSERT_TRUE(checkDepthwise(*row.jit, row.family, s, false, /*withNaN=*/true));
      ASSERT_TRUE(checkPixelsDepthwise(*row.jit, row.family, s));
    }
  }
}

TEST(Depthwise, WeightsStoredBelowF32) {
  struct Storage {
    DType type;
    int64_t group;
  };
  for (const RowEngine& row : executableRows())
    for (Storage st : {Storage{DType::F16, 0}, Storage{DType::BF16, 0}, Storage{DType::I8, 0}, Storage{DType::I4, 32},
                       Storage{DType::I4, 5}}) {
      std::vector<DepthwiseSpec> all = specs(1);
      all.resize(std::min<size_t>(all.size(), 14)); // 3×3 to 5×5, strides, multipliers
      all.push_back(specs(1).at(24));               // 7×7: taps past one vector
      for (DepthwiseSpec& s : all) s.weightType = st.type, s.group = st.group;
      for (size_t i = 0; i < all.size(); ++i) ASSERT_TRUE(checkDepthwise(*row.jit, row.family, all[i], i % 2 == 0));
    }
}

TEST(Depthwise, NaNStaysInsideItsWindows) {
  for (const RowEngine& row : executableRows()) {
    DepthwiseSpec s;
    s.c = 2, s.h = 9, s.w = 21, s.kh = 3, s.kw = 3, s.ph = 2, s.pw = 2, s.bias = true;
    for (int64_t sw : {1, 2}) {
      s.sw = sw;
      ASSERT_TRUE(checkDepthwise(*row.jit, row.family, s, true, /*withNaN=*/true));
    }
  }
}

TEST(Depthwise, InvalidSpecsThrow) {
  DepthwiseSpec ok;
  ok.c = 3, ok.h = 5, ok.w = 5, ok.kh = 3, ok.kw = 3;
  EXPECT_NO_THROW(codegen::validateDepthwiseSpec(ok));
  for (auto change : {+[](DepthwiseSpec& s) { s.c = 0; }, +[](DepthwiseSpec& s) { s.multiplier = 0; },
                      +[](DepthwiseSpec& s) { s.pixels = true, s.multiplier = 2; },
                      +[](DepthwiseSpec& s) { s.pixels = true, s.weightType = DType::BF16; },
                      +[](DepthwiseSpec& s) { s.sw = 0; }, +[](DepthwiseSpec& s) { s.ph = -1; },
                      +[](DepthwiseSpec& s) { s.kh = 6; }, +[](DepthwiseSpec& s) { s.batch = -1; }}) {
    DepthwiseSpec s = ok;
    change(s);
    EXPECT_THROW(codegen::validateDepthwiseSpec(s), std::invalid_argument) << s.key();
  }
}

} // namespace
} // namespace nnc::testing
